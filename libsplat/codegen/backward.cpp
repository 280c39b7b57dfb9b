#include "libsplat/codegen/backward.h"

#include <algorithm>
#include <cstdint>
#include <sstream>
#include <stdexcept>

#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/device_code.h"
#include "libsplat/codegen/emit.h"
#include "libsplat/device/geometry.cuh"
#include "trsplat/version.h"

namespace splat {
namespace {

constexpr int kBlock = 128;

// Whether the wgmma engine (BwdWgmmaEngine) can run the problem: sm_90a, 16-bit storage, head_dim
// 64 (its stages hold one 64-column block and its registers one of dK and dV each); either mode.
bool wgmma_takes(const Problem& p, const std::string& arch) {
  return arch == "sm_90a" && dtype_bytes(p.dtype) == 2 && p.head_dim == 64;
}

// The measured defaults (docs/performance.md) for what the tuning leaves unset.
BackwardTuning resolve(const Problem& p, BackwardTuning t, const std::string& arch) {
  if (t.wgmma < 0) t.wgmma = wgmma_takes(p, arch) && (t.step == 0 || t.step == 64) && t.a_regs != 1 ? 1 : 0;
  if (t.wgmma == 1) {
    if (!wgmma_takes(p, arch))
      throw Error(p.file, "--tune-backward", "wg=1 (the wgmma engine) needs --arch sm_90a, bf16 or fp16 and head_dim 64");
    // Its row operands are read from shared memory at each key tile (BwdWgmmaEngine: areg=0).
    if ((t.step != 0 && t.step != 64) || t.a_regs == 1)
      throw Error(p.file, "--tune-backward",
                  "wg=1 (the wgmma engine) steps by 64 walked rows and reads the row operands from shared memory (cw=64, areg=0)");
    t.step = 64;
    t.a_regs = 0;
  }
  // One launch for dQ and dK/dV took the wgmma engine's backward 1-12% faster (H100 and H200: window,
  // dilated, blocked, Longformer, BigBird-16k; BigBird-4k 1.3% slower), the mma.sync engine's -3..+4%
  // and the fp32 engine's 46% slower at window-4k (docs/performance.md): the default on wgmma only.
  if (t.joint < 0) t.joint = t.wgmma == 1 ? 1 : 0;
  if (t.step == 0) t.step = p.head_dim <= 64 ? 64 : 32;
  // The fast mode's dK/dV kernel holds dQ's products too: with the row operands in registers it
  // spilled at d = 64 (ptxas), without them not.
  if (t.a_regs < 0) t.a_regs = p.head_dim <= 64 && !t.fast ? 1 : 0;
  // The wgmma engine's dK/dV kernel at 3 blocks per SM (ptxas: 168 registers, a few spills) took
  // 0-7% less time than at 2 (H100, 16k peer cases); its dQ kernel fits 3 anyway.
  if (t.min_blocks < 0) t.min_blocks = t.wgmma == 1 ? 3 : 0;
  return t;
}

}  // namespace

void check_backward(const Problem& p) {
  const bool wide = dtype_bytes(p.dtype) == 2;  // BwdMmaEngine takes 256 (column slices), the fp32 engine 128
  const int chunk = wide ? 8 : 4;               // elements of a 16-byte row chunk
  const int most = wide ? 256 : 128;
  if (p.head_dim % chunk != 0 || p.head_dim > most)
    throw Error(p.file, "head_dim",
                std::string("the backward kernels need head_dim a multiple of ") + std::to_string(chunk) + " (" +
                    dtype_name(p.dtype) + ") and at most " + std::to_string(most) + ", got " + std::to_string(p.head_dim));
}

namespace {

// An emitter context for a plan's tables (the backward has no forward selection or structure).
emit::Context tables_context(const Problem& p, const Acsr& acsr, const Plan& plan) {
  static const Structure kNoStructure{};
  static const Selection kNoSelection{};
  return emit::make_context(p, acsr, kNoStructure, plan, kNoSelection);
}

const char* elt_type(DType t) { return t == DType::FP16 ? "f16_t" : t == DType::BF16 ? "bf16_t" : "float"; }

// fp32 storage (fp32 as 3xTF32, tf32): BwdTf32Engine; bf16/fp16: BwdWgmmaEngine (wg=1) or BwdMmaEngine.
bool tf32_engine(const Problem& p) { return p.dtype == DType::FP32 || p.dtype == DType::TF32; }

int backward_smem(const Problem& p, const BackwardTuning& tu, bool dkv) {
  const int hd = static_cast<int>(p.head_dim);
  if (tu.wgmma == 1) return geometry::bwd_wgmma_smem(tu.stages, hd, dkv, tu.fast);
  return tf32_engine(p) ? geometry::bwd_tf32_smem(tu.stages, hd, dkv, tu.fast ? tu.step : 0) : geometry::bwd_mma_smem(tu.stages, hd, dkv, tu.fast ? tu.step : 0);
}

// co: the first output column of the slice (BwdMmaEngine's column slices; 0 for the fp32 engine).
std::string engine_type(const Problem& p, const BackwardTuning& tu, bool dkv, int co) {
  const std::string k = dkv ? "true" : "false";
  if (tf32_engine(p))
    return "BwdTf32Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + k + ", " + std::to_string(tu.stages) + ", " +
           (p.dtype == DType::FP32 ? "true" : "false") + ", " + std::to_string(tu.step) + (tu.fast && dkv ? ", true>" : ">");
  if (tu.wgmma == 1)
    return "BwdWgmmaEngine<" + std::string(elt_type(p.dtype)) + ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + k + ", " +
           std::to_string(tu.stages) + (tu.fast && dkv ? ", true>" : ">");
  // The trailing template arguments FAST and CO, written only where they differ from the defaults.
  std::string tail = tu.fast && dkv ? ", true" : co > 0 ? ", false" : "";
  if (co > 0) tail += ", " + std::to_string(co);
  return "BwdMmaEngine<" + std::string(elt_type(p.dtype)) + ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + k + ", " +
         std::to_string(tu.stages) + ", " + (tu.a_regs ? "true" : "false") + ", " + std::to_string(tu.step) + tail + ">";
}

// An entry point's signature (backward_params; a packed batch's last parameter, cu_seqlens). pdl
// (programmatic dependent launch, sm_90a modules): the body starts by waiting for the entry before it
// (griddepcontrol.wait: that grid completed and its writes are visible; at once where it was not
// launched programmatically) and lets the next one launch (its blocks then take the SMs as this
// grid's leave, and wait in turn).
std::string entry(const Problem& p, const std::string& name, int min_blocks, bool pdl) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlock) +
         (min_blocks > 0 ? ", " + std::to_string(min_blocks) : std::string()) + ") " + name +
         "(const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse, void* dq, "
         "void* dk, void* dv, float* ws, const int* table" + (p.varlen ? ", const int* cu_seqlens" : "") + ") {\n" +
         (pdl ? "  pdl_wait();\n  pdl_launch_dependents();\n" : "");
}
// What the device functions take for cu_seqlens.
const char* cu_arg(const Problem& p) { return p.varlen ? "cu_seqlens" : "nullptr"; }

