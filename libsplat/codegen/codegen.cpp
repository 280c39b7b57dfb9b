#include "libsplat/codegen/codegen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "libsplat/codegen/device_code.h"
#include "trsplat/version.h"

namespace splat {
namespace {

std::string f32_literal(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9ef", x);
  return buf;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void print_term(std::ostream& o, const Term& t) {
  o << term_name(t.kind);
  switch (t.kind) {
    case TermKind::Window: o << "(left " << t.left << ", right " << t.right << ")"; break;
    case TermKind::Dilated: o << "(left " << t.left << ", right " << t.right << ", dilation " << t.dilation << ")"; break;
    case TermKind::Strided: o << "(stride " << t.stride << ", offset " << t.offset << ")"; break;
    case TermKind::Fixed: o << "(block " << t.block << ", summary " << t.summary << ")"; break;
    case TermKind::Blocked: o << "(block " << t.block << ")"; break;
    case TermKind::BlockWindow: o << "(block " << t.block << ", left " << t.left << ", right " << t.right << ")"; break;
    case TermKind::Global: o << "(" << t.tokens.size() << " tokens)"; break;
    case TermKind::RandomBlocks: o << "(block " << t.block << ", per_row " << t.per_row << ", seed " << t.seed << ")"; break;
    case TermKind::Affine:
      o << "(slope " << t.slope << ", offset " << t.offset << ", stride " << t.stride << ", count " << t.count << ")";
      break;
    case TermKind::Coo: o << "(" << t.points.size() << " points)"; break;
    case TermKind::Union:
    case TermKind::Intersect:
      o << "(";
      for (size_t k = 0; k < t.children.size(); ++k) {
        if (k) o << ", ";
        print_term(o, t.children[k]);
      }
      o << ")";
      break;
  }
}

std::string canonical_acsr(const Problem& p, const Acsr& a) {
  std::ostringstream o;
  o << "seq " << a.seq_len << " kv " << a.kv_len << " d " << p.head_dim << " dtype " << dtype_name(p.dtype)
    << " scale " << f32_literal(p.scale) << "\n";
  for (const Segment& s : a.segments) {
    o << "seg " << s.row_begin << " " << s.row_end << " " << s.row_stride << " " << s.tabulated << "\n";
    for (const AffineRun& r : s.runs)
      o << " run " << r.start_slope << " " << r.start_offset << " " << r.stride << " " << r.count_slope << " "
        << r.count_offset << " " << r.den << "\n";
    for (int64_t x : s.row_ptr) o << " p" << x;
    for (const Run& r : s.table) o << " t" << r.start << "," << r.stride << "," << r.count;
    o << "\n";
  }
  return o.str();
}

const char* elt_type(DType t) {
  switch (t) {
    case DType::FP32:
    case DType::TF32: return "float";
    case DType::FP16: return "f16_t";
    case DType::BF16: return "bf16_t";
  }
  return "float";
}

// The fused kernel's tuning after defaults. The rules are measured on the H200 (B=1, H=16,
// d=64; docs/performance.md, "splatc kernels (H200)"), each against the alternatives.
struct Tuning {
  int mw = 1, stages = 2, min_blocks = 4, bc = 64;
  bool alias = false, batch = true, lazy = false, overlap = false;
  int chk = 0;
  bool rbar = true, qs = false, ew = false, tma = false;
};

// Shared memory per block of the fused kernel; must match MmaEngine::SMEM, MmaTf32Engine::SMEM,
// MmaTf32x3Engine::SMEM (fp32 with tensor cores: Q's lo fragments after the stages at d > 96) and
// SimtEngine::SMEM (engine_*.cpp).
int64_t fused_smem(DType dt, int64_t hd, bool tc, const Tuning& tu) {
  if (tc && (dt == DType::TF32 || dt == DType::FP32)) {
    const int64_t stages = int64_t{tu.stages} * 64 * ((hd + 16) + (hd + 4)) * 4, qlo = hd / 8 * 128 * 16;
    return stages + (dt == DType::FP32 && hd > 96 && stages + qlo <= 227 * 1024 ? qlo : 0);
  }
  if (tc) return int64_t{tu.stages} * 2 * tu.bc * (hd + 8) * 2;
  return (hd * 68 + 64 * hd + (tu.alias ? std::max<int64_t>(hd * 68, 64 * 68) : hd * 68 + 64 * 68)) * 4;
}

Tuning resolve(const KernelTuning& t, DType dt, int64_t hd, const Plan& plan, const PlanPass& pass, bool tc) {
  Tuning r;
  if (tc && (dt == DType::TF32 || dt == DType::FP32)) {
    // tf32 (MmaTf32Engine) and fp32 as 3xTF32 (MmaTf32x3Engine, the same layout and fragments,
    // Q's lo fragments in registers too): 16 rows per warp only (its fp32 operands double the fragment
    // registers: 32 rows would spill). Shared memory allows 3 blocks per SM at d = 64 (fp32 K and
    // V stages, 74 KB each), but 3 blocks cap registers at 168 and spill; 2 blocks (up to 255
    // registers, no spill) measured 1-10% faster on window, strided and bigbird at 4k (H200), so
    // at most 2, fewer where shared memory allows fewer (1 at d = 128).
    r.mw = 1;
    r.stages = t.mma_stages > 0 ? t.mma_stages : 2;
    const int64_t per_sm = 227 * 1024, fit = per_sm / (fused_smem(dt, hd, tc, r) + 1024);
    r.min_blocks = t.min_blocks >= 0 ? t.min_blocks : static_cast<int>(std::clamp<int64_t>(fit, 1, 2));
  } else if (tc) {
    // 32 rows per warp (2 warps, 255 registers, 4 blocks per SM) halves the ldmatrix traffic:
    // 2-3% faster on single-pass, one-run, period-1 plans (window, blocked); slower on strided
    // (-35%), longformer and bigbird (run registers spill), so 16 rows (4 warps) elsewhere.
    const bool simple = plan.passes.size() == 1 && pass.period == 1 && pass.max_runs == 1 && pass.splits.empty();
    r.mw = t.mma_warp_rows == 16 ? 1 : t.mma_warp_rows == 32 ? 2 : (hd <= 64 && simple ? 2 : 1);
    // A third cp.async stage measured no faster (and 1.5x the shared memory).
    r.stages = t.mma_stages > 0 ? t.mma_stages : 2;
    // 64-key softmax steps, O always rescaled: the 128-key step and the lazy rescale are variants
    // (docs/performance.md).
    r.bc = t.mma_key_tile > 0 ? t.mma_key_tile : 64;
    r.lazy = t.mma_lazy > 0;
    // 16 rows per warp: 128 registers (4 blocks, 16 warps per SM); more runs per row need more.
    // 32 rows per warp: 255 registers (5 blocks, 204 registers, spill heavily).
    // 128-key tiles: twice the stage memory, so at most 3 blocks per SM at d = 64 (2 stages).
    // A pass without masks (NOMASK) holds no run bounds.
    // Wider heads hold more O and Q fragments: at 128 registers d = 128 spilled ~450 bytes; 3
    // blocks (168 registers) for d = 96, 2 (255) for d = 128. H200, bf16, the six peer patterns
    // at 4k / 16k: d = 128 1.30-1.47x faster than at 4 blocks (window-16k 465.3 -> 334.6 us),
    // d = 96 1.05-1.40x (docs/performance.md).
    const int runs = t.nomask != 0 && pass_unmasked(pass, r.bc) ? 1 : pass.max_runs;
    r.min_blocks = t.min_blocks >= 0 ? t.min_blocks
                   : r.bc == 128     ? static_cast<int>(std::clamp<int64_t>(227 * 1024 / (fused_smem(dt, hd, tc, r) + 1024), 1, 3))
                   : r.mw == 2       ? 4
                   : hd > 96         ? 2
                   : hd > 64         ? 3
                                     : (runs <= 2 ? 4 : 3);
  } else {
    // Batched K/V loads with P^T aliased onto K^T at 3 blocks per SM (168 registers): equal or
    // faster everywhere (bigbird fp32 -20%) except two-run passes with split-KV tiles
    // (longformer: 2 blocks of 226 registers without spills, per-element loads, 5% faster).
    // Capping at 4 blocks (128 registers) spills: 6% slower at 16k.
    const bool legacy = pass.max_runs == 2 && !pass.splits.empty();
    r.batch = t.simt_batch < 0 ? !legacy : t.simt_batch != 0;
    r.alias = t.simt_alias < 0 ? !legacy : t.simt_alias != 0;
    r.min_blocks = t.min_blocks >= 0 ? t.min_blocks : legacy ? 0 : 3;
  }
  return r;
}

}  // namespace

KernelTuning parse_tuning(const std::string& spec) {
  KernelTuning t;
  std::istringstream in(spec);
  std::string kv;
  while (std::getline(in, kv, ',')) {
    if (kv.empty()) continue;
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("tuning: expected key=value, got '" + kv + "'");
    const std::string key = kv.substr(0, eq), val = kv.substr(eq + 1);
    int v = 0;
    try {
      size_t used = 0;
      v = std::stoi(val, &used);
      if (used != val.size()) throw std::invalid_argument(val);
    } catch (const std::exception&) {
      throw std::invalid_argument("tuning: '" + key + "' needs an integer, got '" + val + "'");
    }
    // Every key: its field and allowed values (the unknown-key message lists them all).
    struct Key {
      const char* name;
      int KernelTuning::*field;
      bool (*ok)(int);
      const char* what;
    };
    static const auto flag = [](int x) { return x == 0 || x == 1; };
    static const Key keys[] = {
        {"mw", &KernelTuning::mma_warp_rows, [](int x) { return x == 16 || x == 32; }, "16 or 32"},
        {"stages", &KernelTuning::mma_stages, [](int x) { return x == 2 || x == 3; }, "2 or 3"},
        {"minb", &KernelTuning::min_blocks, [](int x) { return x >= 0 && x <= 16; }, "in 0..16"},
        {"alias", &KernelTuning::simt_alias, flag, "0 or 1"},
        {"batch", &KernelTuning::simt_batch, flag, "0 or 1"},
        {"bc", &KernelTuning::mma_key_tile, [](int x) { return x == 64 || x == 128; }, "64 or 128"},
        {"lazy", &KernelTuning::mma_lazy, flag, "0 or 1"},
        {"wg", &KernelTuning::wgmma, flag, "0 or 1"},
        {"wgrows", &KernelTuning::wg_rows, [](int x) { return x == 64 || x == 128; }, "64 or 128"},
        {"ovl", &KernelTuning::wg_overlap, flag, "0 or 1"},
        {"chk", &KernelTuning::wg_checked_sums, [](int x) { return x >= 0 && x <= 2; }, "0, 1 or 2"},
        {"rbar", &KernelTuning::wg_refill_barrier, flag, "0 or 1"},
        {"qs", &KernelTuning::wg_q_shared, flag, "0 or 1"},
        {"ew", &KernelTuning::wg_early_wait, flag, "0 or 1"},
        {"tma", &KernelTuning::wg_tma, flag, "0 or 1"},
        {"band", &KernelTuning::wg_band, flag, "0 or 1"},
        {"dpv", &KernelTuning::wg_deferred_pv, flag, "0 or 1"},
        {"emask", &KernelTuning::band_edge_masks, flag, "0 or 1"},
        {"x3", &KernelTuning::fp32_x3, flag, "0 or 1"},
        {"nomask", &KernelTuning::nomask, flag, "0 or 1"},
        {"pdl", &KernelTuning::pdl, flag, "0 or 1"},
        {"order", &KernelTuning::block_order, flag, "0 or 1"},
        {"gkeys", &KernelTuning::global_keys, flag, "0 or 1"},
    };
    const Key* k = nullptr;
    for (const Key& c : keys)
      if (key == c.name) k = &c;
    if (!k) {
      std::string names;
      for (const Key& c : keys) names += std::string(names.empty() ? "" : ", ") + c.name;
      throw std::invalid_argument("tuning: unknown key '" + key + "' (" + names + ")");
    }
    if (!k->ok(v)) throw std::invalid_argument("tuning: " + key + " must be " + k->what + ", got " + val);
    t.*(k->field) = v;
  }
  return t;
}

const char* kernel_kind_name(KernelKind k) { return k == KernelKind::Fused ? "fused" : "pipeline"; }

const std::vector<ParamDesc>& kernel_params() {
  static const std::vector<ParamDesc> params = {
      {"q", "const void*", "queries [batch, heads, seq_len, head_dim], row-major, problem dtype"},
      {"k", "const void*", "keys [batch, heads, kv_len, head_dim]"},
      {"v", "const void*", "values [batch, heads, kv_len, head_dim]"},
      {"o", "void*", "output [batch, heads, seq_len, head_dim]; rows with no kept key are zero"},
      {"ws", "float*", "fused multi-pass workspace: batch*heads*workspace_floats_per_bh floats (null if 0)"},
      {"scores", "float*", "pipeline compressed scores/probabilities: batch*heads*nnz floats (null for fused)"},
      {"table", "const int*", "device table (table.bin, int32 words; null when table_words is 0)"},
      {"tmaps", "const void*",
       "tensor maps (CUtensorMap, 128 bytes each, 64-byte aligned) of k and v for the TMA loads of fused kernels "
       "(manifest tensor_maps; null when it is empty)"},
  };
  return params;
}

namespace {
std::vector<TensorMapDesc> make_tensor_maps(const Problem& p, int64_t period, int64_t width);
}

GeneratedModule generate(const Problem& p, const Acsr& acsr, const CodegenOptions& opt) {
  if (acsr.seq_len != p.seq_len || acsr.kv_len != p.kv_len)
    throw std::invalid_argument("ACSR and problem sizes differ");
  const int64_t HD = p.head_dim;
  GeneratedModule mod;
  mod.name = p.name;
  // Tensor cores: bf16/fp16 (m16n8k16) at head_dim % 16 == 0, tf32 (m16n8k8, fp32 storage) at
  // head_dim % 32 == 0 (its conflict-free fragment layout); fp32 at that head_dim as three tf32
  // products (3xTF32, fp32 accuracy) unless the tuning asks for CUDA cores (x3=0), else CUDA cores.
  const bool x3 = p.dtype == DType::FP32 && HD % 32 == 0 && HD <= 128 && opt.tuning.fp32_x3 != 0;
  mod.tensor_cores = ((p.dtype == DType::BF16 || p.dtype == DType::FP16) && HD % 16 == 0 && HD <= 128) ||
                     (p.dtype == DType::TF32 && HD % 32 == 0 && HD <= 128) || x3;
  const bool tf32_tc = mod.tensor_cores && p.dtype == DType::TF32;
  // Hopper: wgmma (an sm_90a-only feature) for bf16/fp16 at head_dim 64 or 128, whose key rows
  // fill one or two 128-byte swizzle rows exactly.
  // Its key/value offsets within a head are 32-bit (WgmmaEngine::load).
  const bool wg = mod.tensor_cores && !tf32_tc && !x3 && (HD == 64 || HD == 128) && opt.arch == "sm_90a" &&
                  opt.tuning.wgmma != 0 &&
                  p.kv_len * HD < (int64_t{1} << 31);
  mod.engine = wg ? "wgmma" : tf32_tc ? "mma.sync tf32" : x3 ? "mma.sync 3xtf32" : mod.tensor_cores ? "mma.sync" : "cuda cores";
  // Row tiles of 64 rows: 4 warps x 16 rows on tensor cores, 16 x 8 threads x 4 rows on CUDA cores
  // (128-row tiles measured slower: heavier global-row tiles, fewer blocks per SM).
  Structure structure = analyze_structure(acsr, opt.tile.br);
  if (opt.tuning.global_keys == 0) structure.global_keys.clear();
  mod.plan = make_plan(acsr, structure, opt.tile);
  // wgmma with two warpgroups per block (128-row tiles) where the tuning asks for it and no pass
  // splits tiles (split-KV state slots are laid out for 64-row tiles).
  int wgs = 1;
  if (wg && opt.tuning.wg_rows == 128 && opt.tile.br == 64) {
    TileShape t2 = opt.tile;
    t2.br = 128;
    Structure s2 = analyze_structure(acsr, t2.br);
    if (opt.tuning.global_keys == 0) s2.global_keys.clear();
    Plan p2 = make_plan(acsr, s2, t2);
    if (std::all_of(p2.passes.begin(), p2.passes.end(), [](const PlanPass& ps) { return ps.splits.empty(); })) {
      mod.plan = std::move(p2);
      wgs = 2;
    }
  }
  const Plan& plan = mod.plan;
  // The structure's closed-form kernels (no global keys factored: analysis gives candidates only
  // for unstructured ACSRs).
  const Band* sband = std::get_if<Band>(&structure.kind);
  const BandWithGlobals* sbg = std::get_if<BandWithGlobals>(&structure.kind);
  const WindowLattice* swl = std::get_if<WindowLattice>(&structure.kind);
  const bool has_band = sband || sbg, has_lattice = swl != nullptr;
  const Band band_shape = sband ? *sband : sbg ? sbg->band : swl ? swl->window : Band{};
  const int64_t band_globals = sbg ? sbg->globals : 0;
  const Lattice lattice_shape = swl ? swl->lattice : Lattice{};
  const PlanGlobalKeys no_gkeys;
  const PlanGlobalKeys& gkeys = plan.global_keys ? *plan.global_keys : no_gkeys;
  const int64_t global_period = gkeys.blocks ? gkeys.blocks->period : 0, global_width = gkeys.blocks ? gkeys.blocks->width : 0,
                global_first = gkeys.blocks ? gkeys.blocks->first : 0;
  mod.nnz = plan.nnz;
  mod.table = plan.table;
  const bool fused_ok = mod.tensor_cores || (HD % 32 == 0 && HD <= 128);
  if (opt.fused && !fused_ok)
    throw Error(p.file, "head_dim",
                "the fused kernel needs head_dim <= 128, a multiple of 16 for bf16/fp16 and of 32 for fp32/tf32");
  if (opt.pipeline && HD % 4 != 0) throw Error(p.file, "head_dim", "the pipeline needs head_dim a multiple of 4");

  // Pipeline: compressed row offsets (int64, 8-byte aligned in the table), runs per row.
  std::vector<int64_t> offsets(static_cast<size_t>(p.seq_len) + 1, 0);
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<Run> runs = acsr.row(i);
    mod.max_row_runs = std::max<int64_t>(mod.max_row_runs, static_cast<int64_t>(runs.size()));
    int64_t n = 0;
    for (const Run& r : runs) n += r.count;
    offsets[static_cast<size_t>(i) + 1] = offsets[static_cast<size_t>(i)] + n;
  }
  int64_t off_word = -1;
  if (opt.pipeline) {
    if (mod.max_row_runs > 32) throw Error(p.file, "pattern", "the pipeline supports at most 32 runs per row");
    if (mod.table.size() % 2) mod.table.push_back(0);
    off_word = static_cast<int64_t>(mod.table.size());
    for (int64_t x : offsets) {
      mod.table.push_back(static_cast<int32_t>(static_cast<uint64_t>(x) & 0xffffffffu));
      mod.table.push_back(static_cast<int32_t>(static_cast<uint64_t>(x) >> 32));
    }
  }
  mod.scores_floats_per_bh = opt.pipeline ? plan.nnz : 0;
  int max_slots = 0;
  for (const PlanPass& pass : plan.passes) max_slots = std::max(max_slots, pass.slots);
  // Workspace: the state handed from pass to pass [seq_len][HD + 2], then split-KV partials.
  mod.workspace_floats_per_bh =
      (opt.fused && (plan.passes.size() > 1 || max_slots > 0)) ? (p.seq_len + int64_t{64} * max_slots) * (HD + 2) : 0;
  std::ostringstream hx;
  hx << "fnv1a64:" << std::hex;
  hx.width(16);
  hx.fill('0');
  hx << fnv1a(canonical_acsr(p, acsr));
  mod.pattern_hash = hx.str();

