#pragma once
// Backward code generation: Problem + ACSR -> one self-contained CUDA C++ translation unit with the
// backward pass of the pattern's attention (libsplat/device/backward.cuh): dQ walks the row plan
// (the forward's tiles: each query row tile and its kept keys), dK/dV walk the column plan (the
// plan of the column ACSR, analysis/columns.h: each key row tile and the query rows that keep it).
// In the deterministic mode (the default) each output row is written by one block, so the results
// are the same bits run to run: no floating-point atomic anywhere. The fast mode
// (BackwardTuning::fast) adds dQ by atomics in the dK/dV kernels and runs no dQ kernel. bf16/fp16
// at a head_dim over 128 run each dQ and dK/dV pass as column slices of 128 output columns, an entry
// point each (..._pN, ..._pNs1), that recompute S and dP over the whole width.
//
// Every entry point takes the same parameters (backward_params()):
//   (const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse,
//    void* dq, void* dk, void* dv, float* ws, const int* table)
// q, o, dout, dq [batch, heads, seq_len, head_dim]; k, v, dk, dv [batch, kv_heads, kv_len, head_dim];
// lse [batch, heads, seq_len] fp32 (the forward's, CodegenOptions::save_lse). Launch in order, grid
// (grid_x, batch*heads) (a head group's module: batch*group_heads), block and dynamic shared memory
// as in BackwardModule::kernels.
#include <cstdint>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

// The backward kernels' tuning; 0 / -1 pick the defaults (generate_backward).
struct BackwardTuning {
  int stages = 0;       // stages: stages of the walked operands, 2 or 3
  int step = 0;         // cw: walked rows per product step (S and dP in registers), 32 or 64
  int a_regs = -1;      // areg: the tile's row operands as register fragments (1) or read from shared memory (0)
  int min_blocks = -1;  // minb: __launch_bounds__ minimum blocks per SM, 0 (none) .. 8
  int wgmma = -1;       // wg: bf16/fp16 on wgmma (1, sm_90a, head_dim 64, deterministic mode) or mma.sync (0)
  int joint = -1;       // joint: the dQ and dK/dV passes in one launch (1: splat_bwd_p0, where both plans have
                        // one pass and the kernels one column slice; the default on wgmma) or one each (0)
  int order = -1;       // order: the joint launch's blocks, the dK/dV tiles of every head before the dQ tiles (0)
                        // or head by head, each head's dK/dV tiles then its dQ tiles (1); unset, it and stages
                        // follow the plans (generate_backward: head by head and 3 stages where the plans allow)
  // The fast mode (`--backward-mode fast`): the dK/dV kernel also adds dS.K to dQ by fp32
  // atomics, so no dQ kernel recomputes S and dP (5 matrix products a kept tile instead of 7); dQ's
  // bits then vary run to run. Not a tuning key: it changes what the kernels guarantee.
  bool fast = false;
  bool operator==(const BackwardTuning&) const = default;
};
// Parses "key=value,..." with keys stages (2|3), cw (32|64), areg (0|1), minb (0..8), wg (0|1), joint (0|1),
// order (0|1), e.g.
// `splatc bench --pass backward --tune-backward cw=32,minb=2`. Throws std::invalid_argument.
BackwardTuning parse_backward_tuning(const std::string& spec);
// A resolved tuning as parse_backward_tuning reads it back ("stages=3,cw=64,areg=0,minb=3,wg=1,joint=1,
// order=1"): the manifest's backward "tuning" and `bench`'s backward note, so that a run can be repeated
// with --tune-backward. Keys still unset (negative or 0) are left out.
std::string format_backward_tuning(const BackwardTuning& t);

struct BackwardModule {
  std::string name;                   // problem name
  std::string source;                 // CUDA C++
  std::vector<KernelDesc> kernels;    // launch order: D, the dQ passes, the dK/dV passes (or the two in one
                                      // launch, splat_bwd_p0, then their split tiles' combines), the K/V-head reduction
  std::vector<int32_t> table;         // the row plan's words, then the column plan's (from column_table_word)
  int64_t column_table_word = 0;
  int64_t workspace_floats_per_bh = 0;  // D, and the accumulators handed between passes
  int64_t nnz = 0;
  std::string engine;                 // "wgmma" or "mma.sync" (bf16/fp16), "mma.sync 3xtf32" (fp32), "mma.sync tf32"
  std::string grid_y = "batch*heads";  // grid.y: "batch*group_heads" for a head group's module;
                                       // a packed batch: "sequences*heads" ("sequences*group_heads")
  bool varlen = false;                 // a packed variable-length batch: the entries take cu_seqlens (parameter 11)
  // Per-head patterns over grouped K/V heads: the head groups' modules share one workspace (its
  // first region holds every query head's dK/dV accumulators); the last group's splat_bwd_reduce
  // writes dK and dV. Launch the groups in order with one ws of the largest group's size.
  bool shared_kv = false;
  std::string mode = "deterministic";
  BackwardTuning tuning;              // as generated (defaults resolved)
  std::vector<std::string> notes;     // the engine, mode and each tuning value with why (explain_backward)
  BackwardPlans plans;
};

// The module's choices as text (splatc emit --pass backward --explain): the engine and mode, each
// backward tuning value with where it came from (the tuning, or the measured default and why), then
// each entry point with its launch and role, in launch order.
std::string explain_backward(const BackwardModule& m);

// The parameter layout shared by the backward entry points.
const std::vector<ParamDesc>& backward_params();

// Throws splat::Error (file and field) for a problem the backward kernels do not take: head_dim over
// 128 or not whole 16-byte row chunks (a multiple of 8 in bf16/fp16, of 4 in fp32/tf32).
void check_backward(const Problem& p);
// check_backward, then the module. Per-head patterns: call it for each head group's problem
// (head_group_problems; its module serves the group's heads, grid.y batch*group_heads); the whole
// problem is std::invalid_argument. arch: the target ("sm_90a" lets bf16/fp16 at head_dim 64 run on
// wgmma, BwdWgmmaEngine; "" or any other: the engines every sm_80+ GPU runs).
BackwardModule generate_backward(const Problem& p, const Acsr& acsr, const BackwardTuning& tuning = {},
                                 const std::string& arch = "");

// The backward part of manifest.json: entry points in launch order, parameters, workspace, table.
nlohmann::json backward_manifest(const BackwardModule& mod, const std::vector<std::string>& files);

}  // namespace splat