struct Layout {
  int64_t delta = 0;               // words per bh of D: seq_len rounded up to 4, so that the regions
                                   // after it stay 16-byte aligned (the fp32 engine stores float4);
                                   // with lse2_at, twice that: D, then the lse in log2 units
  int64_t lse2_at = 0;             // the wgmma engine's modules: where the log2 lse starts (words per bh)
  int64_t dq_acc = 0, kv_acc = 0;  // words per bh of the hand-over regions (0: none)
  int64_t split = 0;               // words per bh of the split chunks' partials (0: none)
  bool reduce = false;             // grouped-query heads: dK/dV reduced over each K/V head's query heads
  // Per-head patterns over grouped K/V heads: the head groups' dK/dV accumulators ([batch*heads][kv_len]
  // [2d], slot q_head) in a region all groups' modules share, first in the workspace; shared: its
  // words per bh of this group's grid (heads / group_heads of a query head's, rounded up).
  bool shared = false;
  int64_t shared_words = 0;
  bool fast = false;  // the fast mode: dq_acc holds dQ's fp32 sums (atomics of the dK/dV kernel)
  bool pdl = false;   // every entry after the first a programmatic dependent launch (entry())
  // The joint launch (joint_entry): the dK/dV pass's split partials start split_kv_at words per bh after
  // the dQ pass's (its blocks run beside the dQ pass's); launched apart, the passes share the region.
  int64_t split_kv_at = 0;
};

Layout layout_of(const Problem& p, const BackwardPlans& plans, bool fast, bool joint, bool lse2) {
  Layout lay;
  lay.fast = fast;
  lay.reduce = p.kv_heads != p.heads;
  lay.shared = lay.reduce && !p.group_heads.empty();
  lay.delta = (p.seq_len + 3) / 4 * 4;
  if (lse2) {
    lay.lse2_at = lay.delta;
    lay.delta *= 2;
  }
  lay.dq_acc = plans.rows.passes.size() > 1 || lay.fast ? p.seq_len * p.head_dim : 0;
  const int64_t kv_words = p.kv_len * 2 * p.head_dim;
  if (lay.shared) {
    const int64_t gh = static_cast<int64_t>(p.group_heads.size());
    lay.shared_words = (p.heads * kv_words + gh - 1) / gh;
  } else if (plans.cols.passes.size() > 1 || lay.reduce) {
    lay.kv_acc = kv_words;
  }
  int64_t split_q = 0, split_kv = 0;
  for (const PlanPass& pass : plans.rows.passes) split_q = std::max(split_q, pass.slots * 64 * p.head_dim);
  for (const PlanPass& pass : plans.cols.passes) split_kv = std::max(split_kv, pass.slots * 128 * p.head_dim);
  lay.split = joint ? split_q + split_kv : std::max(split_q, split_kv);
  lay.split_kv_at = joint ? split_q : 0;
  return lay;
}

// In the device code: the query heads of all groups (batch or sequences x heads), and the shared
// region's floats (their dK/dV accumulators).
const char* kAllHeads = "(i64)(gridDim.y / SPLAT_HEAD_GROUP) * SPLAT_HEADS";
std::string shared_floats(const Problem& p) { return std::string(kAllHeads) + " * " + std::to_string(p.kv_len * 2 * p.head_dim); }