  std::ostringstream s;
  // ---- header comment: the pattern and the facts the code relies on ----
  s << "// Generated by splatc " << TRSPLAT_VERSION << " for pattern \"" << p.name << "\". Do not edit.\n"
    << "// Problem: seq_len " << p.seq_len << ", kv_len " << p.kv_len << ", head_dim " << HD << ", dtype "
    << dtype_name(p.dtype) << ", scale " << p.scale << (p.causal ? ", causal" : "") << "\n// Pattern: ";
  print_term(s, p.pattern);
  s << "\n// Pattern hash (shape + ACSR): " << mod.pattern_hash << "\n"
    << "// Analysis: nnz " << plan.nnz << " (density " << double(plan.nnz) / double(p.seq_len) / double(p.kv_len)
    << "), " << acsr.segments.size() << " segments, widest row " << acsr.max_row_nnz() << " keys, at most "
    << mod.max_row_runs << " runs per row.\n"
    << "// Facts relied on: every row lies in exactly one segment; a segment's runs are disjoint; an affine\n"
    << "// run's start and count are (slope*i + offset)/den, exact on the segment's rows; runs lie in [0, kv_len).\n"
    << "//\n// Fused kernel plan (" << (wg ? "tensor cores, sm_90a wgmma m64n64k16" + std::string(HD == 128 ? " (two per 64-key step of P.V)" : "") : tf32_tc ? "tensor cores, mma.sync m16n8k8 tf32" : x3 ? "tensor cores, fp32 as 3xTF32 (hi*hi + hi*lo + lo*hi), mma.sync m16n8k8" : mod.tensor_cores ? "tensor cores, mma.sync m16n8k16" : "CUDA cores, fp32 FMA")
    << ", fp32 accumulation and online softmax):\n";
  {
    std::istringstream d(describe(plan, structure.kind));
    std::string line;
    while (std::getline(d, line)) s << "//   " << line << "\n";
  }
  s << "//   Keys visited per head " << plan.key_slots << " for " << plan.nnz << " kept (tile fill " << plan.tile_fill()
    << ").\n//\n"
    << "// Entry points: grid (grid_x, batch*heads), block as in the manifest; parameters\n"
    << "//   (const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table,\n"
        "//    const void* tmaps)\n\n";
  s << "#define SPLAT_SEQ " << p.seq_len << "\n#define SPLAT_KV " << p.kv_len << "\n#define SPLAT_HD " << HD << "\n";
  if (global_period > 0)  // global keys in blocks (PlanGlobalKeys::blocks): WgmmaEngine::tma_load's 3D boxes
    s << "#define SPLAT_GLAT_TAB " << gkeys.table << "\n#define SPLAT_GLAT_P " << global_period
      << "\n#define SPLAT_GLAT_C " << global_width << "\n#define SPLAT_GLAT_T0 " << global_first % global_period
      << "\n#define SPLAT_GLAT_B0 " << global_first / global_period << "\n";
  s << device_includes();

