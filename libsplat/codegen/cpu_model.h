#pragma once
// CPU model of the fused kernel: walks the same plan (passes, row tiles, items, key tiles of BC
// keys) and applies the online softmax in the same order, in float64. Tests compare it with
// brute-force attention to check that the plan covers every kept (row, key) exactly once.
#include <cstdint>
#include <vector>

#include "libsplat/codegen/plan.h"

namespace splat {

// One head: q [seq_len][d], k and v [kv_len][d], row-major; returns o [seq_len][d]
// (rows with no kept key are zero). scale multiplies q.k before the softmax.
// headroom > 0 models the lazy rescale (MmaEngine::softmax, LAZY; natural-log units, the kernels'
// 8 in log2 is 8 ln 2): a row's exponent reference moves only when a key tile's max exceeds it by
// more than headroom, and every exponentiated score must stay <= e^headroom (checked: throws
// std::logic_error). The kernels decide per warp (16 rows), which only moves more references.
// kernels: the structure (analysis/structure.h) whose closed-form kernels to walk instead of the
// plan's passes: a Band as band_pass does; a BandWithGlobals as the plan's tiles of the first row
// tile, then band_pass; a WindowLattice as band_pass and then lattice_pass; Unstructured: the plan.
// checked_sums models the wgmma engine's checked row sums (WgmmaEngine, CHK): the reference stays
// while each thread's share of the row's exponentials (16 of 64 keys) sums to <= e^headroom, and
// otherwise moves to the row max.
std::vector<double> cpu_model_attention(const Plan& plan, int64_t d, double scale,
                                        const std::vector<double>& q, const std::vector<double>& k,
                                        const std::vector<double>& v, double headroom = 0.0,
                                        bool checked_sums = false, const StructureKind& kernels = Unstructured{});

// The per-row kept keys the plan visits, in visiting order (for coverage tests). length >= 0: one
// sequence of that length of a packed variable-length batch (rows and keys below it; kernels
// Unstructured: the plan's tables clipped, as fused_pass; a unit-step Band: band_pass_varlen's walk).
std::vector<std::vector<int64_t>> cpu_model_visits(const Plan& plan, const StructureKind& kernels = Unstructured{},
                                                   int64_t length = -1);

// The backward pass (libsplat/device/backward.cuh) in float64, over the plans its kernels walk
// (backward_plans): one head's q [seq_len][d], k, v [kv_len][d], dout [seq_len][d]. Each row's
// log-sum-exp from its visits in the row plan; D_i = sum_j P_ij dP_ij and dQ_i over the same visits;
// dK_j and dV_j over key j's visits in the column plan (the rows that keep it). A pair the plans
// visit twice or miss shows in the gradients (tests compare them with brute force). length >= 0:
// one sequence of that length of a packed variable-length batch (both plans clipped to it, as
// cpu_model_visits clips; the arrays keep their full sizes, zero past the length). fast: dQ as the
// fast mode sums it, over the column plan's visits (each key's rows) instead of the row plan's.
struct CpuGradients {
  std::vector<double> dq, dk, dv;
};
CpuGradients cpu_model_backward(const Plan& rows, const Plan& cols, int64_t d, double scale, const std::vector<double>& q,
                                const std::vector<double>& k, const std::vector<double>& v,
                                const std::vector<double>& dout, int64_t length = -1, bool fast = false);

}  // namespace splat