// The entry's workspace regions ([grid.y][per bh] each: D, the dQ and dK/dV hand-over, the split
// partials; with a shared region, that first and D from `own` on) and the engine's arguments.
std::string args_decl(const Problem& p, bool dkv, const Layout& lay) {
  std::ostringstream s;
  const char* d = "ws";
  if (lay.shared) {
    d = "own";
    s << "  float* own = ws + " << shared_floats(p) << ";  // after the head groups' shared dK/dV\n"
      << "  float* dq_acc = own + (i64)gridDim.y * " << lay.delta << ";\n"
      << "  float* kv_acc = ws;\n"
      << "  float* split_ws = dq_acc + (i64)gridDim.y * " << lay.dq_acc << ";\n";
  } else {
    s << "  float* dq_acc = ws + (i64)gridDim.y * " << lay.delta << ";\n"
      << "  float* kv_acc = dq_acc + (i64)gridDim.y * " << lay.dq_acc << ";\n"
      << "  float* split_ws = kv_acc + (i64)gridDim.y * " << lay.kv_acc << ";\n";
  }
  if (dkv && lay.split_kv_at > 0)
    s << "  split_ws += (i64)gridDim.y * " << lay.split_kv_at << ";  // after the dQ pass's partials (joint launch)\n";
  if (dkv && lay.fast)
    s << "  const BwdArgs args = {v, dout, lse, " << d << ", dk, dv, kv_acc, split_ws, " << emit::f32_literal(p.scale) << ", "
      << (lay.reduce ? "true" : "false") << ", dq_acc};\n  (void)dq;\n";
  else if (dkv)
    s << "  const BwdArgs args = {v, dout, lse, " << d << ", dk, dv, kv_acc, split_ws, " << emit::f32_literal(p.scale) << ", "
      << (lay.reduce ? "true" : "false") << "};\n  (void)dq; (void)dq_acc;\n";
  else
    s << "  const BwdArgs args = {dout, v, lse, " << d << ", dq, nullptr, dq_acc, split_ws, " << emit::f32_literal(p.scale)
      << ", false};\n  (void)dk; (void)dv; (void)kv_acc;\n";
  return s.str();
}

// A pass's split tiles summed (bwd_combine), after the pass.
void combine_entry(std::ostream& s, const Problem& p, const Plan& plan, size_t pi, bool dkv, const Layout& lay,
                   const std::string& elt, std::vector<KernelDesc>& kernels) {
  const PlanPass& pass = plan.passes[pi];
  KernelDesc d;
  d.name = std::string(dkv ? "splat_bwd_dkv_p" : "splat_bwd_dq_p") + std::to_string(pi) + "_combine";
  d.role = std::string(dkv ? "dK/dV" : "dQ") + " pass " + std::to_string(pi + 1) + ": the split tiles' chunks summed";
  d.grid_x = static_cast<int64_t>(pass.splits.size());
  d.block = kBlock;
  s << entry(p, d.name, 0, lay.pdl) << "  (void)q; (void)k; (void)o; (void)table;\n" << args_decl(p, dkv, lay) << "  bwd_combine<" << elt
    << ", SPLAT_SEQ, SPLAT_KV, SPLAT_HD, " << (dkv ? "true" : "false") << ", " << pass.period << ", " << pass.slots << ", "
    << (pi + 1 == plan.passes.size() ? "true" : "false") << ">(" << (dkv ? "kCol" : "k") << "Splits" << pi << ", args);\n}\n";
  kernels.push_back(d);
}

// The number of column slices of an entry point (geometry::bwd_col_slices; the fp32 engine: one).
int col_slices(const Problem& p) { return tf32_engine(p) ? 1 : geometry::bwd_col_slices(static_cast<int>(p.head_dim)); }

// Whether a pass runs without masks (its tables and its fused_pass call agree on it): every key tile
// full; never in a packed batch, whose sequences end inside key tiles.
bool unmasked_pass(const Problem& p, const PlanPass& pass) { return !p.varlen && pass_unmasked(pass, 64); }

// A pass's fused_pass call (pass pi of the row plan, or of the column plan for dK/dV), for the
// column slice from output column co; tix, bhx: the block's tile and head ("-1": blockIdx).
std::string pass_call(const Problem& p, const Plan& plan, size_t pi, bool dkv, const BackwardTuning& tu, const std::string& T,
                      int co, const std::string& tix = "-1", const std::string& bhx = "-1") {
  const PlanPass& pass = plan.passes[pi];
  const bool unmasked = unmasked_pass(p, pass);
  const std::string k = dkv ? "kCol" : "k", n = std::to_string(pi);
  std::string gkeys;
  if (pi == 0 && plan.global_keys) {
    gkeys = ", " + std::to_string(plan.global_keys->table);
    if (plan.global_keys->prefix_table >= 0) gkeys += ", " + std::to_string(plan.global_keys->prefix_table);
  }
  const bool first = pi == 0, last = pi + 1 == plan.passes.size();
  std::ostringstream s;
  s << "fused_pass<" << engine_type(p, tu, dkv, co) << ", " << T << ", " << (dkv ? "SPLAT_KV" : "SPLAT_SEQ") << ", SPLAT_HD, "
    << pass.period << ", " << (unmasked ? 1 : pass.max_runs) << ", " << pass.slots << ", " << (first ? "true" : "false") << ", "
    << (last ? "true" : "false") << ", " << (unmasked ? "true" : "false") << gkeys << ">(" << k << "Items, " << k << "Tiles" << n
    << ", " << k << "Groups" << n << ", " << k << "Walks" << n << ", " << k << "GroupItems" << n << ", " << k << "GroupRowBegin"
    << n << ", " << k << "GroupRowEndMax" << n << ", " << emit::f32_literal(p.scale * 1.4426950408889634)
    << ", static_cast<const " << T << "*>(" << (dkv ? "k" : "q") << "), static_cast<const " << T << "*>("
    << (dkv ? "q" : "k") << "), nullptr, nullptr, ws, nullptr, " << (dkv ? "table + kColTableWord" : "table")
    << ", nullptr, " << cu_arg(p) << ", " << tix << ", " << bhx << ", &args);\n";
  return s.str();
}

// A pass's tables (prefix k, or kCol for the column plan).
void pass_tables(std::ostream& s, const Problem& p, const Plan& plan, size_t pi, bool dkv) {
  static const Acsr kNoAcsr{};
  const PlanPass& pass = plan.passes[pi];
  emit::pass_tables(s, tables_context(p, kNoAcsr, plan), pi, pass, unmasked_pass(p, pass), dkv ? "kCol" : "k");
}