  // ---- pattern tables ----
  s << "\n// ------------------------------------------------------------------------------------------------\n"
    << "// Pattern tables (compile-time constants)\n"
    << "// ------------------------------------------------------------------------------------------------\n";
  s << "// Items: {row_begin, row_end, row_stride, start_slope, start_offset, stride, count_slope, count_offset, den,\n"
    << "//         tabulated, tab_row_ptr, tab_runs}: keys of row i are start + k*stride, k < count, with\n"
    << "//         start = (start_slope*i + start_offset)/den and count = (count_slope*i + count_offset)/den.\n";
  s << "__device__ const Item kItems[] = {\n";
  for (size_t k = 0; k < plan.items.size(); ++k) {
    const PlanItem& it = plan.items[k];
    const AffineRun& a = it.run;
    s << "  {" << it.row_begin << ", " << it.row_end << ", " << it.row_stride << ", " << a.start_slope << ", "
      << a.start_offset << ", " << a.stride << ", " << a.count_slope << ", " << a.count_offset << ", " << a.den
      << ", " << (it.tabulated ? 1 : 0) << ", " << it.tab_row_ptr << ", " << it.tab_runs << "},  // item " << k
      << (it.tabulated ? " (tabulated segment " + std::to_string(it.segment) + ")" : "") << "\n";
  }
  if (plan.items.empty()) s << "  {0, 0, 1, 0, 0, 1, 0, 0, 1, 0, -1, -1},  // (no items)\n";
  s << "};\n";
  const double scale_log2 = p.scale * 1.4426950408889634;
  const char* T = elt_type(p.dtype);
  bool any_tma = false;  // some fused pass loads K/V by TMA
  // A band with global tokens (Longformer; Plan: Band::globals) on the wgmma engine with TMA
  // stages: one kernel whose first blocks run the plan's pass restricted to the first row tile (the
  // global rows, split-KV chunks; tables) and whose other blocks run the band kernel with the
  // global keys' tile for every other row tile; then the chunks' combine. They write disjoint rows.
  // (H200, longformer-16k: the table kernel took 145 us for the window and global columns,
  // against the band kernel's 93 for the window; as two kernels, the chunks' pass ran alone,
  // 133 us in all.) The loop takes the band (the extra pass) first and emits both in the table
  // pass's kernel.
  const bool band_global =
      opt.fused && wg && wgs == 1 && has_band && band_globals > 0 && band_shape.dilation == 1 &&
      plan.passes.size() == 1 && plan.passes[0].period == 1 && opt.tuning.wg_band != 0 && opt.tuning.wg_tma != 0 &&
      opt.tuning.wg_refill_barrier <= 0 && p.batch * p.heads * p.kv_len < (int64_t{1} << 31) &&
      std::all_of(plan.passes[0].splits.begin(), plan.passes[0].splits.end(), [](const PlanSplit& sp) { return sp.m_begin < 64; });
  // A window plus a key lattice (strided patterns; Plan::lattice) on the wgmma engine with TMA
  // stages: pass 0 (the window) as the band kernel handing its softmax state over, pass 1 (the
  // lattice) as lattice_pass, both without tables. (H200, strided-16k: the table kernels took 61
  // and 149 us for the two passes.)
  const bool lattice_plan = opt.fused && wg && wgs == 1 && has_lattice && plan.passes.size() == 2 &&
                            plan.passes[0].period == 1 && plan.passes[1].period == lattice_shape.period &&
                            opt.tuning.wg_band != 0 && opt.tuning.wg_tma != 0 && opt.tuning.wg_refill_barrier <= 0 &&
                            p.batch * p.heads * p.kv_len < (int64_t{1} << 31);
  // Programmatic dependent launch (sm_90): an entry that only reads the previous one's output at its
  // end (the lattice kernel, merging the window's state) or that does nothing else (a split-KV
  // combine) may start while the previous entry's last blocks run: that one lets it launch
  // (griddepcontrol.launch_dependents) once its blocks have all started, and it waits for that
  // one's completion (griddepcontrol.wait) before reading. Saves the launch gap and the tail.
  const bool pdl = wg && opt.tuning.pdl != 0;
  // Split-KV chunks' blocks of every head first (chunks_first): by default only in a band with
  // globals' kernel (its table pass is the global rows' chunks alone; the band's blocks follow);
  // order=1 also for table passes (the plan lists a pass's chunks first). H200: longformer-4k bf16
  // 45.6 -> 38.8 us, d = 128 73.5 -> 66.4; BigBird's table pass (chunks first: 16k 121.4 -> 134.2,
  // 4k d = 128 58.4 -> 62.7) reads every head's keys at once in its first wave.
  const bool chunks_first = opt.tuning.block_order != 0;
  const auto leading_chunks = [](const PlanPass& ps) {
    size_t n = 0;
    while (n < ps.tiles.size() && ps.tiles[n].split_slot >= 0) ++n;
    return n;
  };
  PlanPass head;  // band_global: the plan's tiles of the first row tile
  const PlanPass none;
  if (band_global) {
    head = plan.passes[0];
    std::erase_if(head.tiles, [](const PlanTile& t) { return t.m_begin >= 64; });
  }
  const bool band_ordered = chunks_first && band_global && !head.tiles.empty() && leading_chunks(head) == head.tiles.size();
  const size_t npasses = plan.passes.size() + (band_global ? 1 : 0);
  std::string band_call;  // band_global: the band kernel's call, emitted in the table pass's kernel
  int64_t band_grid = 0, band_smem = 0;
  for (size_t it = 0; it < npasses && opt.fused; ++it) {
    const size_t pi = band_global ? npasses - 1 - it : it;
    const bool gband = band_global && pi == plan.passes.size();  // the band kernel of a band with globals
    const PlanPass& pass = gband ? none : band_global ? head : plan.passes[pi];
    std::ostringstream tiles, groups, walks, gitems, grbeg, gpmax;
    // A group's items sorted by first row, with the running max of row ends (kGroupRowEndMax):
    // rows find their items by binary search (a lattice group can hold one item per row block).
    auto sorted_items = [&](const PlanGroup& g) {
      std::vector<int> sorted = g.items;
      std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
        return plan.items[static_cast<size_t>(a)].row_begin < plan.items[static_cast<size_t>(b)].row_begin;
      });
      return sorted;
    };
    int64_t ng = 0, nw = 0, ni = 0;
    for (const PlanTile& t : pass.tiles) {
      // The tile's walks follow each other in kWalks (groups in order, none empty).
      int64_t walk_total = 0;
      int64_t item_total = 0;  // the groups' items follow each other in kGroupItems too
      for (const PlanGroup& g : t.groups) {
        walk_total += static_cast<int64_t>(g.walks.size());
        item_total += static_cast<int64_t>(g.items.size());
      }
      tiles << "  {" << t.phase << ", " << t.m_begin << ", " << t.m_end << ", " << ng << ", " << t.groups.size() << ", "
            << t.split_slot << ", " << (t.split_lead ? 1 : 0) << ", " << (walk_total ? nw : -1) << ", " << walk_total
            << ", " << ni << ", " << item_total;
      {
        std::vector<int> first4;
        for (const PlanGroup& g : t.groups)
          for (int it : sorted_items(g))
            if (first4.size() < 4) first4.push_back(it);
        first4.resize(4, -1);
        for (int it : first4) tiles << ", " << it;
      }
      tiles << "},\n";
      for (const PlanGroup& g : t.groups) {
        groups << "  {" << nw << ", " << g.walks.size() << ", " << ni << ", " << g.items.size() << ", "
               << (g.all_rows ? 2 : g.tabulated ? 1 : 0) << "},\n";
        // An indexed walk (the plan's global keys) has step 0: keys table[base + u].
        for (const KeyWalk& w : g.walks)
          walks << "{" << w.base << ", " << (w.indexed ? 0 : w.step) << ", " << w.count << ", " << w.full_begin << ", " << w.full_end << ", "
                << (w.modular ? 1 : 0) << "}, ";
        int64_t pm = -1;
        for (int it : sorted_items(g)) {
          const PlanItem& pit = plan.items[static_cast<size_t>(it)];
          pm = std::max(pm, pit.row_end);
          gitems << it << ", ";
          grbeg << pit.row_begin << ", ";
          gpmax << pm << ", ";
        }
        nw += static_cast<int64_t>(g.walks.size());
        ni += static_cast<int64_t>(g.items.size());
        ++ng;
      }
      walks << "\n";
    }
    if (ng == 0) groups << "  {0, 0, 0, 0, 0},\n";
    if (nw == 0) walks << "{0, 1, 0, 0, 0, 0}";
    if (ni == 0) gitems << "0", grbeg << "0", gpmax << "0";
    const bool first = pi == 0, last = pi + 1 == plan.passes.size();
    KernelDesc kd;
    kd.name = "splat_fused_p" + std::to_string(pi);
    kd.role = band_global ? "fused pass 1/1 of a band with global tokens: blocks [0, " + std::to_string(pass.tiles.size()) +
                                ") row tile 0 (the global rows; tables, split-KV), the others the band kernel (row tiles 1..)"
                          : "fused pass " + std::to_string(pi + 1) + "/" + std::to_string(plan.passes.size()) +
                                " (rows grouped by i mod " + std::to_string(pass.period) + ")";
    kd.grid_x = static_cast<int64_t>(pass.tiles.size());
    Tuning tu = resolve(opt.tuning, p.dtype, HD, plan, pass, mod.tensor_cores);
    if (wg) {
      // One warpgroup of 4 x 16 rows, 64-key steps; 4 blocks per SM as the mma.sync kernel with
      // 16 rows per warp (3 where rows carry 3+ runs).
      tu.mw = 1;
      tu.bc = 64;
      // O rescaled only when a row's max rose by more than 2^8 (MmaEngine::softmax, LAZY).
      tu.lazy = opt.tuning.mma_lazy != 0;
      // P.V overlapped with the next tile's softmax: a third stage keeps the previous tile's V.
      tu.overlap = opt.tuning.wg_overlap > 0;
      if (tu.overlap) tu.stages = std::max(tu.stages, 3);
      // No row max on the common path: exponentials against the current references, their sums
      // checked (WgmmaEngine, CHK); not with the overlap, whose O rescale is held back.
      tu.chk = tu.overlap ? 0 : opt.tuning.wg_checked_sums < 0 ? 1 : opt.tuning.wg_checked_sums;
      // No block barrier before a stage refill with one warpgroup (its P.V waits suffice): 0.3-1%
      // faster on every bf16 peer case (H200).
      tu.rbar = opt.tuning.wg_refill_barrier > 0;
      // Q in shared memory (S = Q.K^T from shared memory only) where rows carry several runs or
      // the plan has several passes: their run bounds spill at 128 registers otherwise (longformer
      // 60 bytes); 1-1.5% faster on strided, longformer and bigbird, ~0.5% slower on window and
      // dilated (H200), so not for single-run, single-pass plans. A pass without masks (NOMASK)
      // holds no run bounds: Q in registers there (bigbird-16k 124.6 -> 122.6 us).
      const int runs = opt.tuning.nomask != 0 && pass_unmasked(pass, tu.bc) ? 1 : pass.max_runs;
      const bool multi = runs >= 2 || plan.passes.size() > 1;
      // A window plus a lattice runs table-free kernels holding no run bounds: Q in registers there
      // (H200, strided bf16 4k / 16k: 44.9 / 147.6 -> 40.75 / 133.4 us).
      tu.qs = opt.tuning.wg_q_shared < 0 ? multi && !lattice_plan : opt.tuning.wg_q_shared != 0;
      // The computed tile's copies waited for (and fenced) before the next tile's are issued: 0.5-2%
      // faster on every bf16 peer case (H200; the proxy fence then has no fresh copies behind it).
      tu.ew = opt.tuning.wg_early_wait != 0;
      // 4 blocks per SM (128 registers), 3 where rows hold 3+ runs in registers (head_dim 128:
      // below).
      if (opt.tuning.min_blocks < 0) tu.min_blocks = (runs <= 2 ? 4 : 3) / wgs;
      // K/V stages by TMA where every walk of the pass has step 1 or 2 (the tensor maps' two views;
      // step 2 needs an even number of key rows in the whole tensor) and one warpgroup frees the
      // stages (no refill barrier).
      bool walks_ok = true, step2 = false;
      for (const PlanTile& t : pass.tiles)
        for (const PlanGroup& g : t.groups)
          for (const KeyWalk& w : g.walks) {
            if (w.count <= 0) continue;
            // Indexed walks (global keys) by TMA when they are blocks a 3D box can load.
            walks_ok = walks_ok && (w.indexed ? global_period > 0 : (w.step == 1 || w.step == 2));
            step2 = step2 || w.step == 2;
          }
      // Key rows of the whole tensor: TMA coordinates are 32-bit.
      const int64_t rows = p.batch * p.heads * p.kv_len;
      tu.tma = opt.tuning.wg_tma != 0 && wgs == 1 && !tu.rbar && walks_ok && (!step2 || rows % 2 == 0) &&
               rows < (int64_t{1} << 31);
      // lattice_pass: the stride-P view's boxes (kv_len a multiple of P: find_band_lattice).
      if (lattice_plan) tu.tma = true;
      any_tma = any_tma || tu.tma;
    }
    // Band patterns (Plan::band) on TMA stages: the table-free band kernel (band_pass), one row tile
    // per block in closed form (dilation 1 or 2: the tensor maps' two views).
    const bool band = gband || (lattice_plan && pi == 0) ||
                      (wg && tu.tma && has_band && band_globals == 0 && plan.passes.size() == 1 &&
                       pass.splits.empty() && (band_shape.dilation == 1 || band_shape.dilation == 2) &&
                       opt.tuning.wg_band != 0);
    const bool lat = lattice_plan && pi == 1;  // lattice_pass
    // A third stage there (loads two key tiles ahead): 1.6% faster on window-16k, 6% on the causal
    // window at 16k, equal at 4k (H200); the shared memory still allows 4 blocks per SM. Its P.V
    // waits are deferred (dpv): a key tile's P.V runs on until the next tile's S is waited for,
    // 1-3% faster on every band case (H200).
    if ((band || lat) && opt.tuning.mma_stages == 0) tu.stages = 3;
    kd.block = wg ? 128 * wgs : mod.tensor_cores ? 128 / tu.mw : 128;
    // wgmma: 1024-byte aligned swizzled stages (WgmmaEngine::SMEM).
    kd.smem_dynamic = wg ? (int64_t{2} * tu.stages + (tu.qs ? wgs : 0)) * 64 * HD * 2 + 1024
                         : fused_smem(p.dtype, HD, mod.tensor_cores, tu);
    mod.fused.push_back(kd);
    const std::string engine =
        wg        ? std::string("WgmmaEngine<") + T + ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + std::to_string(tu.stages) +
                 ", " + std::to_string(wgs) + ", " + (tu.lazy ? "true" : "false") + ", " + (tu.overlap ? "true" : "false") + ", " +
                 std::to_string(tu.chk) + ", " + (tu.rbar ? "true" : "false") + ", " + (tu.qs ? "true" : "false") + ", " + (tu.ew ? "true" : "false") + (tu.tma ? ", true>" : ">")
        : tf32_tc ? "MmaTf32Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + std::to_string(tu.stages) + ">"
        : x3      ? "MmaTf32x3Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + std::to_string(tu.stages) + ">"
        : mod.tensor_cores ? std::string("MmaEngine<") + T + ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " + std::to_string(tu.mw) +
                                 ", " + std::to_string(tu.stages) + ", " + std::to_string(tu.bc) + ", " +
                                 (tu.lazy ? "true" : "false") + ">"
                           : std::string("SimtEngine<") + T + ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV, " +
                                 (tu.alias ? "true" : "false") + ", " + (tu.batch ? "true" : "false") + ">";
    // Every key tile of the pass full: no run bounds, no mask code (fused_pass NOMASK).
    const bool nomask = !band && !lat && opt.tuning.nomask != 0 && pass_unmasked(pass, tu.bc);
    // head_dim 128: 2 blocks per SM (O and Q's fragments take 96 registers; the band and lattice
    // kernels' 3 stages 97 KB of shared memory), 3 for unmasked table passes (2 stages, 168
    // registers, 16 bytes of spills). H200, bf16: bigbird-16k 237.8 -> 202.1 us, blocked-16k
    // 120.2 -> 107.5 at 3 blocks; masked passes spill there (48-450 bytes), and the band kernels
    // with 2 stages at 3 blocks ran slower (window-16k 176.1 -> 184.8; docs/performance.md).
    if (wg && HD == 128 && opt.tuning.min_blocks < 0) tu.min_blocks = (nomask && !band_global ? 3 : 2) / wgs;
    // Tensor cores: registers capped so that min_blocks blocks share an SM (resolve()).
    const std::string bounds =
        std::to_string(kd.block) + (tu.min_blocks > 0 ? ", " + std::to_string(tu.min_blocks) : std::string());
    // One-sided masks on a band's edge tiles (BandMask): by default for dilated bands only, where
    // they measured faster (H200: dilated-16k 93.4 -> 92.45 us; on, unit-step windows spilled and
    // ran 2-8% slower; off, they are unchanged).
    const bool edge_masks = opt.tuning.band_edge_masks >= 0 ? opt.tuning.band_edge_masks != 0 : band_shape.dilation > 1;
    if (band) {
      kd.grid_x = band_shape.dilation * band_shape.tiles_per_phase();
      kd.role = "fused band kernel (" + std::to_string(band_shape.dilation) + " phase(s), no tables)";
      mod.fused.back().grid_x = kd.grid_x;
      mod.fused.back().role = kd.role;
      if (lattice_plan)
        s << "\n// Pass 0, the window of a window plus a key lattice: the band kernel; row i keeps keys i + k, "
          << band_shape.k_lo << " <= k <= " << band_shape.k_hi << ", within [0, " << p.seq_len
          << ") (with the lattice: checked on every row of the ACSR); " << band_shape.tiles_per_phase()
          << " row tiles, no tables. It hands its softmax state over (ws) to pass 1.\n";
      else if (gband)
        s << "\n// Band kernel with global tokens: row i >= " << band_globals << " keeps keys i + k, " << band_shape.k_lo
          << " <= k <= " << band_shape.k_hi << ", within [0, " << p.seq_len << "), and the global keys [0, "
          << band_globals << "); rows [0, " << band_globals
          << ") keep every key (checked on every row of the ACSR). Row tiles 1.. of " << band_shape.tiles_per_phase()
          << ": the band's key tiles, then one tile of the global keys outside the rows' windows; row tile 0 (the\n"
          << "// global rows) is the table pass's below, in the same kernel.\n";
      else
        s << "\n// Band kernel: row i keeps keys i + " << band_shape.dilation << "*k, " << band_shape.k_lo << " <= k <= "
          << band_shape.k_hi << ", within [0, " << p.seq_len << ") (checked on every row of the ACSR); "
          << band_shape.dilation << " phase(s) of " << band_shape.tiles_per_phase()
          << " row tiles, no tables.\n";
    } else if (lat) {
      const Lattice& L = lattice_shape;
      kd.grid_x = L.period * L.tiles_per_phase();
      kd.role = "fused lattice kernel (" + std::to_string(L.period) + " phases, no tables)";
      kd.programmatic = pdl;
      mod.fused.back().grid_x = kd.grid_x;
      mod.fused.back().role = kd.role;
      mod.fused.back().programmatic = pdl;
      s << "\n// Pass 1, the key lattice: row c + " << L.period << "*m keeps keys c + " << L.period << "*u, u < "
        << L.rows << ", outside u - m in [" << L.hole_lo << ", " << L.hole_hi << "] (the window's; checked on every"
        << " row of the ACSR); " << L.period << " phases of " << L.tiles_per_phase()
        << " row tiles, each walking every key tile, no tables; its state merged with pass 0's at the end.\n";
    } else {
      s << "\n// Pass " << pi << ": rows grouped by i mod " << pass.period << ", " << pass.tiles.size()
        << " row tiles (longest first).\n"
        << "// Tiles {phase, m_begin, m_end, group_begin, group_count, split_slot, split_lead, first_walk, walk_total,\n"
        << "//        item_begin, item_total, item0..3}: rows phase + " << pass.period
        << "*m, m in [m_begin, m_end).\n"
        << "__device__ const TileD kTiles" << pi << "[] = {\n" << tiles.str() << "};\n"
        << "// Groups {walk_begin, walk_count, item_begin, item_count, tabulated}: items walked together.\n"
        << "__device__ const GroupD kGroups" << pi << "[] = {\n" << groups.str() << "};\n"
        << "// Walks {base, step, count, full_begin, full_end, modular}: keys base + u*step, gathered one key tile at a\n"
        << "// time (one line per row tile); key tiles [full_begin, full_end) need no mask (every row keeps every key);\n"
        << "// modular: some row's run has a stride > 1 (its mask tests the residue).\n"
        << (nomask ? "// Every key tile of this pass is full: compiled without run bounds or masks (NOMASK).\n" : "")
        << "__device__ const WalkD kWalks" << pi << "[] = {\n" << walks.str() << "};\n"
        << "__device__ const int kGroupItems" << pi << "[] = {" << gitems.str() << "};\n"
        << "__device__ const int kGroupRowBegin" << pi << "[] = {" << grbeg.str() << "};\n"
        << "__device__ const int kGroupRowEndMax" << pi << "[] = {" << gpmax.str() << "};\n";
      if (!pass.splits.empty()) {
        s << "// Split-KV tiles {phase, m_begin, m_end, slot_begin, slot_count}: chunks run in parallel, then combine.\n"
          << "__device__ const SplitD kSplits" << pi << "[] = {\n";
        for (const PlanSplit& sp : pass.splits)
          s << "  {" << sp.phase << ", " << sp.m_begin << ", " << sp.m_end << ", " << sp.slot_begin << ", " << sp.slot_count
            << "},\n";
        s << "};\n";
      }
    }
    s << "// " << (wg ? std::to_string(wgs) + " warpgroup(s) of 4 warps x 16 rows, " + std::to_string(tu.stages) +
                          (tu.tma ? " stages" : " cp.async stages") + " (128-byte swizzle), 64-key softmax steps" +
                          (tu.lazy ? ", lazy O rescale" : "") + (tu.overlap ? ", P.V overlapped with the next softmax" : "") +
                          (tu.chk ? ", checked row sums instead of row maxima" : "") +
                          (tu.qs ? ", Q in shared memory" : "") + (tu.rbar || wgs > 1 ? "" : ", no barrier before stage refills") +
                          (tu.tma ? ", K/V stages loaded by TMA" : tu.ew ? ", copies waited for before the next load" : "") +
                          ((band || lat) && opt.tuning.wg_deferred_pv != 0 ? ", each P.V waited for with the next tile's S" : "")
                   : mod.tensor_cores ? std::to_string(16 * tu.mw) + " rows per warp, " + std::to_string(tu.stages) +
                                          " cp.async stages, " + std::to_string(tu.bc) + "-key softmax steps" +
                                          (tu.lazy ? ", lazy O rescale" : "")
                                    : std::string("P^T ") + (tu.alias ? "shares K^T's" : "has its own") +
                                          " shared memory, " + (tu.batch ? "batched" : "per-element") + " K/V loads")
      << "\n";
    // The band kernel's call: extra = its globals, B0 and BX (band with globals), or none.
    const auto band_pass_call = [&](const std::string& extra) {
      return "band_pass<" + engine + ", " + T + ", SPLAT_SEQ, SPLAT_HD, " + std::to_string(band_shape.dilation) + ", " +
             std::to_string(band_shape.k_lo) + ", " + std::to_string(band_shape.k_hi) +
             (opt.tuning.wg_deferred_pv != 0 ? ", true" : ", false") + ", " + (edge_masks ? "true" : "false") + extra +
             ">(" + f32_literal(scale_log2) + ", static_cast<const " + T + "*>(q), static_cast<const " + T +
             "*>(k), static_cast<const " + T + "*>(v), static_cast<" + T + "*>(o), ws, tmaps" +
             (band_ordered ? ", lin - nc" : "") + ");\n";
    };
    if (gband) {
      // Emitted with the table pass's kernel (next iteration): blocks from its tiles' count on.
      mod.fused.pop_back();
      band_grid = kd.grid_x;
      band_smem = kd.smem_dynamic;
      band_call = band_pass_call(", " + std::to_string(band_globals) + ", " + std::to_string(head.tiles.size()) +
                                 ", " + std::to_string(band_grid));
      continue;
    }
    if (band_global) {
      // One grid: the table pass's tiles, then the band's blocks (band_pass's B0, BX).
      kd.grid_x += band_grid;
      kd.smem_dynamic = std::max(kd.smem_dynamic, band_smem);
      mod.fused.back() = kd;
    }
    s << "extern \"C\" __global__ void __launch_bounds__(" << bounds << ") " << kd.name
      << "(const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table, const void* tmaps) {\n"
      << "  (void)scores;\n";
    // The next entry (lattice kernel, combine) is a programmatic dependent launch: let it start.
    if (pdl && ((lattice_plan && pi == 0) || !pass.splits.empty())) s << "  pdl_launch_dependents();\n";
    const size_t nchunks = leading_chunks(pass);
    const bool ordered = band_global ? band_ordered : opt.tuning.block_order == 1 && nchunks > 0 && !band && !lat;
    if (ordered) {
      // Blocks in launch order take the chunks of every head first (chunk 0 of each head, then chunk
      // 1, ...), then the other tiles head by head (a band with globals: the band's blocks, in
      // band_pass's own order). Head by head, the last heads' chunks (each longer than a band row
      // tile) started in the last wave, a third wave at longformer-4k's 1120 blocks.
      s << "  const i64 lin = blockIdx.x + (i64)gridDim.x * blockIdx.y, nc = (i64)" << nchunks << " * gridDim.y;\n";
      if (band_global) {
        s << "  if (lin >= nc) {\n    " << band_call << "    return;\n  }\n"
          << "  const int tix = (int)(lin / gridDim.y);\n  const i64 bhx = lin % gridDim.y;\n";
      } else {
        const size_t rest = pass.tiles.size() - nchunks;
        s << "  int tix;\n  i64 bhx;\n  if (lin < nc) {\n    tix = (int)(lin / gridDim.y);\n    bhx = lin % gridDim.y;\n"
          << "  } else {\n    tix = " << nchunks << " + (int)((lin - nc) % " << std::max<size_t>(rest, 1) << ");\n    bhx = (lin - nc) / "
          << std::max<size_t>(rest, 1) << ";\n  }\n";
      }
    } else if (band_global) {
      s << "  if (blockIdx.x >= " << head.tiles.size() << ") {\n    " << band_call << "    return;\n  }\n";
    }
    if (band)
      s << "  (void)table;\n  " << band_pass_call(lattice_plan ? ", 0, 0, 0, false" : "") << "}\n";
    else if (lat)
      s << "  (void)table;\n  lattice_pass<" << engine << ", " << T << ", SPLAT_SEQ, SPLAT_HD, " << lattice_shape.period
        << ", " << lattice_shape.hole_lo << ", " << lattice_shape.hole_hi << (opt.tuning.wg_deferred_pv != 0 ? ", true" : ", false")
        << (pdl ? ", true" : ", false") << ">(" << f32_literal(scale_log2) << ", static_cast<const " << T << "*>(q), static_cast<const " << T
        << "*>(k), static_cast<const " << T << "*>(v), static_cast<" << T << "*>(o), ws, tmaps);\n}\n";
    else
      s << "  fused_pass<" << engine << ", " << T << ", SPLAT_SEQ, SPLAT_HD, " << pass.period << ", " << (nomask ? 1 : pass.max_runs) << ", "
      << pass.slots << ", " << (first ? "true" : "false") << ", " << (last ? "true" : "false") << ", " << (nomask ? "true" : "false")
      << (pi == 0 && gkeys.count > 0
              ? ", " + std::to_string(gkeys.table) + (gkeys.prefix_table >= 0 ? ", " + std::to_string(gkeys.prefix_table) : "")
              : std::string())
      << ">(kItems, kTiles" << pi << ", kGroups"
      << pi << ", kWalks" << pi << ", kGroupItems" << pi << ", kGroupRowBegin" << pi << ", kGroupRowEndMax" << pi
      << ", " << f32_literal(scale_log2) << ", static_cast<const "
      << T << "*>(q), static_cast<const " << T << "*>(k), static_cast<const " << T << "*>(v), static_cast<" << T
      << "*>(o), ws, table, tmaps" << (ordered ? ", tix, bhx" : "") << ");\n}\n";
    if (!pass.splits.empty()) {
      KernelDesc cd;
      cd.name = kd.name + "_combine";
      cd.role = "combine of pass " + std::to_string(pi + 1) + "'s split-KV chunks";
      // kCombineRows rows of a split tile per block, kCombineWarps warps each (fused_combine).
      constexpr int kCombineRows = 2, kCombineWarps = 4;
      cd.grid_x = static_cast<int64_t>(pass.splits.size()) * (64 / kCombineRows);
      cd.block = 32 * kCombineRows * kCombineWarps;
      cd.programmatic = pdl;
      mod.fused.push_back(cd);
      s << "extern \"C\" __global__ void __launch_bounds__(" << cd.block << ") " << cd.name
        << "(const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table, const void* tmaps) {\n"
        << "  (void)q; (void)k; (void)v; (void)scores; (void)table; (void)tmaps;\n"
        << "  fused_combine<" << T << ", SPLAT_SEQ, SPLAT_HD, " << pass.period << ", " << pass.slots << ", "
        << (last ? "true" : "false") << ", " << kCombineRows << ", " << kCombineWarps << (pdl ? ", true" : ", false") << ">(kSplits" << pi << ", static_cast<" << T << "*>(o), ws);\n}\n";
    }
  }

  if (opt.pipeline) {
    s << "\n// Pipeline: segments {row_begin, row_stride, first_block, run_begin, run_count (<0: tabulated item -n-1)}\n";
    std::ostringstream segs, runs, pitems;
    int64_t first_block = 0, nruns = 0, nseg = 0, npitems = 0;
    // With global keys factored out, the plan's items describe the rows without them: the
    // pipeline's tabulated segments then get their own items and table words.
    const bool own_items = gkeys.count > 0;
    for (size_t si = 0; si < acsr.segments.size(); ++si) {
      const Segment& sg = acsr.segments[si];
      if (sg.rows() == 0) continue;
      int64_t run_count = static_cast<int64_t>(sg.runs.size()), run_begin = nruns;
      if (sg.tabulated && own_items) {
        int64_t rp = 0, rr = 0;
        append_table_rows(sg, mod.table, rp, rr);
        pitems << "  {" << sg.row_begin << ", " << sg.row_end << ", " << sg.row_stride << ", 0, 0, 1, 0, 0, 1, 1, " << rp
               << ", " << rr << "},  // segment " << si << "\n";
        run_count = -(npitems++) - 1;
      } else if (sg.tabulated) {
        run_count = 0;
        for (size_t k = 0; k < plan.items.size(); ++k)
          if (plan.items[k].tabulated && plan.items[k].segment == static_cast<int>(si)) run_count = -static_cast<int64_t>(k) - 1;
      } else {
        for (const AffineRun& a : sg.runs) {
          runs << "  {" << a.start_slope << ", " << a.start_offset << ", " << a.stride << ", " << a.count_slope << ", "
               << a.count_offset << ", " << a.den << "},\n";
          ++nruns;
        }
      }
      segs << "  {" << sg.row_begin << ", " << sg.row_stride << ", " << first_block << ", " << run_begin << ", "
           << run_count << "},  // segment " << si << ": " << sg.rows() << " rows\n";
      first_block += sg.rows();
      ++nseg;
    }
    if (first_block != p.seq_len) throw std::invalid_argument("ACSR segments do not cover every row exactly once");
    if (nruns == 0) runs << "  {0, 0, 1, 0, 0, 1},\n";
    s << "__device__ const Seg kSegs[] = {\n" << segs.str() << "};\n";
    s << "__device__ const SegRun kSegRuns[] = {\n" << runs.str() << "};\n";
    if (npitems > 0) s << "// The pipeline's tabulated segments (the fused plan's items omit the global keys).\n"
                       << "__device__ const Item kPipeItems[] = {\n" << pitems.str() << "};\n";
    const std::string pipe_items = npitems > 0 ? "kPipeItems" : "kItems";
    const std::string seg_args = "kSegs, " + std::to_string(nseg);
    const std::string off = std::to_string(off_word) + "ll, " + std::to_string(plan.nnz) + "ll";
    s << "extern \"C\" __global__ void __launch_bounds__(128) splat_sddmm(const void* q, const void* k, const void* v, "
         "void* o, float* ws, float* scores, const int* table, const void* tmaps) {\n"
      << "  (void)v; (void)o; (void)ws; (void)tmaps;\n"
      << "  sddmm_row<" << T << ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV>(" << seg_args << ", kSegRuns, " << pipe_items << ", table, " << off
      << ", " << f32_literal(p.scale) << ", static_cast<const " << T << "*>(q), static_cast<const " << T
      << "*>(k), scores);\n}\n";
    s << "extern \"C\" __global__ void __launch_bounds__(128) splat_softmax(const void* q, const void* k, const void* v, "
         "void* o, float* ws, float* scores, const int* table, const void* tmaps) {\n"
      << "  (void)q; (void)k; (void)v; (void)o; (void)ws; (void)tmaps;\n"
      << "  softmax_row<SPLAT_SEQ>(" << seg_args << ", table, " << off << ", scores);\n}\n";
    s << "extern \"C\" __global__ void __launch_bounds__(128) splat_spmm(const void* q, const void* k, const void* v, "
         "void* o, float* ws, float* scores, const int* table, const void* tmaps) {\n"
      << "  (void)q; (void)k; (void)ws; (void)tmaps;\n"
      << "  spmm_row<" << T << ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV>(" << seg_args << ", kSegRuns, " << pipe_items << ", table, " << off
      << ", scores, static_cast<const " << T << "*>(v), static_cast<" << T << "*>(o));\n}\n";
    for (const char* n : {"splat_sddmm", "splat_softmax", "splat_spmm"}) {
      KernelDesc kd;
      kd.name = n;
      kd.role = std::string(n) == "splat_sddmm" ? "r-sddmm: scaled Q.K^T at kept positions, compressed"
                : std::string(n) == "splat_softmax" ? "r-softmax: per row over its slots, in place"
                                                     : "r-spmm: O = P.V from the compressed probabilities";
      kd.grid_x = p.seq_len;
      mod.pipeline.push_back(kd);
    }
  }
  if (any_tma)
    mod.tensor_maps = make_tensor_maps(p, lattice_plan ? lattice_shape.period : global_period,
                                       lattice_plan ? 1 : global_width);
  mod.source = s.str();
  return mod;
}

namespace {
// K, V as rows (unit-step walks), as [rows / 2][2][head_dim] (stride-2 walks: a box is 64 rows of
// one parity) and, for a lattice pass or blocks of global keys (period > 0), as
// [rows / period][period][head_dim] with boxes of 64 / width blocks of width rows (lattice: 1).
std::vector<TensorMapDesc> make_tensor_maps(const Problem& p, int64_t period, int64_t width) {
  const uint64_t rows = static_cast<uint64_t>(p.batch * p.heads * p.kv_len), hd = static_cast<uint64_t>(p.head_dim);
  const uint64_t pitch = hd * 2;  // bf16/fp16 rows
  std::vector<TensorMapDesc> maps;
  std::vector<uint64_t> steps = {1, 2};
  if (period > 0) steps.push_back(static_cast<uint64_t>(period));
  for (uint64_t step : steps)
    for (const char* t : {"k", "v"}) {
      TensorMapDesc m;
      m.tensor = t;
      // Boxes of 64 head columns (128 bytes, the swizzle's width): head_dim 128 loads two per tile.
      const uint32_t bw = static_cast<uint32_t>(std::min<uint64_t>(hd, 64));
      if (step == 1) {
        m.dims = {hd, rows};
        m.strides = {pitch};
        m.box = {bw, 64};
      } else {
        const uint32_t w = step == 2 ? 1u : static_cast<uint32_t>(width);
        m.dims = {hd, step, rows / step};
        m.strides = {pitch, step * pitch};
        m.box = {bw, w, 64 / w};
      }
      maps.push_back(m);
    }
  return maps;
}

nlohmann::json tensor_maps_json(const Problem& p, const GeneratedModule& mod) {
  nlohmann::json a = nlohmann::json::array();
  for (const TensorMapDesc& m : mod.tensor_maps)
    a.push_back({{"tensor", m.tensor},
                 {"dims", m.dims},
                 {"strides_bytes", m.strides},
                 {"box", m.box},
                 {"element", dtype_name(p.dtype)},
                 {"swizzle", "128B"},
                 {"interleave", "none"},
                 {"oob_fill", "zero"}});
  return a;
}
}  // namespace

nlohmann::json manifest(const Problem& p, const GeneratedModule& mod, const std::string& target, const std::string& arch,
                        const std::vector<std::string>& files) {
  using nlohmann::json;
  auto kernels = [&](const std::vector<KernelDesc>& ks) {
    json a = json::array();
    for (const KernelDesc& k : ks)
      a.push_back({{"name", k.name},
                   {"role", k.role},
                   {"grid", {k.grid_x, "batch*heads", 1}},
                   {"block", {k.block, 1, 1}},
                   {"shared_memory_dynamic_bytes", k.smem_dynamic},
                   {"programmatic_launch", k.programmatic}});
    return a;
  };
  json params = json::array();
  for (size_t i = 0; i < kernel_params().size(); ++i) {
    const ParamDesc& d = kernel_params()[i];
    params.push_back({{"index", i}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  return json{{"generator", std::string("splatc ") + TRSPLAT_VERSION},
              {"name", mod.name},
              {"pattern_hash", mod.pattern_hash},
              {"target", target},
              {"arch", arch},
              {"files", files},
              {"problem",
               {{"seq_len", p.seq_len},
                {"kv_len", p.kv_len},
                {"head_dim", p.head_dim},
                {"heads", p.heads},
                {"batch", p.batch},
                {"dtype", dtype_name(p.dtype)},
                {"scale", p.scale},
                {"causal", p.causal},
                {"nnz", mod.nnz}}},
              {"layout", "q, o: [batch, heads, seq_len, head_dim]; k, v: [batch, heads, kv_len, head_dim]; row-major"},
              {"parameters", params},
              {"kernels", {{"fused", kernels(mod.fused)}, {"pipeline", kernels(mod.pipeline)}}},
              {"launch_order", "fused: every fused entry in order (passes hand state over through ws); an entry with "
                               "programmatic_launch may be launched with programmatic stream serialization "
                               "(cudaLaunchAttributeProgrammaticStreamSerialization) to start while the previous one "
                               "ends; pipeline: splat_sddmm, splat_softmax, splat_spmm"},
              {"workspace_floats_per_bh", mod.workspace_floats_per_bh},
              {"scores_floats_per_bh", mod.scores_floats_per_bh},
              {"table_words", mod.table.size()},
              {"tensor_maps", tensor_maps_json(p, mod)},
              {"tensor_cores", mod.tensor_cores},
              {"engine", mod.engine},
              {"tile", {{"rows", mod.plan.shape.br}, {"keys", mod.plan.shape.bc}, {"fill", mod.plan.tile_fill()}}}};
}

}  // namespace splat
