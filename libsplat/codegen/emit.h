#pragma once
// The emitters (codegen internal): each writes one part of the generated translation unit. One per
// kernel family (emit_table.cpp: the plan's tables and fused_pass, the split-KV combine;
// emit_band.cpp: band_pass, the band with global tokens, lattice_pass), the header and the pattern
// items (emit_header.cpp), the three-kernel pipeline (emit_pipeline.cpp).
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/codegen/select.h"
#include "libsplat/pattern/pattern.h"

namespace splat::emit {

struct Context {
  const Problem& p;
  const Acsr& acsr;
  const Structure& structure;
  const Plan& plan;
  const Selection& sel;
  std::string elt;         // element type in the source: float, f16_t, bf16_t
  double scale_log2 = 0;   // the problem's scale times log2(e)
  bool lse = false;        // the entry points take `float* lse` and save each row's log-sum-exp
  // The device passes' lse argument: "lse" or "nullptr".
  std::string lse_arg() const { return lse ? "lse" : "nullptr"; }
};

Context make_context(const Problem& p, const Acsr& acsr, const Structure& st, const Plan& plan, const Selection& sel);

// emit_common.cpp
std::string f32_literal(double x);
// The defines of a packed batch's or a head group's head layout (SPLAT_HEADS, SPLAT_KV_HEADS,
// SPLAT_HEAD_GROUP, SPLAT_HEAD_IDS; device/common.cuh: q_head), none for a plain problem.
void head_defines(std::ostream& s, const Problem& p);
// The engine's device type, e.g. "WgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, 2, ...>".
std::string engine_type(const Context& c, const EngineConfig& e);
// One comment line describing the configuration; deferred_pv: band and lattice kernels.
std::string engine_comment(const EngineConfig& e, bool deferred_pv);
// `extern "C" __global__ void __launch_bounds__(...) name(params) {` and its newline (a packed
// variable-length batch: one more parameter, cu_seqlens; then `float* lse` when it is saved).
std::string entry(const Context& c, const std::string& name, int block, int min_blocks);
// The typed tensor arguments of a device pass: "static_cast<const T*>(q), ..., static_cast<T*>(o)".
std::string tensor_args(const Context& c);

// emit_header.cpp: the header comment (pattern, analysis, plan), the problem's #defines, the device
// code, and the plan's items.
void header(std::ostream& s, const Context& c, const std::string& pattern_hash, int64_t max_row_runs);
// The plan's items as `__device__ const Item <k>Items[]`.
void items(std::ostream& s, const Context& c, const std::string& k = "k");

// emit_table.cpp
void table_pass(std::ostream& s, const Context& c, const KernelSpec& k);
void combine(std::ostream& s, const Context& c, const KernelSpec& k);
// The tables of a pass (kTiles<pi>, kGroups<pi>, ...), with the comment that introduces them.
// k: the tables' name prefix ("k": kTiles0, ...; the backward's column plan: "kCol").
void pass_tables(std::ostream& s, const Context& c, size_t pi, const PlanPass& pass, bool unmasked,
                 const std::string& k = "k");
// The fused_pass call of a table pass (ends with ";\n"); tile_args: ", tix, bhx" or "".
std::string fused_pass_call(const Context& c, const KernelSpec& k, const TableTraits& t, const PlanPass& pass,
                            const std::string& tile_args);

// emit_band.cpp
void band(std::ostream& s, const Context& c, const KernelSpec& k);
void band_with_globals(std::ostream& s, const Context& c, const KernelSpec& k);
void lattice(std::ostream& s, const Context& c, const KernelSpec& k);

// manifest.cpp: the tensor maps of K and V for the fused kernels' TMA loads (GeneratedModule::
// tensor_maps): rows, row pairs, and with period > 0 rows grouped by period with boxes of 64 / width
// blocks of width rows; a packed batch: [max_total_tokens][kv_heads][head_dim], boxes of 64 tokens.
std::vector<TensorMapDesc> tensor_maps(const Problem& p, int64_t period, int64_t width);

// emit_pipeline.cpp: the pipeline's segment tables and its three entry points; tabulated segments
// get their own table words when the plan's items omit global keys. Returns the entry points.
std::vector<KernelDesc> pipeline(std::ostream& s, const Context& c, std::vector<int32_t>& table, int64_t offsets_word);

}  // namespace splat::emit