// One pass of a plan: its tables (prefix k) and its entry points, one per column slice (the first
// named splat_bwd_{dq,dkv}_pN, the others ..._pNsS), then the split tiles' combine.
void pass_entry(std::ostream& s, const Problem& p, const Plan& plan, size_t pi, bool dkv, const Layout& lay,
                const BackwardTuning& tu, const std::string& elt, std::vector<KernelDesc>& kernels) {
  const PlanPass& pass = plan.passes[pi];
  const std::string n = std::to_string(pi);
  pass_tables(s, p, plan, pi, dkv);
  const int slices = col_slices(p), width = geometry::mma_width(static_cast<int>(p.head_dim));
  for (int si = 0; si < slices; ++si) {
    const int co = 128 * si;
    KernelDesc d;
    d.name = std::string(dkv ? "splat_bwd_dkv_p" : "splat_bwd_dq_p") + n + (si > 0 ? "s" + std::to_string(si) : "");
    d.role = std::string(dkv ? "dK/dV" : "dQ") + " pass " + std::to_string(pi + 1) + "/" + std::to_string(plan.passes.size()) +
             " (" + (dkv ? "keys" : "rows") + " grouped by " + (dkv ? "j" : "i") + " mod " + std::to_string(pass.period) + ")";
    if (slices > 1)
      d.role += ", head columns " + std::to_string(co) + ".." +
                std::to_string(std::min<int64_t>(co + geometry::bwd_slice_width(width, co), p.head_dim) - 1) +
                (dkv && tu.fast && si == 0 ? " (and dQ's atomics)" : "");
    d.grid_x = static_cast<int64_t>(pass.tiles.size());
    d.block = kBlock;
    d.smem_dynamic = backward_smem(p, tu, dkv);
    s << entry(p, d.name, tu.min_blocks, lay.pdl) << "  (void)o;\n"
      << "  static_assert(" << engine_type(p, tu, dkv, co) << "::SMEM == " << d.smem_dynamic
      << ", \"shared memory as the manifest says\");\n"
      << args_decl(p, dkv, lay) << "  " << pass_call(p, plan, pi, dkv, tu, elt, co) << "}\n";
    kernels.push_back(d);
  }
  if (!pass.splits.empty()) combine_entry(s, p, plan, pi, dkv, lay, elt, kernels);
}

// Whether the dQ and dK/dV passes run as one launch (joint_entry): the deterministic mode, plans of
// one pass each, one column slice.
bool joint_launch(const Problem& p, const BackwardPlans& plans, const BackwardTuning& tu) {
  return tu.joint == 1 && !tu.fast && plans.rows.passes.size() == 1 && plans.cols.passes.size() == 1 && col_slices(p) == 1;
}

// The joint launch's measured defaults (docs/performance.md, "The joint launch's block order and
// three stages"), which depend on the plans. Where no tile is split: its blocks head by head
// (order=1) where a head has at most kByHeadTiles tiles of the two plans (128 at seq_len 4k and
// 256 at 8k at 64-row tiles, against 512 at 16k, where the dK/dV tiles of every head first took
// less time though the dQ blocks then read K, V, Q and dO from DRAM again),
// and three stages where every tile of both plans walks at most kShortWalk key tiles (blocked-256's
// walks of 4). Split tiles (global rows) keep the dK/dV tiles of every head first and two stages.
constexpr int64_t kByHeadTiles = 256, kShortWalk = 4;
// What those defaults read off the plans: whether dQ and dK/dV run as one launch, whether it has no
// split tile, whether every tile walks at most kShortWalk key tiles, and its tiles a head.
struct JointShape {
  bool joint = false, unsplit = false, short_walks = false;
  int64_t tiles = 0;
};
JointShape joint_shape(const Problem& p, const BackwardPlans& plans, const BackwardTuning& t) {
  JointShape j;
  j.joint = joint_launch(p, plans, t);
  if (!j.joint) return j;
  j.tiles = static_cast<int64_t>(plans.rows.passes[0].tiles.size() + plans.cols.passes[0].tiles.size());
  j.unsplit = plans.rows.passes[0].splits.empty() && plans.cols.passes[0].splits.empty();
  j.short_walks = true;
  for (const Plan* plan : {&plans.rows, &plans.cols})
    for (const PlanTile& tile : plan->passes[0].tiles) j.short_walks = j.short_walks && tile.key_tiles <= kShortWalk;
  return j;
}
BackwardTuning resolve_launch(const Problem& p, const BackwardPlans& plans, BackwardTuning t) {
  const JointShape j = joint_shape(p, plans, t);
  const bool ruled = t.wgmma == 1 && j.unsplit;  // the wgmma engine's joint launch without split tiles
  if (t.order < 0) t.order = ruled && j.tiles <= kByHeadTiles ? 1 : 0;
  if (t.stages == 0) t.stages = ruled && j.short_walks ? 3 : 2;
  return t;
}

