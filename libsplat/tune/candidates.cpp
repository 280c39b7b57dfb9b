// The candidate tunings of a problem (no GPU): tune.h, tuning_candidates.
#include <algorithm>
#include <set>

#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/tune/tune.h"

namespace splat {
namespace {

// A register cap per thread that __launch_bounds__(threads, min_blocks) gives (65536 registers per SM,
// allocated per warp in multiples of 8 per thread, at most 255); none or 1 block: 255.
int register_cap(int threads, int min_blocks) {
  if (min_blocks <= 0 || threads <= 0) return 255;
  return std::min(255, 65536 / (min_blocks * threads) / 8 * 8);
}

void add_config(std::vector<int>& sig, const EngineConfig& e) {
  sig.insert(sig.end(), {static_cast<int>(e.kind), e.warp_rows, e.stages, e.key_tile, register_cap(e.block(), e.min_blocks),
                         e.q_shared ? 1 : 0, e.tma ? 1 : 0});
}

// What the kernels of a selection are made of: each fused entry point's engine configuration.
std::vector<int> signature(const Selection& sel) {
  std::vector<int> sig;
  for (const KernelSpec& k : sel.fused) {
    sig.push_back(static_cast<int>(k.family()));
    if (k.family() == KernelFamily::Combine) continue;
    add_config(sig, k.engine);
    if (const auto* bt = std::get_if<BandWithGlobalsTraits>(&k.traits)) add_config(sig, bt->band_engine);
  }
  return sig;
}

int KernelTuning::*field_of(const std::string& key) {
  if (key == "mw") return &KernelTuning::warp_rows;
  if (key == "stages") return &KernelTuning::stages;
  if (key == "bc") return &KernelTuning::key_tile;
  if (key == "minb") return &KernelTuning::min_blocks;
  if (key == "decode") return &KernelTuning::decode;
  return &KernelTuning::q_shared;
}

// The values a key takes, in the order they are tried; minb as register-cap levels (2, 3, 4 blocks
// of 128 threads: 255, 168, 128 registers), made block counts by the candidate's block size.
std::vector<int> key_values(const std::string& key) {
  if (key == "mw") return {16, 32};
  if (key == "stages") return {2, 3};
  if (key == "bc") return {64, 128};
  if (key == "minb") return {2, 3, 4};
  return {0, 1};  // qs, decode
}

// One assignment per key: -1 unset, else an index into key_values.
using Assignment = std::vector<int>;

void all_assignments(const std::vector<std::string>& keys, size_t k, Assignment& a, std::vector<Assignment>& out) {
  if (k == keys.size()) {
    out.push_back(a);
    return;
  }
  const int n = static_cast<int>(key_values(keys[k]).size());
  for (int v = -1; v < n; ++v) {
    a[k] = v;
    all_assignments(keys, k + 1, a, out);
  }
}

// Fewest keys set first; then the more promising keys (earlier in `keys`) set before the others, and
// each key's values in order.
bool before(const Assignment& x, const Assignment& y) {
  const auto set = [](const Assignment& a) { return std::count_if(a.begin(), a.end(), [](int v) { return v >= 0; }); };
  if (set(x) != set(y)) return set(x) < set(y);
  for (size_t k = 0; k < x.size(); ++k) {
    const int a = x[k] < 0 ? 1000 : x[k], b = y[k] < 0 ? 1000 : y[k];
    if (a != b) return a < b;
  }
  return false;
}

std::string kernel_families(const Selection& sel) {
  std::string s;
  for (const KernelSpec& k : sel.fused) s += std::string(s.empty() ? "" : " + ") + family_name(k.family());
  return s.empty() ? "no fused kernel" : s;
}

}  // namespace

std::vector<std::string> tuning_keys(EngineKind engine) {
  switch (engine) {
    case EngineKind::Wgmma: return {"qs", "stages", "minb"};
    case EngineKind::Mma: return {"mw", "minb", "stages", "bc"};
    case EngineKind::MmaTf32:
    case EngineKind::MmaTf32x3: return {"minb", "stages"};
    case EngineKind::Decode:
    case EngineKind::CudaCores: break;
  }
  return {};
}

CandidateSet tuning_candidates(const Problem& p, const Acsr& acsr, const std::string& arch) {
  const Structure structure = analyze_structure(acsr);
  const Plan plan = make_plan(acsr, structure, plan_shape(p, structure, decode_engine(p, -1)));
  CodegenOptions co;
  co.arch = arch;
  co.pipeline = false;
  const auto select = [&](const KernelTuning& t) {
    co.tuning = t;
    return select_kernels(p, structure, plan, co);
  };
  const Selection def = select({});  // throws Error when there is no fused kernel
  CandidateSet c;
  c.engine = def.engine.kind;
  c.kernels = kernel_families(def);
  c.keys = tuning_keys(c.engine);
  // Where the decode engine takes the problem, it against the tensor-core engines (decode=1 / 0;
  // by default it runs for fp32 and tf32 only, decode_engine).
  if (decode_group(p) > 0) c.keys.push_back("decode");
  c.tunings.push_back({});
  std::set<std::vector<int>> seen = {signature(def)};
  int default_rows = 16;
  for (const KernelSpec& k : def.fused)
    if (k.family() != KernelFamily::Combine) default_rows = k.engine.warp_rows;
  std::vector<Assignment> order;
  Assignment a(c.keys.size(), -1);
  all_assignments(c.keys, 0, a, order);
  std::stable_sort(order.begin(), order.end(), before);
  for (const Assignment& x : order) {
    KernelTuning t;
    for (size_t k = 0; k < c.keys.size(); ++k)
      if (x[k] >= 0) t.*field_of(c.keys[k]) = key_values(c.keys[k])[static_cast<size_t>(x[k])];
    if (t.min_blocks > 0 && c.engine == EngineKind::Mma) {
      // Register-cap levels for the candidate's block: 128 * 16 / rows per warp threads.
      const int rows = t.warp_rows > 0 ? t.warp_rows : default_rows;
      t.min_blocks = t.min_blocks * rows / 16;
    }
    Selection sel;
    try {
      sel = select(t);
    } catch (const Error&) {
      continue;  // more shared memory than a block may use (wide head_dim): not a candidate
    }
    if (seen.insert(signature(sel)).second) c.tunings.push_back(t);
  }
  return c;
}

}  // namespace splat
