#include "libsplat/codegen/select.h"

#include <algorithm>
#include <sstream>

#include "libsplat/codegen/codegen.h"
#include "libsplat/device/geometry.cuh"

namespace splat {
namespace {

constexpr int64_t kSmemPerSm = geometry::kSmemPerBlock;  // shared memory per SM a block may use

bool rows_fit_int32(const Problem& p) { return p.batch * p.kv_heads * p.kv_len < (int64_t{1} << 31); }

// wgmma: whether a pass's K/V stages can be loaded by TMA: every walk has step 1 or 2 (the tensor
// maps' two views; step 2 needs an even number of key rows in the whole tensor), indexed walks (the
// plan's global keys) are blocks a 3D box loads, and TMA's 32-bit coordinates reach every key row.
bool tma_walks(const Problem& p, const Plan& plan, const PlanPass& pass) {
  if (p.varlen) return false;  // the maps view K and V head by head; a packed batch interleaves them
  bool ok = true, step2 = false;
  for (const PlanTile& t : pass.tiles)
    for (const PlanGroup& g : t.groups)
      for (const KeyWalk& w : g.walks) {
        if (w.count <= 0) continue;
        ok = ok && (w.indexed ? plan.global_keys && plan.global_keys->blocks : (w.step == 1 || w.step == 2));
        step2 = step2 || w.step == 2;
      }
  const int64_t rows = p.batch * p.kv_heads * p.kv_len;
  return ok && (!step2 || rows % 2 == 0) && rows_fit_int32(p);
}

// A packed batch's band (band_pass_varlen): TMA's 32-bit coordinates reach every token.
bool varlen_maps_fit(const Problem& p) { return p.varlen && p.varlen->max_total_tokens < (int64_t{1} << 31); }

// Every key tile of the pass full: no run bounds, no mask code. Not in a packed variable-length
// batch, whose sequences end inside key tiles.
bool unmasked_pass(const Problem& p, const PlanPass& pass, int64_t bc) { return !p.varlen && pass_unmasked(pass, bc); }

size_t leading_chunks(const PlanPass& pass) {
  size_t n = 0;
  while (n < pass.tiles.size() && pass.tiles[n].split_slot >= 0) ++n;
  return n;
}

// What the heuristics read about one kernel.
struct KernelFacts {
  KernelFamily family = KernelFamily::Table;  // Table, Band (also a band with globals' band blocks) or Lattice
  const PlanPass* pass = nullptr;             // the pass it walks (a band with globals' band blocks: none)
  size_t passes = 1;                          // passes of the plan
  bool window_lattice = false;                // the band or lattice kernel of a window plus a lattice
  bool in_band_globals = false;               // part of a band with globals' kernel
  bool tma = false;                           // wgmma: K/V stages can be loaded by TMA
};

// The heuristics: every engine parameter by the rules measured on the H200 (B=1, H=16, d=64 unless
// said; docs/performance.md, "splatc kernels (H200)"), each against the alternatives; a value the
// tuning sets wins.
EngineConfig configure(const Problem& p, EngineKind kind, const KernelFacts& f, const KernelTuning& t,
                       const CodegenTestHooks& hooks) {
  EngineConfig c;
  c.kind = kind;
  const int64_t hd = p.head_dim;
  const PlanPass& pass = *f.pass;
  const auto note = [&](std::string s) { c.notes.push_back(std::move(s)); };
  c.stages = t.stages > 0 ? t.stages : 2;
  if (kind == EngineKind::MmaTf32 || kind == EngineKind::MmaTf32x3) {
    // 16 rows per warp only (fp32 operands double the fragment registers: 32 rows would spill).
    // Shared memory allows 3 blocks per SM at d = 64 (fp32 K and V stages, 74 KB each), but 3
    // blocks cap registers at 168 and spill; 2 blocks (up to 255 registers, no spill) measured
    // 1-10% faster on window, strided and bigbird at 4k, so at most 2, fewer where shared memory
    // allows fewer (1 at d = 128).
    const int64_t fit = kSmemPerSm / (c.smem(p.dtype, hd) + 1024);
    c.min_blocks = t.min_blocks >= 0 ? t.min_blocks : static_cast<int>(std::clamp<int64_t>(fit, 1, 2));
    note(std::to_string(c.stages) + " stages" + (t.stages > 0 ? " (tuning)" : ""));
    note("min blocks " + std::to_string(c.min_blocks) +
         (t.min_blocks >= 0 ? " (tuning)" : ": at most 2 (255 registers, no spills), as shared memory allows"));
    return c;
  }
  if (kind == EngineKind::Mma) {
    // 32 rows per warp (2 warps, 255 registers, 4 blocks per SM) halves the ldmatrix traffic: 2-3%
    // faster on single-pass, one-run, period-1 plans (window, blocked); slower on strided (-35%),
    // longformer and bigbird (run registers spill), so 16 rows (4 warps) elsewhere. A third stage
    // measured no faster; 128-key steps 15-25% slower (kept as a tuning value).
    const bool simple = f.passes == 1 && pass.period == 1 && pass.max_runs == 1 && pass.splits.empty();
    c.warp_rows = t.warp_rows > 0 ? t.warp_rows : hd <= 64 && simple ? 32 : 16;
    c.key_tile = t.key_tile > 0 ? t.key_tile : 64;
    note(std::to_string(c.warp_rows) + " rows per warp" +
         (t.warp_rows > 0       ? " (tuning)"
          : simple && hd <= 64 ? ": one pass, one run per row, head_dim <= 64"
                               : ": several passes, runs or split tiles, or head_dim > 64"));
    note(std::to_string(c.stages) + " stages, " + std::to_string(c.key_tile) + "-key softmax steps" +
         (t.stages > 0 || t.key_tile > 0 ? " (tuning)" : ""));
    // 16 rows per warp: 128 registers (4 blocks, 16 warps per SM); more runs per row need more
    // (a pass without masks holds no run bounds). 32 rows per warp: 255 registers. 128-key tiles:
    // twice the stage memory, so at most 3 blocks per SM at d = 64. Wider heads hold more O and Q
    // fragments: 3 blocks (168 registers) for d = 96, 2 (255) for d = 128 (bf16, the six peer
    // patterns at 4k / 16k: d = 128 1.30-1.47x faster than at 4 blocks, d = 96 1.05-1.40x); 3 up
    // to a width of 112 (window-16k at d = 112: 303.5 against 317.6 us at 2, splatc tune); over
    // 128 the stages leave room for one block (255 registers; d = 256 spills ~0.3 KB).
    const int runs = unmasked_pass(p, pass, c.key_tile) ? 1 : pass.max_runs;
    c.min_blocks = t.min_blocks >= 0 ? t.min_blocks
                   : c.key_tile == 128
                       ? static_cast<int>(std::clamp<int64_t>(kSmemPerSm / (c.smem(p.dtype, hd) + 1024), 1, 3))
                   : c.warp_rows == 32 ? 4
                   : hd > 128          ? 1  // stages of 64 keys x 2 x (144 .. 264) bf16: one block per SM
                   : hd > 112          ? 2
                   : hd > 64           ? 3
                                       : (runs <= 2 ? 4 : 3);
    note("min blocks " + std::to_string(c.min_blocks) +
         (t.min_blocks >= 0 ? " (tuning)"
                            : ": registers for " + std::to_string(runs) + " run(s) per row at head_dim " + std::to_string(hd)));
    return c;
  }
  // wgmma: one warpgroup of 4 x 16 rows, 64-key steps, lazy O rescale, checked row sums, no
  // barrier before stage refills, the tile's copies waited for before the next load.
  const bool closed = f.family == KernelFamily::Band || f.family == KernelFamily::Lattice;
  // Band and lattice kernels: a third stage (loads two key tiles ahead): 1.6% faster on
  // window-16k, 6% on the causal window at 16k, equal at 4k; 4 blocks per SM still fit.
  if (t.stages <= 0 && closed) c.stages = 3;
  note(std::to_string(c.stages) + " stages" +
       (t.stages > 0 ? " (tuning)"
        : closed     ? ": the band and lattice kernels load two key tiles ahead"
                     : ": a third stage measured no faster in table kernels"));
  c.sum_checks = hooks.fail_sum_checks ? 2 : 1;
  // Q in shared memory where rows carry several runs or the plan has several passes: their run
  // bounds spill at 128 registers otherwise; 1-1.5% faster on strided, longformer and bigbird,
  // ~0.5% slower on window and dilated. A pass without masks holds no run bounds (bigbird-16k
  // 124.6 -> 122.6 us in registers), nor do the table-free kernels of a window plus a lattice
  // (strided bf16 4k / 16k: 44.9 / 147.6 -> 40.75 / 133.4 us in registers).
  const bool unmasked = unmasked_pass(p, pass, 64);
  const int runs = unmasked ? 1 : pass.max_runs;
  const bool multi = runs >= 2 || f.passes > 1;
  c.q_shared = t.q_shared >= 0 ? t.q_shared != 0 : multi && !f.window_lattice;
  note(std::string("Q in ") + (c.q_shared ? "shared memory" : "registers") +
       (t.q_shared >= 0 ? " (tuning)" : multi && !f.window_lattice ? ": several runs per row or passes" : ""));
  c.tma = f.tma;
  note(c.tma ? "K/V by TMA" : "K/V by cp.async: some walk has a step TMA's views do not take");
  // 4 blocks per SM (128 registers), 3 where rows hold 3+ runs in registers. head_dim 128: 2 (O
  // and Q's fragments take 96 registers; the band and lattice kernels' 3 stages 97 KB), 3 for
  // unmasked table passes (2 stages, 168 registers): bigbird-16k 237.8 -> 202.1 us, blocked-16k
  // 120.2 -> 107.5; masked passes spill at 3, and the band kernels with 2 stages at 3 ran slower.
  if (t.min_blocks >= 0)
    c.min_blocks = t.min_blocks;
  else if (hd == 128)
    c.min_blocks = unmasked && !closed && !f.in_band_globals ? 3 : 2;
  else
    c.min_blocks = runs <= 2 ? 4 : 3;
  note("min blocks " + std::to_string(c.min_blocks) +
       (t.min_blocks >= 0 ? " (tuning)"
        : hd == 128       ? ": head_dim 128 (O and Q fragments; 3 only for unmasked table passes)"
                          : ": 128 registers per thread where rows hold at most 2 runs, else 168"));
  return c;
}

// The selection's common inputs.
struct Ctx {
  const Problem& p;
  const Plan& plan;
  const CodegenOptions& opt;
  EngineKind engine;
  bool pdl = false;  // wgmma: entries reading the previous one's state are programmatic launches
  KernelFacts facts(KernelFamily family, const PlanPass& pass) const {
    KernelFacts f;
    f.family = family;
    f.pass = &pass;
    f.passes = plan.passes.size();
    f.tma = engine == EngineKind::Wgmma && tma_walks(p, plan, pass);
    return f;
  }
  EngineConfig configure(const KernelFacts& f) const { return splat::configure(p, engine, f, opt.tuning, opt.test); }
};

void set_launch(KernelSpec& k, const Problem& p) {
  k.block = k.engine.block();
  k.smem = k.engine.smem(p.dtype, p.head_dim);
}

KernelSpec table_spec(const Ctx& c, size_t pi, const std::string& why) {
  const PlanPass& pass = c.plan.passes[pi];
  KernelSpec k;
  k.engine = c.configure(c.facts(KernelFamily::Table, pass));
  TableTraits tt;
  tt.pass = pi;
  tt.first = pi == 0;
  tt.last = pi + 1 == c.plan.passes.size();
  // Every key tile of the pass full: no run bounds, no mask code.
  tt.unmasked = unmasked_pass(c.p, pass, k.engine.key_tile);
  tt.runs = tt.unmasked ? 1 : pass.max_runs;
  tt.global_keys = pi == 0 && c.plan.global_keys.has_value();
  k.traits = tt;
  k.name = "splat_fused_p" + std::to_string(pi);
  k.role = "fused pass " + std::to_string(pi + 1) + "/" + std::to_string(c.plan.passes.size()) + " (rows grouped by i mod " +
           std::to_string(pass.period) + ")";
  k.grid_x = static_cast<int64_t>(pass.tiles.size());
  set_launch(k, c.p);
  k.launch_dependents = c.pdl && !pass.splits.empty();
  k.reason = why + (tt.unmasked ? "; every key tile full: compiled without run bounds or masks" : "");
  return k;
}

KernelSpec combine_spec(const Ctx& c, size_t pi, const std::string& pass_name) {
  const PlanPass& pass = c.plan.passes[pi];
  KernelSpec k;
  CombineTraits ct;
  ct.pass = pi;
  ct.last = pi + 1 == c.plan.passes.size();
  k.name = pass_name + "_combine";
  k.role = "combine of pass " + std::to_string(pi + 1) + "'s split-KV chunks";
  // rows_per_block rows of a split tile per block, warps_per_row warps each (fused_combine), as
  // many blocks per tile as the tallest split tile needs.
  int64_t rows = 1;
  for (const PlanSplit& sp : pass.splits) rows = std::max(rows, sp.m_end - sp.m_begin);
  ct.blocks_per_tile = static_cast<int>((std::min<int64_t>(rows, 64) + ct.rows_per_block - 1) / ct.rows_per_block);
  k.traits = ct;
  k.grid_x = static_cast<int64_t>(pass.splits.size()) * ct.blocks_per_tile;
  k.block = 32 * ct.rows_per_block * ct.warps_per_row;
  k.programmatic = c.pdl;
  k.reason = std::to_string(pass.splits.size()) + " heavy row tile(s) of pass " + std::to_string(pi + 1) + " split into " +
             std::to_string(pass.slots) + " chunks running in parallel; this merges their states";
  return k;
}

KernelSpec band_spec(const Ctx& c, const Band& band, bool window_lattice) {
  const PlanPass& pass = c.plan.passes[0];
  KernelFacts f = c.facts(KernelFamily::Band, pass);
  f.window_lattice = window_lattice;
  f.tma = true;
  KernelSpec k;
  k.engine = c.configure(f);
  BandTraits bt;
  bt.band = band;
  // One-sided masks on a band's edge tiles: for dilated bands, where they measured faster
  // (dilated-16k 93.4 -> 92.45 us); unit-step windows spilled with them and ran 2-8% slower.
  bt.edge_masks = band.dilation > 1;
  bt.hands_over = window_lattice;
  k.traits = bt;
  k.name = "splat_fused_p0";
  k.role = "fused band kernel (" + std::to_string(band.dilation) + " phase(s), no tables)";
  k.grid_x = band.dilation * band.tiles_per_phase();
  set_launch(k, c.p);
  k.launch_dependents = c.pdl && window_lattice;
  k.reason = window_lattice
                 ? "the window of a window plus a key lattice, in closed form (no tables); hands its state to the lattice kernel"
                 : "the pattern is a band (keys i + " + std::to_string(band.dilation) + "*k, " + std::to_string(band.k_lo) +
                       " <= k <= " + std::to_string(band.k_hi) + "): closed form" +
                       (c.p.varlen ? " per sequence of a packed batch (key tiles clipped to its length)" : "") + ", no tables";
  return k;
}

KernelSpec lattice_spec(const Ctx& c, const Lattice& lat) {
  KernelFacts f = c.facts(KernelFamily::Lattice, c.plan.passes[1]);
  f.window_lattice = true;
  f.tma = true;  // the stride-P view's boxes (kv_len a multiple of P)
  KernelSpec k;
  k.engine = c.configure(f);
  k.traits = LatticeTraits{lat};
  k.name = "splat_fused_p1";
  k.role = "fused lattice kernel (" + std::to_string(lat.period) + " phases, no tables)";
  k.grid_x = lat.period * lat.tiles_per_phase();
  set_launch(k, c.p);
  // It reads the window's state only at its end: it may start while the window's kernel ends.
  k.programmatic = c.pdl;
  k.reason = "the key lattice (period " + std::to_string(lat.period) + ") of a window plus a lattice, in closed form; merges "
             "the window's state at its end";
  return k;
}

// A band with global tokens: one kernel whose first blocks run the plan's pass restricted to the
// first row tile (the global rows, split-KV chunks; tables) and whose other blocks run the band
// kernel with the global keys' tile for every other row tile; then the chunks' combine. (H200,
// longformer-16k: the table kernel took 145 us for the window and global columns, against the band
// kernel's 93 for the window; as two kernels 133 us in all.)
KernelSpec band_globals_spec(const Ctx& c, const BandWithGlobals& bg) {
  BandWithGlobalsTraits bt;
  bt.head_pass = c.plan.passes[0];
  std::erase_if(bt.head_pass.tiles, [](const PlanTile& t) { return t.m_begin >= 64; });
  KernelFacts hf = c.facts(KernelFamily::Table, bt.head_pass);
  hf.in_band_globals = true;
  KernelSpec k;
  k.engine = c.configure(hf);
  bt.head.first = bt.head.last = true;
  bt.head.unmasked = unmasked_pass(c.p, bt.head_pass, k.engine.key_tile);
  bt.head.runs = bt.head.unmasked ? 1 : bt.head_pass.max_runs;
  const PlanPass none;
  KernelFacts bf = c.facts(KernelFamily::Band, none);
  bf.in_band_globals = true;
  bf.tma = true;
  bt.band_engine = c.configure(bf);
  bt.band.band = bg.band;
  bt.band.edge_masks = bg.band.dilation > 1;
  bt.globals = bg.globals;
  bt.band_grid = bg.band.dilation * bg.band.tiles_per_phase();
  // Blocks in launch order take the chunks of every head first, then the band's blocks: head by
  // head, the last heads' chunks (each longer than a band row tile) started in the last wave
  // (longformer-4k bf16 45.6 -> 38.8 us, d = 128 73.5 -> 66.4).
  bt.chunks = leading_chunks(bt.head_pass);
  bt.chunks_first = !bt.head_pass.tiles.empty() && bt.chunks == bt.head_pass.tiles.size();
  k.name = "splat_fused_p0";
  k.role = "fused pass 1/1 of a band with global tokens: blocks [0, " + std::to_string(bt.head_pass.tiles.size()) +
           ") row tile 0 (the global rows; tables, split-KV), the others the band kernel (row tiles 1..)";
  set_launch(k, c.p);
  k.grid_x = static_cast<int64_t>(bt.head_pass.tiles.size()) + bt.band_grid;
  k.smem = std::max(k.smem, bt.band_engine.smem(c.p.dtype, c.p.head_dim));
  k.launch_dependents = c.pdl && !bt.head_pass.splits.empty();
  k.reason = "a band (keys i + k, " + std::to_string(bg.band.k_lo) + " <= k <= " + std::to_string(bg.band.k_hi) + ") with " +
             std::to_string(bg.globals) + " global tokens: row tile 0 from the tables, the others in closed form";
  k.traits = std::move(bt);
  return k;
}

// The decode engine's table pass (decode_pass): a block per (plan tile, K/V head) serving the K/V
// head's query heads, the plan's tiles spread over each group's blocks along grid.y.
KernelSpec decode_spec(const Ctx& c, int64_t group) {
  const PlanPass& pass = c.plan.passes[0];
  KernelSpec k;
  k.engine.kind = EngineKind::Decode;
  k.engine.decode_pairs = static_cast<int>(std::min<int64_t>(c.p.seq_len, 64) * group);
  k.engine.decode_warps = geometry::decode_warps(static_cast<int>(c.p.head_dim), static_cast<int>(dtype_bytes(c.p.dtype)));
  const std::string nw = std::to_string(k.engine.decode_warps);
  k.engine.notes.push_back(std::to_string(k.engine.decode_pairs) + " (row, query head) pair(s) per block, " + nw +
                           " warps taking turns over 32-key steps (K and V rows staged by cp.async), fp32 FMA");
  TableTraits tt;
  tt.first = tt.last = true;
  tt.runs = pass.max_runs;
  tt.global_keys = c.plan.global_keys.has_value();
  k.traits = tt;
  k.name = "splat_fused_p0";
  k.role = "fused decode pass (" + std::to_string(group) + " query head(s) per K/V head per block)";
  const int64_t tiles = static_cast<int64_t>(pass.tiles.size());
  k.grid_x = (tiles + group - 1) / group;
  set_launch(k, c.p);
  k.launch_dependents = c.pdl && !pass.splits.empty();
  k.reason = std::to_string(c.p.seq_len) + " query row(s) x " + std::to_string(group) + " query head(s) per K/V head against " +
             std::to_string(c.p.kv_len) + " keys: each K/V row read once per group, no 64-row tiles (" +
             std::to_string(tiles) + " tile(s) or split chunks over " + std::to_string(k.grid_x) + " x " +
             std::to_string(group) + " blocks per group)";
  return k;
}

// Why a structure's closed-form kernels do not apply (empty: they do).
std::string closed_form_blocker(const Ctx& c, const StructureKind& kind) {
  if (std::holds_alternative<Unstructured>(kind)) return "no band or lattice structure: the plan's tables";
  if (c.p.varlen)
    return "a packed variable-length batch: the plan's tables, clipped to each sequence (its closed form: unit-step bands "
           "on the wgmma engine)";
  if (c.engine != EngineKind::Wgmma) return "the closed-form kernels need the wgmma engine (sm_90a, bf16/fp16, head_dim 64 or 128)";
  return "";
}

}  // namespace

int EngineConfig::block() const {
  return kind == EngineKind::Mma ? geometry::mma_threads(warp_rows / 16) : kind == EngineKind::Decode ? 32 * decode_warps : 128;
}

// The engines' SMEM (libsplat/device/geometry.cuh, which the device code uses too).
int64_t EngineConfig::smem(DType dtype, int64_t hd) const {
  const int d = static_cast<int>(hd);  // <= 128 (choose_engine), <= 256 for the decode engine
  switch (kind) {
    case EngineKind::Wgmma: return geometry::wgmma_smem(stages, q_shared, d);
    case EngineKind::Mma: return geometry::mma_smem(stages, key_tile, d);
    case EngineKind::MmaTf32: return geometry::tf32_smem(stages, d);
    case EngineKind::MmaTf32x3: return dtype == DType::FP32 ? geometry::tf32x3_smem(stages, d) : geometry::tf32_smem(stages, d);
    case EngineKind::Decode: return geometry::decode_smem(decode_pairs, d, static_cast<int>(dtype_bytes(dtype)));
    case EngineKind::CudaCores: break;
  }
  return 0;
}

const char* engine_name(EngineKind k) {
  switch (k) {
    case EngineKind::Wgmma: return "wgmma";
    case EngineKind::Mma: return "mma.sync";
    case EngineKind::MmaTf32: return "mma.sync tf32";
    case EngineKind::MmaTf32x3: return "mma.sync 3xtf32";
    case EngineKind::Decode: return "decode";
    case EngineKind::CudaCores: return "cuda cores";
  }
  return "?";
}

const char* family_name(KernelFamily f) {
  switch (f) {
    case KernelFamily::Table: return "table pass";
    case KernelFamily::Band: return "band kernel";
    case KernelFamily::BandWithGlobals: return "band with global tokens";
    case KernelFamily::Lattice: return "lattice kernel";
    case KernelFamily::Combine: return "split-KV combine";
  }
  return "?";
}

const char* const kTensorCoreHeadDims =
    "the fused engines take rows of whole 16 bytes: head_dim a multiple of 8 up to 256 for bf16/fp16, of 4 up to 128 for fp32/tf32";

EngineChoice choose_engine(const Problem& p, const std::string& arch) {
  const int64_t hd = p.head_dim;
  const bool b16 = p.dtype == DType::BF16 || p.dtype == DType::FP16;
  EngineChoice e;
  // The mma.sync engines copy rows in 16-byte chunks (cp.async) and pad the width to their k-step.
  const int64_t chunk = 16 / static_cast<int64_t>(dtype_bytes(p.dtype));
  if (hd > (b16 ? 256 : 128) || hd % chunk != 0) {
    e.reason = "no tensor-core engine for head_dim " + std::to_string(hd) + " (" + kTensorCoreHeadDims + ")";
    return e;
  }
  e.tensor_cores = true;
  const int width = b16 ? geometry::mma_width(static_cast<int>(hd)) : geometry::tf32_width(static_cast<int>(hd));
  const std::string padded =
      width == hd ? "" : ", head_dim " + std::to_string(hd) + " padded to " + std::to_string(width) + " (zero columns)";
  if (p.dtype == DType::TF32) {
    e.kind = EngineKind::MmaTf32;
    e.reason = "tf32: mma.sync m16n8k8, one tf32 product" + padded;
  } else if (p.dtype == DType::FP32) {
    // 3xTF32 (hi*hi + hi*lo + lo*hi) keeps fp32 accuracy: 1.1-1.6x faster than CUDA cores.
    e.kind = EngineKind::MmaTf32x3;
    e.reason = "fp32: mma.sync m16n8k8 as three tf32 products (3xTF32)" + padded;
  } else if (arch == "sm_90a" && (hd == 64 || hd == 128) &&
             (p.varlen ? p.varlen->max_total_tokens * p.kv_heads : p.kv_len) * hd < (int64_t{1} << 31)) {
    // Key rows fill one or two 128-byte swizzle rows exactly; key/value offsets within a head (a
    // packed batch: within the tensor) are 32-bit (WgmmaEngine::load).
    e.kind = EngineKind::Wgmma;
    e.reason = "sm_90a, " + std::string(dtype_name(p.dtype)) + " at head_dim " + std::to_string(hd) + ": Hopper wgmma";
  } else {
    e.kind = EngineKind::Mma;
    e.reason = std::string(dtype_name(p.dtype)) + ": mma.sync m16n8k16" +
               (arch == "sm_90a" ? " (wgmma takes head_dim 64 or 128)" : " (wgmma needs --arch sm_90a)") + padded;
  }
  return e;
}

Selection select_kernels(const Problem& p, const Structure& st, const Plan& plan, const CodegenOptions& opt) {
  Selection sel;
  sel.engine = choose_engine(p, opt.arch);
  if (p.varlen) sel.grid_y = "sequences*heads";
  if (!p.group_heads.empty()) sel.grid_y = p.varlen ? "sequences*group_heads" : "batch*group_heads";
  if (!opt.fused) return sel;
  if (const int64_t group = decode_engine(p, opt.tuning.decode) ? decode_group(p) : 0; group > 0 && plan.passes.size() == 1) {
    sel.engine = {EngineKind::Decode, false,
                  std::to_string(p.seq_len) + " query row(s) x " + std::to_string(group) +
                      " query head(s) per K/V head: the decode engine (CUDA cores; each K/V row read once per group)"};
    Ctx c{p, plan, opt, EngineKind::Decode};
    c.pdl = opt.arch == "sm_90a";
    sel.fused.push_back(decode_spec(c, group));
    if (!plan.passes[0].splits.empty()) sel.fused.push_back(combine_spec(c, 0, sel.fused.back().name));
    return sel;
  }
  if (!sel.engine.tensor_cores) {
    // Fall back to the pipeline (CUDA cores, any head_dim) where it was asked for too.
    if (opt.pipeline) return sel;
    throw Error(p.file, "head_dim",
                "the fused kernel has no engine for head_dim " + std::to_string(p.head_dim) + " in " +
                    dtype_name(p.dtype) + " (" + kTensorCoreHeadDims + ")" +
                    (p.varlen ? "; a packed variable-length batch runs on the fused engines only"
                              : "; --kernel pipeline runs any head_dim"));
  }
  Ctx c{p, plan, opt, sel.engine.kind};
  c.pdl = c.engine == EngineKind::Wgmma;
  // The closed-form kernels (bands, lattices) walk one square head: not a packed batch.
  const bool wg = c.engine == EngineKind::Wgmma && !p.varlen;
  const BandWithGlobals* bg = std::get_if<BandWithGlobals>(&st.kind);
  const WindowLattice* wl = std::get_if<WindowLattice>(&st.kind);
  const Band* band = std::get_if<Band>(&st.kind);
  const auto one_period_pass = [&] { return plan.passes.size() == 1 && plan.passes[0].period == 1; };
  if (wg && bg && one_period_pass() && rows_fit_int32(p) &&
      std::all_of(plan.passes[0].splits.begin(), plan.passes[0].splits.end(), [](const PlanSplit& sp) { return sp.m_begin < 64; })) {
    sel.fused.push_back(band_globals_spec(c, *bg));
    if (!plan.passes[0].splits.empty()) sel.fused.push_back(combine_spec(c, 0, sel.fused.back().name));
  } else if (wg && wl && plan.passes.size() == 2 && plan.passes[0].period == 1 && plan.passes[1].period == wl->lattice.period &&
             plan.passes[0].splits.empty() && plan.passes[1].splits.empty() && rows_fit_int32(p)) {
    sel.fused.push_back(band_spec(c, wl->window, true));
    sel.fused.push_back(lattice_spec(c, wl->lattice));
    sel.map_period = wl->lattice.period;
    sel.map_width = 1;
  } else if (wg && band && plan.passes.size() == 1 && plan.passes[0].splits.empty() &&
             (band->dilation == 1 || band->dilation == 2) && tma_walks(p, plan, plan.passes[0])) {
    // The tensor maps' two views: dilation 1 or 2.
    sel.fused.push_back(band_spec(c, *band, false));
  } else if (c.engine == EngineKind::Wgmma && p.varlen && band && band->dilation == 1 && plan.passes.size() == 1 &&
             p.kv_len == p.seq_len && p.q_offset == 0 && varlen_maps_fit(p)) {
    // A packed batch's window: the band per sequence, TMA boxes over the packed tokens.
    sel.fused.push_back(band_spec(c, *band, false));
  } else {
    std::string why = closed_form_blocker(c, st.kind);
    if (why.empty()) why = "the structure's closed-form kernels do not fit this plan or problem: the plan's tables";
    for (size_t pi = 0; pi < plan.passes.size(); ++pi) {
      sel.fused.push_back(table_spec(c, pi, why));
      if (!plan.passes[pi].splits.empty()) sel.fused.push_back(combine_spec(c, pi, sel.fused.back().name));
    }
  }
  for (const KernelSpec& k : sel.fused)
    if (k.smem > geometry::kSmemPerBlock)  // a tuning's stages or key tile at a wide head_dim
      throw Error(p.file, "--tune",
                  k.name + " would need " + std::to_string(k.smem) + " B of shared memory at head_dim " +
                      std::to_string(p.head_dim) + ", more than the " + std::to_string(geometry::kSmemPerBlock) +
                      " B a block may use: fewer stages or 64-key steps");
  for (const KernelSpec& k : sel.fused) {
    const auto* bt = std::get_if<BandWithGlobalsTraits>(&k.traits);
    sel.tma = sel.tma || (k.family() != KernelFamily::Combine && k.engine.tma) || (bt && bt->band_engine.tma);
  }
  if (sel.tma && !wl && plan.global_keys && plan.global_keys->blocks) {
    sel.map_period = plan.global_keys->blocks->period;
    sel.map_width = plan.global_keys->blocks->width;
  }
  return sel;
}

std::string explain(const Selection& sel) {
  std::ostringstream o;
  o << "engine: " << engine_name(sel.engine.kind) << " (" << sel.engine.reason << ")\n";
  const auto config = [&](const EngineConfig& e, const char* indent) {
    for (const std::string& n : e.notes) o << indent << "- " << n << "\n";
  };
  for (const KernelSpec& k : sel.fused) {
    o << k.name << ": " << family_name(k.family()) << ", grid " << k.grid_x << " x " << sel.grid_y << ", block " << k.block << ", "
      << k.smem << " B shared memory" << (k.programmatic ? ", programmatic launch" : "") << "\n"
      << "  why: " << k.reason << "\n";
    if (k.family() == KernelFamily::Combine) continue;
    config(k.engine, "  ");
    if (const auto* bt = std::get_if<BandWithGlobalsTraits>(&k.traits)) {
      o << "  the band's blocks:\n";
      config(bt->band_engine, "    ");
    }
  }
  if (sel.fused.empty()) o << "no fused kernel\n";
  return o.str();
}

}  // namespace splat