// The module's notes (explain_backward): each value of the resolved tuning t, "(tuning)" where the
// given tuning g set it, else why the default is what it is.
std::vector<std::string> tuning_notes(const Problem& p, const BackwardPlans& plans, const BackwardTuning& g,
                                      const BackwardTuning& t) {
  const auto from = [](int given, const std::string& why) { return given >= 0 ? std::string(" (tuning)") : ": " + why; };
  const JointShape j = joint_shape(p, plans, t);
  const bool joint = j.joint;
  // Why order and stages are the defaults they are (resolve_launch).
  const std::string rule = t.wgmma != 1 ? "only the wgmma engine's joint launch differs"
                           : !joint     ? "three only on the joint launch without split tiles"
                           : !j.unsplit ? "a split tile"
                                        : "";
  std::vector<std::string> n;
  n.push_back(std::string(t.wgmma == 1 ? "the wgmma engine" : "the mma.sync engine") +
              from(g.wgmma, t.wgmma == 1     ? "sm_90a, bf16/fp16 at head_dim 64"
                            : tf32_engine(p) ? "fp32 storage"
                                             : "wgmma needs sm_90a, bf16/fp16 and head_dim 64"));
  n.push_back(std::string(joint ? "dQ and dK/dV in one launch" : "a launch for each pass") +
              from(g.joint, t.wgmma != 1  ? "one launch is the default on the wgmma engine only"
                            : t.fast      ? "the fast mode has no dQ pass"
                            : joint       ? "the wgmma engine, both plans of one pass"
                                          : "a plan of several passes or column slices"));
  if (joint)
    n.push_back(std::string(t.order == 1 ? "blocks head by head (order 1)" : "every head's dK/dV blocks first (order 0)") +
                from(g.order, !rule.empty() ? rule
                                            : std::to_string(j.tiles) + " tiles a head (head by head up to " +
                                                  std::to_string(kByHeadTiles) + ")"));
  n.push_back(std::to_string(t.stages) + " stages" +
              from(g.stages == 0 ? -1 : g.stages,
                   !rule.empty()  ? rule
                   : j.short_walks ? "every tile walks at most " + std::to_string(kShortWalk) + " key tiles, none split"
                                   : "a tile walks more than " + std::to_string(kShortWalk) + " key tiles"));
  n.push_back("min blocks " + std::to_string(t.min_blocks) + from(g.min_blocks, t.wgmma == 1 ? "3 on the wgmma engine" : "none on the mma.sync engines"));
  if (t.wgmma != 1 && !tf32_engine(p))
    n.push_back(std::to_string(t.step) + " walked rows a step, row operands " + (t.a_regs ? "in registers" : "in shared memory") +
                from(g.step > 0 || g.a_regs >= 0 ? 0 : -1, "by head_dim and mode"));
  return n;
}

}  // namespace

std::string explain_backward(const BackwardModule& m) {
  std::ostringstream s;
  s << "backward engine: " << m.engine << ", " << m.mode << " mode\n";
  for (const std::string& n : m.notes) s << "  - " << n << "\n";
  for (const KernelDesc& k : m.kernels)
    s << k.name << ": grid " << k.grid_x << " x " << m.grid_y << ", block " << k.block << ", " << k.smem_dynamic
      << " B shared memory" << (k.programmatic ? ", programmatic launch" : "") << "\n  " << k.role << "\n";
  return s.str();
}

namespace {

// splat_bwd_p0: the dK/dV pass and the dQ pass of one-pass plans in one launch, grid (NKV + NQ,
// grid.y) (geometry::bwd_joint_block: the dK/dV tiles of every head first, then the dQ tiles; order=1:
// bwd_joint_block_by_head, a head's dK/dV tiles then its dQ tiles, head by head). The two passes
// read only what splat_bwd_delta wrote and write disjoint outputs, so their blocks may run in any
// order: sharing the launch fills the end of the dK/dV blocks' last wave with dQ blocks, and the
// dQ blocks' ends are the launch's (shorter blocks last), where two launches each ended on a partial wave.
// Split tiles: each pass's combine after the launch (their partials in regions of their own,
// Layout::split_kv_at).
void joint_entry(std::ostream& s, const Problem& p, const BackwardPlans& plans, const Layout& lay, const BackwardTuning& tu,
                 const std::string& elt, std::vector<KernelDesc>& kernels) {
  const int64_t nq = static_cast<int64_t>(plans.rows.passes[0].tiles.size());
  const int64_t nkv = static_cast<int64_t>(plans.cols.passes[0].tiles.size());
  KernelDesc d;
  d.name = "splat_bwd_p0";
  d.role = "dK/dV (column plan, " + std::to_string(nkv) + " tiles) and dQ (row plan, " + std::to_string(nq) +
           " tiles) in one launch: " + (tu.order == 1 ? "head by head, each head's dK/dV blocks first" : "dK/dV's blocks of every head first");
  d.grid_x = nq + nkv;
  d.block = kBlock;
  d.smem_dynamic = std::max(backward_smem(p, tu, true), backward_smem(p, tu, false));
  s << entry(p, d.name, tu.min_blocks, lay.pdl) << "  (void)o;\n"
    << "  static_assert(" << engine_type(p, tu, true, 0) << "::SMEM <= " << d.smem_dynamic << " && " << engine_type(p, tu, false, 0)
    << "::SMEM <= " << d.smem_dynamic << ", \"shared memory as the manifest says\");\n"
    << "  const splat::geometry::JointBlock<i64> jb = bwd_joint_block" << (tu.order == 1 ? "<true>(" : "(") << nkv << ", " << nq << ");\n  if (jb.dkv) {\n"
    << args_decl(p, true, lay) << "  " << pass_call(p, plans.cols, 0, true, tu, elt, 0, "(int)jb.tile", "jb.head") << "  } else {\n"
    << args_decl(p, false, lay) << "  " << pass_call(p, plans.rows, 0, false, tu, elt, 0, "(int)jb.tile", "jb.head") << "  }\n}\n";
  kernels.push_back(d);
  if (!plans.rows.passes[0].splits.empty()) combine_entry(s, p, plans.rows, 0, false, lay, elt, kernels);
  if (!plans.cols.passes[0].splits.empty()) combine_entry(s, p, plans.cols, 0, true, lay, elt, kernels);
}

// A lane group a query row (geometry::bwd_row_lanes): splat_bwd_delta (D = rowsum(dO * O); the fast
// mode zeroes dQ's sums), or (store) the fast mode's splat_bwd_dq_store, dQ = scale * its sums in the
// element type.
void row_entry(std::ostream& s, const Problem& p, const Layout& lay, const std::string& elt, bool store,
               std::vector<KernelDesc>& kernels) {
  KernelDesc d;
  d.name = store ? "splat_bwd_dq_store" : "splat_bwd_delta";
  d.role = store ? "dQ = scale * the sums the dK/dV kernels' atomics made"
                 : std::string("D = rowsum(dO * O) of each query row") + (lay.fast ? "; dQ's sums zeroed" : "");
  const int64_t rows = geometry::bwd_rows_per_block(static_cast<int>(p.head_dim), dtype_bytes(p.dtype));
  d.grid_x = (p.seq_len + rows - 1) / rows;
  const std::string own = lay.shared ? "ws + " + shared_floats(p) : "ws";
  const std::string dq_acc = "(" + own + ") + (i64)gridDim.y * " + std::to_string(lay.delta);
  s << "\n" << entry(p, d.name, 0, lay.pdl) << "  (void)q; (void)k; (void)v; (void)lse; (void)dk; (void)dv; (void)table;"
    << (store ? " (void)o; (void)dout;\n" : " (void)dq;\n");
  if (store)
    s << "  bwd_dq_store<" << elt << ", SPLAT_SEQ, SPLAT_HD>(" << dq_acc << ", static_cast<" << elt << "*>(dq), "
      << emit::f32_literal(p.scale) << ", " << cu_arg(p) << ");\n}\n";
  else
    s << "  bwd_delta<" << elt << ", SPLAT_SEQ, SPLAT_HD>(static_cast<const " << elt << "*>(o), static_cast<const " << elt
      << "*>(dout), " << own << ", " << cu_arg(p) << (lay.fast ? ", " + dq_acc : std::string(lay.lse2_at > 0 ? ", nullptr" : ""))
      << (lay.lse2_at > 0 ? ", lse, (" + own + ") + (i64)gridDim.y * SPLAT_BWD_LSE2_AT" : std::string()) << ");\n}\n";
  kernels.push_back(d);
}

// Grouped-query heads: each K/V head's dK and dV, its query heads' accumulators summed in head order
// (bwd_reduce_kv). With a shared region, in the last head group's module, over every query head.
void reduce_entry(std::ostream& s, const Problem& p, const Layout& lay, const std::string& elt,
                  std::vector<KernelDesc>& kernels) {
  const int64_t group = p.heads / p.kv_heads;
  KernelDesc r;
  r.name = "splat_bwd_reduce";
  r.role = "dK, dV: each K/V head's sum over its " + std::to_string(group) + " query heads" +
           (lay.shared ? " (every head group's, from the shared region)" : "");
  r.grid_x = (p.kv_len * p.head_dim + kBlock * group - 1) / (kBlock * group);
  const std::string acc = lay.shared ? "ws" : "ws + (i64)gridDim.y * (" + std::to_string(lay.delta + lay.dq_acc) + ")";
  s << "\n" << entry(p, r.name, 0, lay.pdl) << "  (void)q; (void)k; (void)v; (void)o; (void)dout; (void)lse; (void)dq; (void)table;\n"
    << "  bwd_reduce_kv<" << elt << ", SPLAT_KV, SPLAT_HD, SPLAT_KV_GROUP>(" << acc << ", static_cast<" << elt
    << "*>(dk), static_cast<" << elt << "*>(dv), " << emit::f32_literal(p.scale) << ", " << cu_arg(p)
    << (lay.shared ? std::string(", ") + kAllHeads : std::string()) << ");\n}\n";
  kernels.push_back(r);
}

void header(std::ostream& s, const Problem& p, const BackwardModule& m, int64_t group, const Layout& lay) {
  s << "// Generated by splatc " << TRSPLAT_VERSION << " for pattern \"" << p.name << "\": the backward pass. Do not edit.\n"
    << "// Problem: seq_len " << p.seq_len << ", kv_len " << p.kv_len << ", head_dim " << p.head_dim << ", dtype "
    << dtype_name(p.dtype) << ", scale " << p.scale << (p.causal ? ", causal" : "");
  if (group > 1) s << ", heads " << p.heads << " over kv_heads " << p.kv_heads;
  s << "\n// nnz " << m.nnz << "; dQ walks the row plan, dK/dV the column plan (the query rows keeping each key).\n"
    << "// Row plan:\n";
  std::istringstream d(describe(m.plans.rows));
  for (std::string line; std::getline(d, line);) s << "//   " << line << "\n";
  s << "// Column plan (rows are keys, walked keys are query rows):\n";
  std::istringstream dc(describe(m.plans.cols));
  for (std::string line; std::getline(dc, line);) s << "//   " << line << "\n";
  s << "// Entry points (launch in order; grid (grid_x, " << m.grid_y << ")), parameters\n"
    << "//   (const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse,\n"
    << "//    void* dq, void* dk, void* dv, float* ws, const int* table" << (p.varlen ? ", const int* cu_seqlens" : "") << ")\n\n"
    << "#define SPLAT_SEQ " << p.seq_len << "\n#define SPLAT_KV " << p.kv_len << "\n#define SPLAT_HD " << p.head_dim << "\n";
  if (p.varlen)
    s << "#define SPLAT_VARLEN 1  // q, o, dout, dq [total_tokens, heads, hd], k, v, dk, dv [total_tokens, kv_heads, hd]\n";
  emit::head_defines(s, p);
  if (group > 1) s << "#define SPLAT_KV_GROUP " << group << "  // query heads per K/V head\n";
  if (m.shared_kv)
    s << "#define SPLAT_BWD_SHARED_KV 1  // dK/dV accumulators in the head groups' shared region (backward.cuh)\n";
  if (lay.lse2_at > 0)
    s << "#define SPLAT_BWD_LSE2_AT " << lay.lse2_at << "  // the lse in log2 units after D in the workspace (bwd_delta)\n";
  s << device_includes()
    << (tf32_engine(p)            ? "#include \"splat/backward_tf32.cuh\"\n"
        : m.tuning.wgmma == 1 ? "#include \"splat/backward_wgmma.cuh\"\n"
                              : "#include \"splat/backward.cuh\"\n")
    << "enum : int { kColTableWord = " << m.column_table_word << " };  // the column plan's table words\n";
}

}  // namespace

const std::vector<ParamDesc>& backward_params() {
  static const std::vector<ParamDesc> params = {
      {"q", "const void*", "queries [batch, heads, seq_len, head_dim], row-major, problem dtype"},
      {"k", "const void*", "keys [batch, kv_heads, kv_len, head_dim]"},
      {"v", "const void*", "values [batch, kv_heads, kv_len, head_dim]"},
      {"o", "const void*", "the forward's output [batch, heads, seq_len, head_dim]"},
      {"dout", "const void*", "the gradient of the output, dO [batch, heads, seq_len, head_dim]"},
      {"lse", "const float*", "the forward's log-sum-exp per row [batch, heads, seq_len], fp32 (forward with lse)"},
      {"dq", "void*", "dQ [batch, heads, seq_len, head_dim] (written)"},
      {"dk", "void*", "dK [batch, kv_heads, kv_len, head_dim] (written)"},
      {"dv", "void*", "dV [batch, kv_heads, kv_len, head_dim] (written)"},
      {"ws", "float*", "workspace: batch*heads*workspace_floats_per_bh floats (a head group's: batch*group_heads*...)"},
      {"table", "const int*", "device table (table words; null when there are none)"},
  };
  return params;
}

BackwardTuning parse_backward_tuning(const std::string& spec) {
  struct Key {
    const char* name;
    int BackwardTuning::*field;
    int lo, hi;
    bool pow2;
  };
  static const Key keys[] = {{"stages", &BackwardTuning::stages, 2, 3, false},
                             {"cw", &BackwardTuning::step, 32, 64, true},
                             {"areg", &BackwardTuning::a_regs, 0, 1, false},
                             {"minb", &BackwardTuning::min_blocks, 0, 8, false},
                             {"wg", &BackwardTuning::wgmma, 0, 1, false},
                             {"joint", &BackwardTuning::joint, 0, 1, false},
                             {"order", &BackwardTuning::order, 0, 1, false}};
  BackwardTuning t;
  std::istringstream in(spec);
  for (std::string kv; std::getline(in, kv, ',');) {
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    const std::string key = kv.substr(0, eq), val = eq == std::string::npos ? "" : kv.substr(eq + 1);
    const Key* k = nullptr;
    for (const Key& c : keys)
      if (key == c.name) k = &c;
    if (!k) throw std::invalid_argument("backward tuning: unknown key '" + key + "' (stages, cw, areg, minb, wg, joint, order)");
    int v = 0;
    size_t used = 0;
    try {
      v = std::stoi(val, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (val.empty() || used != val.size() || v < k->lo || v > k->hi || (k->pow2 && v != k->lo && v != k->hi))
      throw std::invalid_argument("backward tuning: " + key + " must be " +
                                  (k->pow2 ? std::to_string(k->lo) + " or " + std::to_string(k->hi)
                                           : std::to_string(k->lo) + ".." + std::to_string(k->hi)) +
                                  ", got '" + val + "'");
    t.*(k->field) = v;
  }
  return t;
}

std::string format_backward_tuning(const BackwardTuning& t) {
  struct Key {
    const char* name;
    int value, least;  // set from `least` on (stages and cw are unset at 0, the others below 0)
  };
  const Key keys[] = {{"stages", t.stages, 1}, {"cw", t.step, 1},  {"areg", t.a_regs, 0},  {"minb", t.min_blocks, 0},
                      {"wg", t.wgmma, 0},      {"joint", t.joint, 0}, {"order", t.order, 0}};
  std::string out;
  for (const Key& k : keys)
    if (k.value >= k.least) out += (out.empty() ? "" : ",") + std::string(k.name) + "=" + std::to_string(k.value);
  return out;
}

BackwardModule generate_backward(const Problem& p, const Acsr& acsr, const BackwardTuning& tuning, const std::string& arch) {
  if (acsr.seq_len != p.seq_len || acsr.kv_len != p.kv_len) throw std::invalid_argument("ACSR and problem sizes differ");
  if (!p.head_groups.empty())
    throw std::invalid_argument("generate_backward: per-head patterns have a module per head group (head_group_problems)");
  check_backward(p);
  BackwardModule m;
  m.name = p.name;
  m.varlen = p.varlen.has_value();
  m.grid_y = std::string(m.varlen ? "sequences" : "batch") + (p.group_heads.empty() ? "*heads" : "*group_heads");
  m.plans = backward_plans(p, acsr);
  m.tuning = resolve_launch(p, m.plans, resolve(p, tuning, arch));
  m.notes = tuning_notes(p, m.plans, tuning, m.tuning);
  m.engine = p.dtype == DType::FP32   ? "mma.sync 3xtf32"
             : p.dtype == DType::TF32 ? "mma.sync tf32"
             : m.tuning.wgmma == 1    ? "wgmma"
                                      : "mma.sync";
  m.mode = m.tuning.fast ? "fast" : "deterministic";
  if (m.tuning.a_regs == 1 && !tf32_engine(p) && geometry::mma_width(static_cast<int>(p.head_dim)) > 128)
    throw Error(p.file, "--tune-backward", "areg=1 (the row operands in registers) needs head_dim at most 128, got " +
                                               std::to_string(p.head_dim));
  if (backward_smem(p, m.tuning, true) > geometry::kSmemPerBlock)
    throw Error(p.file, "--tune-backward",
                "stages=" + std::to_string(m.tuning.stages) + " needs " + std::to_string(backward_smem(p, m.tuning, true)) +
                    " bytes of shared memory per block at head_dim " + std::to_string(p.head_dim) + " in " +
                    dtype_name(p.dtype) + " (at most " + std::to_string(geometry::kSmemPerBlock) + ")");
  m.nnz = m.plans.rows.nnz;
  m.table = m.plans.rows.table;
  m.column_table_word = static_cast<int64_t>(m.table.size());
  m.table.insert(m.table.end(), m.plans.cols.table.begin(), m.plans.cols.table.end());
  const int64_t group = p.heads / p.kv_heads;
  const bool joint = joint_launch(p, m.plans, m.tuning);
  Layout lay = layout_of(p, m.plans, m.tuning.fast, joint, m.tuning.wgmma == 1);
  // sm_90a (the wgmma engine's modules): programmatic dependent launches, each entry's blocks ready
  // as the previous entry's leave the SMs.
  lay.pdl = m.tuning.wgmma == 1;
  m.shared_kv = lay.shared;
  m.workspace_floats_per_bh = lay.shared_words + lay.delta + lay.dq_acc + lay.kv_acc + lay.split;
  const std::string elt = elt_type(p.dtype);
  std::ostringstream s;
  header(s, p, m, group, lay);
  row_entry(s, p, lay, elt, false, m.kernels);  // D (and in the fast mode dQ's sums zeroed)
  if (joint) {
    s << "\n// ---- dQ (the row plan) and dK/dV (the column plan) in one launch ----\n";
    emit::items(s, tables_context(p, acsr, m.plans.rows), "k");
    pass_tables(s, p, m.plans.rows, 0, false);
    emit::items(s, tables_context(p, m.plans.columns, m.plans.cols), "kCol");
    pass_tables(s, p, m.plans.cols, 0, true);
    joint_entry(s, p, m.plans, lay, m.tuning, elt, m.kernels);
  } else {
    if (!lay.fast) {
      s << "\n// ---- dQ: the row plan ----\n";
      emit::items(s, tables_context(p, acsr, m.plans.rows), "k");
      for (size_t pi = 0; pi < m.plans.rows.passes.size(); ++pi) pass_entry(s, p, m.plans.rows, pi, false, lay, m.tuning, elt, m.kernels);
    }
    s << "\n// ---- dK/dV: the column plan" << (lay.fast ? " (and dQ by atomics)" : "") << " ----\n";
    emit::items(s, tables_context(p, m.plans.columns, m.plans.cols), "kCol");
    for (size_t pi = 0; pi < m.plans.cols.passes.size(); ++pi) pass_entry(s, p, m.plans.cols, pi, true, lay, m.tuning, elt, m.kernels);
  }
  if (lay.fast) row_entry(s, p, lay, elt, true, m.kernels);  // dQ from its sums
  if (lay.reduce && (!lay.shared || p.group_index + 1 == p.group_count)) reduce_entry(s, p, lay, elt, m.kernels);
  for (size_t i = 1; i < m.kernels.size(); ++i) m.kernels[i].programmatic = lay.pdl;
  m.source = s.str();
  return m;
}

nlohmann::json backward_manifest(const BackwardModule& mod, const std::vector<std::string>& files) {
  using nlohmann::json;
  json kernels = json::array();
  for (const KernelDesc& k : mod.kernels)
    kernels.push_back({{"name", k.name},
                       {"role", k.role},
                       {"grid", {k.grid_x, mod.grid_y, 1}},
                       {"block", {k.block, 1, 1}},
                       {"shared_memory_dynamic_bytes", k.smem_dynamic},
                       {"programmatic_launch", k.programmatic}});
  json params = json::array();
  for (size_t i = 0; i < backward_params().size(); ++i) {
    const ParamDesc& d = backward_params()[i];
    params.push_back({{"index", i}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  if (mod.varlen) {
    const ParamDesc& d = varlen_param();
    params.push_back({{"index", params.size()}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  const std::string layout =
      mod.varlen ? "packed variable-length batch: q, o, dout, dq: [total_tokens, heads, head_dim]; k, v, dk, dv: "
                   "[total_tokens, kv_heads, head_dim]; lse: [total_tokens, heads] (the forward's); grid.y and ws count "
                   "sequences in place of batch; tokens from cu_seqlens[sequences] on are not written"
                 : "as the parameters say: [batch, heads, seq_len, head_dim] and [batch, kv_heads, kv_len, head_dim]";
  json j{{"files", files},
         {"layout", layout},
         {"mode", mod.mode},
         {"engine", mod.engine},
         {"tuning", format_backward_tuning(mod.tuning)},
         {"parameters", params},
         {"kernels", kernels},
         {"launch_order", "every entry in order on one stream (each reads what the ones before wrote); an entry with "
                          "programmatic_launch may be launched with programmatic stream serialization "
                          "(cudaLaunchAttributeProgrammaticStreamSerialization) to start while the previous one ends"},
         {"workspace_floats_per_bh", mod.workspace_floats_per_bh},
         {"table_words", mod.table.size()}};
  if (mod.shared_kv) {
    j["workspace_shared"] = true;
    j["launch_order"] = "the head groups' backward entries group after group, each group's in order, on one stream and "
                        "with one ws for all groups, of the largest group's grid.y*workspace_floats_per_bh floats: its "
                        "first region holds every query head's dK/dV accumulators, and the last group's "
                        "splat_bwd_reduce writes dK and dV from them";
  }
  return j;
}

}  // namespace splat
