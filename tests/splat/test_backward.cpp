// The backward pass's code generation (codegen/backward.h): what it refuses, its plans, and NVRTC
// compiling every backward module of patterns/ and tests/gpu.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <tuple>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/cpu_model.h"
#include "libsplat/device/geometry.cuh"
#include "libsplat/compile/resources.h"
#include "libsplat/pattern/pattern.h"
#include "nvrtc_cache.h"

using namespace splat;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The problems the backward kernels take (whole 16-byte chunks: head_dim a multiple of 8 in bf16/fp16,
// at most 256; a multiple of 4 in fp32/tf32, at most 128).
bool backward_takes(const Problem& p) {
  const bool two = dtype_bytes(p.dtype) == 2;
  return p.head_dim % (two ? 8 : 4) == 0 && p.head_dim <= (two ? 256 : 128);
}

// The problems of dir the backward takes; a per-head one as its head groups' problems (a module each).
std::vector<Problem> backward_problems(const fs::path& dir) {
  std::vector<Problem> out;
  for (const fs::path& f : json_files(dir)) {
    const Problem p = load_problem(f.string());
    if (!backward_takes(p)) continue;
    for (Problem& g : head_group_problems(p)) out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

TEST_CASE("backward modules compile for sm_80 and sm_90a: every bf16/fp16 one of patterns/ and tests/gpu, the fp32/tf32 ones of tests/gpu" * doctest::test_suite("nvrtc")) {
  int n = 0;
  for (const char* dir : {"patterns", "tests/gpu"})
    for (const Problem& p : backward_problems(fs::path(TRSPLAT_SOURCE_DIR) / dir)) {
      CAPTURE(p.name);
      const Acsr acsr = analyze(p);
      const BackwardModule m = generate_backward(p, acsr);                          // every sm_80+ GPU's
      const BackwardModule m90 = generate_backward(p, acsr, BackwardTuning{}, "sm_90a");  // wgmma where it runs
      // fp32 storage (NVRTC takes several seconds a module over 3xTF32's unrolled products): the
      // tests/gpu problems only, which cover the plan features; sm_80 at head_dim <= 64 (where its
      // shared memory holds the engine's stages).
      const bool fp32 = dtype_bytes(p.dtype) == 4, small = p.seq_len <= 8192;
      if (fp32 && std::string(dir) != "tests/gpu") continue;
      // PTX for sm_90a (front end and code generation); for sm_80 CUBIN (ptxas) up to 8k rows, else PTX.
      CHECK(m90.engine == (!fp32 && p.head_dim == 64 ? "wgmma" : m.engine));
      const CompileResult r = test_compile(m90.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Ptx);
      for (const KernelDesc& k : m90.kernels) CHECK(r.image.find(".entry " + k.name) != std::string::npos);
      if (m90.engine == "wgmma") CHECK(r.image.find("wgmma.mma_async") != std::string::npos);
      if (!fp32 || p.head_dim <= 64) {
        const CompileResult r80 = test_compile(m.source, p.name + ".bwd.cu", "sm_80", small ? CompileTarget::Cubin : CompileTarget::Ptx);
        CHECK(!r80.image.empty());
      }
      if (!p.group_heads.empty()) CHECK(r.image.find("kGroupHeads") != std::string::npos);
      ++n;
    }
  CHECK(n > 20);
}

// The fast mode: no dQ kernel; the dK/dV kernels add dQ by atomics into fp32 sums that
// splat_bwd_delta zeroes and splat_bwd_dq_store scales and stores. Its modules compile (NVRTC, ptxas
// for sm_80 where its shared memory holds them) on problems that cover the plan's features: split
// tiles, several passes, global keys, grouped and per-head K/V heads, a packed batch, head_dim 128
// and 256 (column slices), and both engines (fp32 as 3xTF32, tf32).
TEST_CASE("backward, fast mode: modules compile for sm_80 and sm_90a (tests/gpu, every engine)" * doctest::test_suite("nvrtc")) {
  BackwardTuning fast;
  fast.fast = true;
  int n = 0, wg = 0;
  for (const char* name : {"window-ragged-bf16", "global-strided-bf16", "bigbird-ragged-bf16", "varlen-window-ragged-bf16",
                           "head-windows-ragged-bf16", "gqa-band-ragged-bf16", "window-d128-ragged-bf16",
                           "lattice-ragged-bf16", "decode-window-global-bf16", "dilated-causal-fp16", "window-d32-fp32",
                           "mqa-longformer-fp32", "varlen-strided-fp32", "window-d96-tf32", "wide-decode-d256-bf16"}) {
    const Problem whole = load_problem(std::string(TRSPLAT_SOURCE_DIR) + "/tests/gpu/" + name + ".json");
    for (const Problem& p : head_group_problems(whole)) {
      CAPTURE(p.name);
      const BackwardModule m = generate_backward(p, analyze(p), fast);
      CHECK(m.mode == "fast");
      const CompileResult r = test_compile(m.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Ptx);
      for (const KernelDesc& k : m.kernels) CHECK(r.image.find(".entry " + k.name) != std::string::npos);
      if (dtype_bytes(p.dtype) == 2 || p.head_dim <= 64)
        CHECK(!test_compile(m.source, p.name + ".bwd.cu", "sm_80", CompileTarget::Cubin).image.empty());
      // The sm_90a module: the wgmma engine at 16-bit head_dim 64, its wgmma groups asynchronous.
      const BackwardModule w = generate_backward(p, analyze(p), fast, "sm_90a");
      if (w.engine == "wgmma") {
        const CompileResult c = nvrtc_compile(w.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Cubin, TRSPLAT_NVRTC_CACHE, true);
        CHECK(!c.image.empty());
        CHECK(c.log.find("are serialized") == std::string::npos);
        for (const KernelResources& k : parse_ptxas_report(c.log)) CHECK(k.registers <= 168);  // 3 blocks an SM
        if (wg == 0) {  // dQ's sums: one bulk reduction per walked row, no per-thread atomics
          const std::string ptx = test_compile(w.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Ptx).image;
          CHECK(ptx.find("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32") != std::string::npos);
          CHECK(ptx.find("cp.async.bulk.wait_group.read 0") != std::string::npos);
          CHECK(ptx.find("red.global.add") == std::string::npos);
        }
        ++wg;
      }
      ++n;
    }
  }
  CHECK(n >= 19);
  CHECK(wg >= 7);
}

// ptxas on the backward kernels (sm_90a): every entry point the module lists, and at most 64 bytes of
// spills per thread (a guard against register blow-ups: the kernels run at 168-255 registers, and
// strided's, head_dim 128's and BigBird's spill 4-32 bytes; the variants that spill none, areg=0 or
// cw=32, measured no faster: docs/performance.md). fp32 storage over d = 64: at most 256 bytes (its
// dK/dV accumulators take 128 registers; with S's head-column loop fully unrolled, d = 128 spilled
// 1.6-2.5 KB; unrolled by two, 0-176 B).
TEST_CASE("backward kernels: registers and spills (window, strided, bigbird, fixed; d 64 to 256; fp32, tf32)" * doctest::test_suite("nvrtc")) {
  for (const char* name : {"patterns/window-4k-bf16.json", "patterns/strided-4k-bf16.json", "patterns/bigbird-4k-fp16.json",
                           "tests/gpu/window-d128-ragged-bf16.json", "tests/gpu/fixed-causal-bf16.json",
                           "tests/gpu/window-d128-fp32.json", "tests/gpu/window-d96-tf32.json",
                           "tests/gpu/wide-window-globals-d256-bf16.json", "tests/gpu/wide-strided-d200-fp16.json"}) {
    const Problem p = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / name).string());
    CAPTURE(p.name);
    const Acsr acsr = analyze(p);
    // The engines every sm_80+ GPU runs, then the sm_90a module (wgmma at 16-bit head_dim 64), and
    // that module in the fast mode (its dK/dV kernel with dQ's product: 156-244 bytes of spills at
    // window and strided).
    BackwardTuning fast;
    fast.fast = true;
    for (const auto& [arch, tuning] : {std::pair<const char*, BackwardTuning>{"", {}}, {"sm_90a", {}}, {"sm_90a", fast}}) {
      const BackwardModule m = generate_backward(p, acsr, tuning, arch);
      if (tuning.fast && m.engine != "wgmma") continue;  // the other engines' fast kernels: the fast-mode test
      CAPTURE(m.mode);
      CAPTURE(m.engine);
      const CompileResult r = nvrtc_compile(m.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Cubin, TRSPLAT_NVRTC_CACHE, true);
      const std::vector<KernelResources> res = parse_ptxas_report(r.log);
      // ptxas keeps the wgmma groups asynchronous (no "wgmma.mma_async instructions are serialized",
      // C7512 for want of registers, C7515 for accumulators written between a wgmma and its wait): the
      // engine's overlap of S, dP, dV and dK with the softmax depends on it.
      if (m.engine == "wgmma") CHECK(r.log.find("are serialized") == std::string::npos);
      for (const KernelDesc& k : m.kernels) {
        CAPTURE(k.name);
        auto it = std::find_if(res.begin(), res.end(), [&](const KernelResources& x) { return x.name == k.name; });
        REQUIRE(it != res.end());
        MESSAGE(k.name << ": " << it->registers << " registers, spills " << it->spill_stores_bytes);
        // Over head_dim 128 (column slices: a slice's accumulators as at 128, S and dP over the whole
        // width, 1 block per SM): at most 256 bytes too (176-204 B at d = 200 and 256). The wgmma
        // engine's kernels at 3 blocks per SM (168 registers): 8-332 bytes (fixed-causal's joint
        // kernel 332 since the statistics are read as float2 pairs), faster than at 2 blocks without
        // spills (docs/performance.md).
        const bool wide = (dtype_bytes(p.dtype) == 4 && p.head_dim > 64) || p.head_dim > 128;
        CHECK(it->spill_stores_bytes <= (m.engine == "wgmma" ? 352 : wide ? 256 : 64));
        if (m.engine == "wgmma") CHECK(it->registers <= 168);  // __launch_bounds__(128, 3)
      }
    }
  }
}

namespace {

// One head's gradients by brute force over the pattern's own mask (kept(), not the analysis).
// length >= 0: one sequence of a packed batch, the pattern's (i, j) with i, j < length (the arrays
// keep their full sizes).
CpuGradients brute_force_backward(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, const std::vector<double>& dout, int64_t length = -1) {
  const int64_t L = length >= 0 ? length : p.seq_len, KV = length >= 0 ? length : p.kv_len, d = p.head_dim;
  const auto dot = [&](const std::vector<double>& a, int64_t i, const std::vector<double>& b, int64_t j) {
    double s = 0;
    for (int64_t x = 0; x < d; ++x) s += a[static_cast<size_t>(i * d + x)] * b[static_cast<size_t>(j * d + x)];
    return s;
  };
  CpuGradients g{std::vector<double>(static_cast<size_t>(p.seq_len * d)), std::vector<double>(static_cast<size_t>(p.kv_len * d)),
                 std::vector<double>(static_cast<size_t>(p.kv_len * d))};
  for (int64_t i = 0; i < L; ++i) {
    std::vector<int64_t> js;
    for (int64_t j = 0; j < KV; ++j)
      if (kept(p, i, j)) js.push_back(j);
    if (js.empty()) continue;
    std::vector<double> pr, dp;
    double mx = -INFINITY, sum = 0, delta = 0;
    for (int64_t j : js) mx = std::max(mx, p.scale * dot(q, i, k, j));
    for (int64_t j : js) sum += std::exp(p.scale * dot(q, i, k, j) - mx);
    for (int64_t j : js) {
      pr.push_back(std::exp(p.scale * dot(q, i, k, j) - mx) / sum);
      dp.push_back(dot(dout, i, v, j));
      delta += pr.back() * dp.back();
    }
    for (size_t c = 0; c < js.size(); ++c) {
      const int64_t j = js[c];
      const double ds = pr[c] * (dp[c] - delta);
      for (int64_t x = 0; x < d; ++x) {
        g.dq[static_cast<size_t>(i * d + x)] += p.scale * ds * k[static_cast<size_t>(j * d + x)];
        g.dk[static_cast<size_t>(j * d + x)] += p.scale * ds * q[static_cast<size_t>(i * d + x)];
        g.dv[static_cast<size_t>(j * d + x)] += pr[c] * dout[static_cast<size_t>(i * d + x)];
      }
    }
  }
  return g;
}

// One head's standard-normal q, k, v and dout (seeded).
struct HeadInputs {
  std::vector<double> q, k, v, dout;
};
HeadInputs random_head(const Problem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  auto fill = [&](int64_t rows) {
    std::vector<double> x(static_cast<size_t>(rows * p.head_dim));
    for (double& e : x) e = nd(rng);
    return x;
  };
  HeadInputs h;
  h.q = fill(p.seq_len);
  h.k = fill(p.kv_len);
  h.v = fill(p.kv_len);
  h.dout = fill(p.seq_len);
  return h;
}

double max_rel(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, top = 0;
  for (size_t e = 0; e < a.size(); ++e) {
    diff = std::max(diff, std::fabs(a[e] - b[e]));
    top = std::max(top, std::fabs(b[e]));
  }
  return top > 0 ? diff / top : diff;
}

}  // namespace

// The backward kernels' traversal (the row plan for dQ, the column plan for dK and dV, with the
// split-KV chunks codegen makes) gives the brute-force gradients on every GPU edge-case problem the
// backward takes: a pair visited twice or missed would show.
TEST_CASE("cpu model of the backward pass matches brute-force gradients (tests/gpu)" * doctest::test_suite("cpu-model")) {
  int n = 0, split = 0, groups = 0;
  for (Problem p : backward_problems(fs::path(TRSPLAT_SOURCE_DIR) / "tests/gpu")) {
    groups += !p.group_heads.empty();  // a head group's plans over its own pattern
    CAPTURE(p.name);
    p.head_dim = std::min<int64_t>(p.head_dim, 8);  // the traversal does not depend on it
    const BackwardPlans b = backward_plans(p, analyze(p));
    for (const Plan* plan : {&b.rows, &b.cols})
      for (const PlanPass& pass : plan->passes) split += pass.slots > 0;
    const HeadInputs x = random_head(p, static_cast<uint64_t>(n) + 1);
    const std::vector<double> &q = x.q, &k = x.k, &v = x.v, &dout = x.dout;
    const CpuGradients want = brute_force_backward(p, q, k, v, dout);
    const CpuGradients got = cpu_model_backward(b.rows, b.cols, p.head_dim, p.scale, q, k, v, dout);
    CHECK(max_rel(got.dq, want.dq) < 1e-10);
    CHECK(max_rel(got.dk, want.dk) < 1e-10);
    CHECK(max_rel(got.dv, want.dv) < 1e-10);
    // The fast mode: dQ summed over the column plan's visits, as the dK/dV kernel's atomics add it.
    const CpuGradients fast = cpu_model_backward(b.rows, b.cols, p.head_dim, p.scale, q, k, v, dout, -1, true);
    CHECK(max_rel(fast.dq, want.dq) < 1e-10);
    ++n;
  }
  CHECK(n >= 30);
  CHECK(groups >= 6);  // the per-head problems' head groups
  CHECK(split >= 5);  // plans with split-KV chunks (global rows, global keys' columns, decode)
}

// A packed variable-length batch: both plans are the longest sequence's, without split tiles, and
// the kernels clip their rows and walks to each sequence's length (fused_pass): walked so, they give
// the brute-force gradients of the pattern's (i, j) with i, j < length, at lengths around tile
// edges and the problem's own.
TEST_CASE("cpu model of the backward pass: a packed batch's sequences (both plans clipped to each length)" * doctest::test_suite("cpu-model")) {
  int n = 0;
  for (Problem p : backward_problems(fs::path(TRSPLAT_SOURCE_DIR) / "tests/gpu")) {
    if (!p.varlen) continue;
    CAPTURE(p.name);
    p.head_dim = std::min<int64_t>(p.head_dim, 8);
    const BackwardPlans b = backward_plans(p, analyze(p));
    for (const Plan* plan : {&b.rows, &b.cols})
      for (const PlanPass& pass : plan->passes) CHECK(pass.slots == 0);
    const HeadInputs x = random_head(p, static_cast<uint64_t>(n) + 101);
    const std::vector<double> &q = x.q, &k = x.k, &v = x.v, &dout = x.dout;
    std::vector<int64_t> lengths = {0, 1, 2, 63, 64, 65, 129, p.seq_len - 1, p.seq_len};
    lengths.insert(lengths.end(), p.varlen->lengths.begin(), p.varlen->lengths.end());
    for (int64_t len : lengths) {
      if (len > p.seq_len) continue;
      CAPTURE(len);
      const CpuGradients want = brute_force_backward(p, q, k, v, dout, len);
      const CpuGradients got = cpu_model_backward(b.rows, b.cols, p.head_dim, p.scale, q, k, v, dout, len);
      CHECK(max_rel(got.dq, want.dq) < 1e-10);
      CHECK(max_rel(got.dk, want.dk) < 1e-10);
      CHECK(max_rel(got.dv, want.dv) < 1e-10);
      const CpuGradients fast = cpu_model_backward(b.rows, b.cols, p.head_dim, p.scale, q, k, v, dout, len, true);
      CHECK(max_rel(fast.dq, want.dq) < 1e-10);  // the fast mode's dQ over the clipped column plan
    }
    ++n;
  }
  CHECK(n >= 6);
}

// The module of a packed batch: cu_seqlens as the entries' last parameter and in the manifest, the
// grid over sequences, no unmasked pass (a sequence ends inside key tiles) and no split tiles.
// Per-head patterns over grouped K/V heads: every head group's module keeps its dK/dV accumulators in
// the region all groups share (slot q_head), its own regions after it; only the last group reduces,
// over every query head's slot; each group's workspace share covers the shared region at its grid.
TEST_CASE("backward, per-head patterns over grouped K/V heads: the groups' shared workspace" * doctest::test_suite("unit")) {
  const Problem p = parse_problem_text(
      R"({"seq_len": 500, "head_dim": 64, "dtype": "bf16", "heads": 6, "kv_heads": 2, "batch": 3, "causal": true,
          "head_patterns": [{"window": {"left": 8, "right": 0}}, {"window": {"left": 40, "right": 0}},
                            {"window": {"left": 8, "right": 0}}, {"window": {"left": 8, "right": 0}},
                            {"window": {"left": 40, "right": 0}}, {"window": {"left": 100, "right": 0}}]})",
      "p.json");
  CHECK_NOTHROW(check_backward(p));
  const std::vector<Problem> groups = head_group_problems(p);
  REQUIRE(groups.size() == 3);
  const int64_t kv_words = 500 * 2 * 64;
  for (const Problem& g : groups) {
    CAPTURE(g.name);
    const BackwardModule m = generate_backward(g, analyze(g));
    CHECK(m.shared_kv);
    CHECK(m.source.find("#define SPLAT_BWD_SHARED_KV 1") != std::string::npos);
    const std::string own = "float* own = ws + (i64)(gridDim.y / SPLAT_HEAD_GROUP) * SPLAT_HEADS * " + std::to_string(kv_words) + ";";
    CHECK(m.source.find(own) != std::string::npos);
    CHECK(m.source.find("float* kv_acc = ws;") != std::string::npos);
    CHECK(m.source.find("lse, own, dk, dv, kv_acc, split_ws, ") != std::string::npos);  // D from own; accumulators out
    // The workspace of batch * group_heads blocks holds the shared region of batch * heads query heads.
    const int64_t gh = static_cast<int64_t>(g.group_heads.size());
    CHECK(m.workspace_floats_per_bh * gh >= p.heads * kv_words);
    CHECK(m.workspace_floats_per_bh < (p.heads * kv_words + gh - 1) / gh + 500 * (64 + 4) + 1);
    const bool last = g.group_index + 1 == g.group_count;
    const bool reduces = !m.kernels.empty() && m.kernels.back().name == "splat_bwd_reduce";
    CHECK(reduces == last);
    if (last) CHECK(m.source.find("(ws, static_cast<bf16_t*>(dk), static_cast<bf16_t*>(dv), 1.250000000e-01f, nullptr, "
                                  "(i64)(gridDim.y / SPLAT_HEAD_GROUP) * SPLAT_HEADS);") != std::string::npos);
    const nlohmann::json j = backward_manifest(m, {"p.bwd.ptx"});
    CHECK(j["workspace_shared"] == true);
    CHECK(j["launch_order"].get<std::string>().find("one ws for all groups") != std::string::npos);
  }
  // Without grouped K/V heads the groups keep their own workspaces.
  Problem mha = p;
  mha.kv_heads = mha.heads;
  const Problem g0 = head_group_problems(mha)[0];
  const BackwardModule m0 = generate_backward(g0, analyze(g0));
  CHECK_FALSE(m0.shared_kv);
  CHECK(m0.source.find("SPLAT_BWD_SHARED_KV") == std::string::npos);
  CHECK_FALSE(backward_manifest(m0, {}).contains("workspace_shared"));
}

TEST_CASE("backward, fast mode: the module, its kernels and what it does not take" * doctest::test_suite("unit")) {
  const Problem p = parse_problem_text(R"({"seq_len": 300, "head_dim": 64, "heads": 4, "kv_heads": 2, "dtype": "bf16",
      "pattern": {"union": [{"window": {"left": 20, "right": 0}}, {"global": {"tokens": [0, 1]}}]}})", "p.json");
  BackwardTuning t;
  t.fast = true;
  const BackwardModule m = generate_backward(p, analyze(p), t);
  CHECK(m.mode == "fast");
  CHECK(m.tuning.a_regs == 0);  // the fast defaults at d = 64: row operands from shared memory
  std::vector<std::string> names;
  for (const KernelDesc& k : m.kernels) names.push_back(k.name);
  CHECK(names.front() == "splat_bwd_delta");
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& k) { return k.rfind("splat_bwd_dq_p", 0) == 0; }));
  const auto store = std::find(names.begin(), names.end(), "splat_bwd_dq_store");
  REQUIRE(store != names.end());
  CHECK(std::find(names.begin(), names.end(), "splat_bwd_dkv_p0") < store);  // after every dK/dV pass
  CHECK(names.back() == "splat_bwd_reduce");
  CHECK(m.source.find("BwdMmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, false, 64, true>") != std::string::npos);
  CHECK(m.source.find("(ws) + (i64)gridDim.y * 300);") != std::string::npos);  // bwd_delta zeroes the sums after D
  CHECK(m.source.find(", true, dq_acc};") != std::string::npos);              // the dK/dV kernels' BwdArgs
  for (const KernelDesc& k : m.kernels)
    if (k.name.rfind("splat_bwd_dkv_p", 0) == 0 && k.name.find("combine") == std::string::npos)
      CHECK(k.smem_dynamic == geometry::bwd_mma_smem(2, 64, true, 64));
  CHECK(m.workspace_floats_per_bh >= 300 + 300 * 64);  // D, then dQ's sums
  CHECK(backward_manifest(m, {})["mode"] == "fast");
  // fp32 storage: BwdTf32Engine's dq_step, and the shared memory for its fp32 dS^T.
  Problem f = p;
  f.dtype = DType::FP32;
  const BackwardModule fm = generate_backward(f, analyze(f), t);
  CHECK(fm.mode == "fast");
  CHECK(fm.source.find("BwdTf32Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, true, 64, true>") != std::string::npos);
  for (const KernelDesc& k : fm.kernels)
    if (k.name == "splat_bwd_dkv_p0") CHECK(k.smem_dynamic == geometry::bwd_tf32_smem(2, 64, true, 64));
  CHECK(generate_backward(p, analyze(p)).mode == "deterministic");
}

// bf16/fp16 over head_dim 128: each pass's dQ and dK/dV kernels as column slices of 128 output columns
// (BwdMmaEngine's CO), the last one narrower where the width is not a multiple of 128; one combine
// after a pass's slices; the fast mode's dQ atomics in the first dK/dV slice only.
TEST_CASE("backward over head_dim 128: column slices, their entry points and engines" * doctest::test_suite("unit")) {
  const Problem p = parse_problem_text(R"({"seq_len": 300, "head_dim": 200, "dtype": "fp16",
      "pattern": {"union": [{"window": {"left": 20, "right": 0}}, {"global": {"tokens": [0, 1]}}]}})", "p.json");
  CHECK(geometry::bwd_col_slices(200) == 2);
  CHECK(geometry::bwd_slice_width(208, 128) == 80);
  CHECK(geometry::bwd_col_slices(128) == 1);
  const BackwardModule m = generate_backward(p, analyze(p));
  std::vector<std::string> names;
  for (const KernelDesc& k : m.kernels) names.push_back(k.name);
  const auto at = [&](const std::string& n) { return std::find(names.begin(), names.end(), n) - names.begin(); };
  REQUIRE(at("splat_bwd_dq_p0s1") < static_cast<long>(names.size()));
  CHECK(at("splat_bwd_dq_p0") + 1 == at("splat_bwd_dq_p0s1"));
  CHECK(at("splat_bwd_dkv_p0") + 1 == at("splat_bwd_dkv_p0s1"));
  CHECK(std::none_of(names.begin(), names.end(), [](const std::string& n) { return n.find("s2") != std::string::npos; }));
  for (const KernelDesc& k : m.kernels)
    if (k.name.find("combine") != std::string::npos) CHECK(names[static_cast<size_t>(at(k.name) - 1)].find("s1") != std::string::npos);
  CHECK(m.kernels[static_cast<size_t>(at("splat_bwd_dq_p0s1"))].role.find("head columns 128..199") != std::string::npos);
  CHECK(m.tuning.a_regs == 0);
  CHECK(m.source.find("BwdMmaEngine<f16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, false, 2, false, 32, false, 128>") != std::string::npos);
  CHECK(m.source.find("BwdMmaEngine<f16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, false, 32, false, 128>") != std::string::npos);
  BackwardTuning fast;
  fast.fast = true;
  const BackwardModule f = generate_backward(p, analyze(p), fast);
  CHECK(f.source.find("BwdMmaEngine<f16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, false, 32, true>") != std::string::npos);
  CHECK(f.source.find("BwdMmaEngine<f16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, false, 32, true, 128>") != std::string::npos);
  BackwardTuning areg;
  areg.a_regs = 1;
  CHECK_THROWS_WITH_AS(generate_backward(p, analyze(p), areg), doctest::Contains("areg=1"), Error);
  Problem d128 = p;
  d128.head_dim = 128;
  const BackwardModule n = generate_backward(d128, analyze(d128));
  CHECK(std::none_of(n.kernels.begin(), n.kernels.end(), [](const KernelDesc& k) { return k.name.find("p0s") != std::string::npos; }));
}

TEST_CASE("backward of a packed variable-length batch: module, parameters and manifest" * doctest::test_suite("unit")) {
  const Problem p = parse_problem_text(
      R"({"name": "vb", "seq_len": 4096, "head_dim": 64, "heads": 8, "kv_heads": 2, "dtype": "bf16", "causal": true,
          "varlen": {"max_total_tokens": 65536, "lengths": [4096, 100, 0, 1]},
          "pattern": {"union": [{"window": {"left": 255, "right": 0}}, {"global": {"tokens": [0, 1, 2, 3]}}]}})",
      "vb.json");
  const BackwardModule m = generate_backward(p, analyze(p));
  CHECK(m.varlen);
  CHECK(m.grid_y == "sequences*heads");
  CHECK(m.source.find("#define SPLAT_VARLEN 1") != std::string::npos);
  CHECK(m.source.find("const int* table, const int* cu_seqlens) {") != std::string::npos);
  CHECK(m.source.find("ws, cu_seqlens);") != std::string::npos);  // bwd_delta
  CHECK(m.source.find(", cu_seqlens, -1, -1, &args);") != std::string::npos);  // fused_pass
  // On wgmma (sm_90a) dQ and dK/dV in one launch, its blocks' tiles and heads from bwd_joint_block.
  CHECK(generate_backward(p, analyze(p), BackwardTuning{}, "sm_90a").source.find(", cu_seqlens, (int)jb.tile, jb.head, &args);") !=
        std::string::npos);
  CHECK(m.source.find("splat_bwd_reduce") != std::string::npos);  // grouped heads
  CHECK(m.source.find("true, true, true") == std::string::npos);  // no NOMASK pass (FIRST, LAST, NOMASK)
  for (const KernelDesc& k : m.kernels) CHECK(k.name.find("combine") == std::string::npos);
  const nlohmann::json j = backward_manifest(m, {"vb.bwd.ptx"});
  REQUIRE(j["parameters"].size() == 12);
  CHECK(j["parameters"][11]["name"] == "cu_seqlens");
  CHECK(j["parameters"][11]["index"] == 11);
  CHECK(j["layout"].get<std::string>().find("[total_tokens, heads, head_dim]") != std::string::npos);
  // A plain batch's entries keep their eleven parameters.
  Problem plain = p;
  plain.varlen.reset();
  const BackwardModule pm = generate_backward(plain, analyze(plain));
  CHECK_FALSE(pm.varlen);
  CHECK(pm.grid_y == "batch*heads");
  CHECK(pm.source.find("cu_seqlens") == std::string::npos);
  CHECK(backward_manifest(pm, {"p.bwd.ptx"})["parameters"].size() == 11);
}

// Decode: one query row, batch*heads = 6. D takes 6 floats, so the regions after it would start 24
// bytes in and the fp32 engine's float4 stores of its accumulators would fault (misaligned address
// on the H200); D's region is rounded up to 4 floats per bh.
TEST_CASE("backward workspace: every region after D starts 16-byte aligned whatever batch*heads is" * doctest::test_suite("unit")) {
  for (const char* dtype : {"fp32", "bf16"}) {
    const Problem p = parse_problem_text(std::string(R"({"seq_len": 1, "kv_len": 5000, "q_offset": 4999, "head_dim": 64, )") +
                                             R"("heads": 2, "kv_heads": 1, "batch": 3, "causal": true, "dtype": ")" + dtype +
                                             R"(", "pattern": {"window": {"left": 2000, "right": 0}}})",
                                         "p.json");
    const BackwardModule m = generate_backward(p, analyze(p));
    CHECK(m.workspace_floats_per_bh % 4 == 0);
    CHECK(m.source.find("float* dq_acc = ws + (i64)gridDim.y * 4;") != std::string::npos);
    CHECK(m.source.find("(ws + (i64)gridDim.y * (4), ") != std::string::npos);  // the grouped heads' sum
  }
}

TEST_CASE("backward: what the kernels do not take is a located error; --tune-backward's keys" * doctest::test_suite("unit")) {
  const std::string base = R"({"seq_len": 256, "head_dim": 64, "pattern": {"window": {"left": 8, "right": 8}}, )";
  CHECK_NOTHROW(check_backward(parse_problem_text(base + R"("dtype": "bf16"})", "p.json")));
  CHECK_NOTHROW(check_backward(parse_problem_text(base + R"("dtype": "fp32", "head_dim": 36})", "p.json")));
  CHECK_THROWS_WITH_AS(check_backward(parse_problem_text(base + R"("dtype": "tf32", "head_dim": 30})", "p.json")),
                       doctest::Contains("a multiple of 4 (tf32) and at most 128, got 30"), Error);
  CHECK_NOTHROW(check_backward(parse_problem_text(base + R"("dtype": "bf16", "head_dim": 256})", "p.json")));
  CHECK_THROWS_WITH_AS(check_backward(parse_problem_text(base + R"("dtype": "bf16", "head_dim": 264})", "p.json")),
                       doctest::Contains("a multiple of 8 (bf16) and at most 256, got 264"), Error);
  CHECK_THROWS_WITH_AS(check_backward(parse_problem_text(base + R"("dtype": "fp32", "head_dim": 136})", "p.json")),
                       doctest::Contains("a multiple of 4 (fp32) and at most 128, got 136"), Error);
  CHECK_THROWS_WITH_AS(check_backward(parse_problem_text(base + R"("dtype": "fp16", "head_dim": 36})", "p.json")),
                       doctest::Contains("a multiple of 8 (fp16)"), Error);
  // Per-head patterns: a module per head group.
  const std::string heads = R"({"seq_len": 256, "head_dim": 64, "dtype": "bf16", "heads": 4, "head_patterns": [)"
                            R"({"window": {"left": 8, "right": 8}}, {"window": {"left": 32, "right": 0}}])";
  const Problem per_head = parse_problem_text(heads + "}", "p.json");
  CHECK_NOTHROW(check_backward(per_head));
  CHECK_THROWS_AS(generate_backward(per_head, Acsr{}), std::invalid_argument);
  const Problem g1 = head_group_problems(per_head)[1];
  const BackwardModule gm = generate_backward(g1, analyze(g1));
  CHECK(gm.grid_y == "batch*group_heads");
  CHECK(gm.source.find("#define SPLAT_HEAD_GROUP 2") != std::string::npos);
  CHECK(gm.source.find("#define SPLAT_HEAD_IDS 2, 3") != std::string::npos);  // terms over runs of heads / n heads
  CHECK(parse_backward_tuning("") == BackwardTuning{});
  const BackwardTuning t = parse_backward_tuning("cw=32,areg=0,minb=3,stages=3,joint=0");
  CHECK(t.joint == 0);
  CHECK(parse_backward_tuning("order=1").order == 1);
  CHECK_THROWS_WITH_AS(parse_backward_tuning("order=2"), doctest::Contains("order must be 0..1"), std::invalid_argument);
  CHECK(t.step == 32);
  CHECK(t.a_regs == 0);
  CHECK(t.min_blocks == 3);
  CHECK(t.stages == 3);
  CHECK_THROWS_WITH_AS(parse_backward_tuning("cw=48"), doctest::Contains("cw must be 32 or 64"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_backward_tuning("bc=64"), doctest::Contains("unknown key 'bc'"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(parse_backward_tuning("minb=x"), doctest::Contains("minb must be 0..8"), std::invalid_argument);
  // The module (joint=0): D, dQ passes, dK/dV passes in launch order; the tuning reaches the engine.
  const Problem p = parse_problem_text(base + R"("dtype": "bf16"})", "p.json");
  const BackwardModule m = generate_backward(p, analyze(p), t);
  REQUIRE(m.kernels.size() >= 3);
  CHECK(m.kernels.front().name == "splat_bwd_delta");
  CHECK(m.kernels[1].name == "splat_bwd_dq_p0");
  CHECK(m.kernels.back().name.rfind("splat_bwd_dkv_p0", 0) == 0);
  CHECK(m.source.find("BwdMmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 3, false, 32>") != std::string::npos);
  CHECK(m.source.find("__launch_bounds__(128, 3) splat_bwd_dq_p0") != std::string::npos);
  // fp32 storage: BwdTf32Engine, 3xTF32 for fp32 and one tf32 product for tf32; shared memory as the
  // geometry says; a tuning whose stages do not fit is a located error.
  const Problem f = parse_problem_text(base + R"("dtype": "fp32"})", "p.json");
  const BackwardModule fm = generate_backward(f, analyze(f));
  CHECK(fm.engine == "mma.sync 3xtf32");
  CHECK(fm.source.find("BwdTf32Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, true, 64>") != std::string::npos);
  CHECK(fm.source.find("#include \"splat/backward_tf32.cuh\"") != std::string::npos);
  CHECK(fm.kernels[1].smem_dynamic == geometry::bwd_tf32_smem(2, 64, false));
  const Problem t32 = parse_problem_text(base + R"("dtype": "tf32", "head_dim": 128})", "p.json");
  const BackwardModule tm = generate_backward(t32, analyze(t32));
  CHECK(tm.engine == "mma.sync tf32");
  CHECK(tm.source.find("BwdTf32Engine<SPLAT_HD, SPLAT_SEQ, SPLAT_KV, false, 2, false, 32>") != std::string::npos);
  CHECK_THROWS_WITH_AS(generate_backward(t32, analyze(t32), parse_backward_tuning("stages=3")),
                       doctest::Contains("stages=3 needs 278016 bytes of shared memory per block at head_dim 128 in tf32"), Error);
}

// The wgmma engine (BwdWgmmaEngine): chosen for sm_90a modules of bf16/fp16 at head_dim 64 in
// either mode unless the tuning says otherwise (wg=0, or a step or row-operand choice only the
// mma.sync engine has); wg=1 where it cannot run is a located error.
TEST_CASE("backward: the wgmma engine, where it runs and its tuning" * doctest::test_suite("unit")) {
  const std::string base = R"({"seq_len": 256, "head_dim": 64, "pattern": {"window": {"left": 8, "right": 8}}, )";
  const Problem p = parse_problem_text(base + R"("dtype": "bf16"})", "p.json");
  const Acsr acsr = analyze(p);
  const BackwardModule w = generate_backward(p, acsr, BackwardTuning{}, "sm_90a");
  CHECK(w.engine == "wgmma");
  CHECK(w.tuning.wgmma == 1);
  CHECK(w.tuning.step == 64);
  CHECK(w.tuning.a_regs == 0);
  CHECK(w.tuning.min_blocks == 3);
  CHECK(w.source.find("#include \"splat/backward_wgmma.cuh\"") != std::string::npos);
  // Walks of at most 4 key tiles and no split tile: three stages (the joint launch's defaults, below).
  CHECK(w.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 3>") != std::string::npos);
  CHECK(w.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, false, 3>") != std::string::npos);
  CHECK(w.source.find("__launch_bounds__(128, 3) splat_bwd_p0") != std::string::npos);
  REQUIRE(w.kernels.size() == 2);
  CHECK(w.kernels[1].smem_dynamic == geometry::bwd_wgmma_smem(3, 64, true));
  CHECK(geometry::bwd_wgmma_smem(2, 64, true) == 4 * 8192 + 2 * 8192 + 2 * 2 * 64 * 4 + 1024);
  // sm_90a modules: every entry after splat_bwd_delta a programmatic dependent launch, each body
  // waiting for the entry before it first (in the manifest too); other targets launch plainly.
  CHECK(!w.kernels[0].programmatic);
  CHECK(w.kernels[1].programmatic);
  CHECK(backward_manifest(w, {})["kernels"][1]["programmatic_launch"] == true);
  CHECK(backward_manifest(w, {})["kernels"][0]["programmatic_launch"] == false);
  CHECK(w.source.find("splat_bwd_p0(const void* q, const void* k, const void* v, const void* o, const void* dout, const float* lse, "
                      "void* dq, void* dk, void* dv, float* ws, const int* table) {\n  pdl_wait();\n  pdl_launch_dependents();\n") !=
        std::string::npos);
  // Any other target, and wg=0: the mma.sync engine.
  for (const char* arch : {"", "sm_80", "sm_90"}) CHECK(generate_backward(p, acsr, BackwardTuning{}, arch).engine == "mma.sync");
  const BackwardModule m0 = generate_backward(p, acsr, parse_backward_tuning("wg=0"), "sm_90a");
  CHECK(m0.engine == "mma.sync");
  CHECK(m0.tuning.min_blocks == 0);
  for (const KernelDesc& k : m0.kernels) CHECK(!k.programmatic);
  CHECK(m0.source.find("pdl_wait") == std::string::npos);
  CHECK(m0.source.find("BwdMmaEngine<bf16_t") != std::string::npos);
  // Keys only the mma.sync engine has pick it.
  CHECK(generate_backward(p, acsr, parse_backward_tuning("cw=32"), "sm_90a").engine == "mma.sync");
  CHECK(generate_backward(p, acsr, parse_backward_tuning("areg=1"), "sm_90a").engine == "mma.sync");
  // The fast mode: the dK/dV kernel's engine with FAST (dQ's product and atomics), its shared memory
  // one tile (dS^T) and the stages' row indices more; no dQ kernel, one launch per pass.
  BackwardTuning fast;
  fast.fast = true;
  const BackwardModule wf = generate_backward(p, acsr, fast, "sm_90a");
  CHECK(wf.engine == "wgmma");
  CHECK(wf.mode == "fast");
  CHECK(wf.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 2, true>") != std::string::npos);
  CHECK(wf.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, false") == std::string::npos);
  CHECK(wf.source.find("splat_bwd_p0") == std::string::npos);
  REQUIRE(wf.kernels.size() == 3);
  CHECK(wf.kernels[0].name == "splat_bwd_delta");
  CHECK(wf.kernels[1].name == "splat_bwd_dkv_p0");
  CHECK(wf.kernels[2].name == "splat_bwd_dq_store");
  CHECK(wf.kernels[1].smem_dynamic == geometry::bwd_wgmma_smem(2, 64, true, true));
  CHECK(wf.kernels[1].programmatic);
  CHECK(wf.kernels[2].programmatic);
  CHECK(geometry::bwd_wgmma_smem(2, 64, true, true) == geometry::bwd_wgmma_smem(2, 64, true) + 8192 + 2 * 64 * 4);
  // The engine's own tuning: stages and minb.
  const BackwardModule w3 = generate_backward(p, acsr, parse_backward_tuning("stages=3,minb=0"), "sm_90a");
  CHECK(w3.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, 3>") != std::string::npos);
  CHECK(w3.source.find("__launch_bounds__(128) splat_bwd_p0") != std::string::npos);
  // fp16 too; head_dim 128, fp32 and tf32 keep their engines.
  const Problem h = parse_problem_text(base + R"("dtype": "fp16"})", "p.json");
  CHECK(generate_backward(h, analyze(h), BackwardTuning{}, "sm_90a").engine == "wgmma");
  const Problem d128 = parse_problem_text(base + R"("dtype": "bf16", "head_dim": 128})", "p.json");
  CHECK(generate_backward(d128, analyze(d128), BackwardTuning{}, "sm_90a").engine == "mma.sync");
  const Problem f = parse_problem_text(base + R"("dtype": "fp32"})", "p.json");
  CHECK(generate_backward(f, analyze(f), BackwardTuning{}, "sm_90a").engine == "mma.sync 3xtf32");
  // wg=1 where the engine cannot run, or with keys it does not have: located errors.
  const BackwardTuning on = parse_backward_tuning("wg=1");
  CHECK(on.wgmma == 1);
  CHECK_THROWS_WITH_AS(generate_backward(p, acsr, on, "sm_80"), doctest::Contains("wg=1 (the wgmma engine) needs --arch sm_90a"), Error);
  CHECK_THROWS_WITH_AS(generate_backward(d128, analyze(d128), on, "sm_90a"), doctest::Contains("head_dim 64"), Error);
  CHECK_THROWS_WITH_AS(generate_backward(f, analyze(f), on, "sm_90a"), doctest::Contains("bf16 or fp16"), Error);
  BackwardTuning fast_on = on;  // wg=1 in the fast mode: the engine's FAST dK/dV kernel
  fast_on.fast = true;
  CHECK(generate_backward(p, acsr, fast_on, "sm_90a").engine == "wgmma");
  CHECK_THROWS_WITH_AS(generate_backward(p, acsr, parse_backward_tuning("wg=1,cw=32"), "sm_90a"), doctest::Contains("cw=64, areg=0"), Error);
  CHECK_THROWS_WITH_AS(generate_backward(p, acsr, parse_backward_tuning("wg=1,areg=1"), "sm_90a"), doctest::Contains("cw=64, areg=0"), Error);
  CHECK_THROWS_WITH_AS(parse_backward_tuning("wg=2"), doctest::Contains("wg must be 0..1"), std::invalid_argument);
}

// The dQ and dK/dV passes in one launch (splat_bwd_p0, the wgmma engine's default where both plans
// have one pass and the kernels one column slice): its grid, shared memory and block order, split
// tiles' combines after it; joint=0 and column slices keep a launch per pass.
TEST_CASE("backward: dQ and dK/dV in one launch (joint), its blocks and where it applies" * doctest::test_suite("unit")) {
  // Every (pass, tile, head) once, the dK/dV blocks first, heads outer within each pass.
  for (int64_t heads : {1, 3, 16})
    for (int64_t nkv : {1, 4, 7})
      for (int64_t nq : {1, 5, 64}) {
        CAPTURE(heads);
        CAPTURE(nkv);
        CAPTURE(nq);
        std::set<std::tuple<bool, int64_t, int64_t>> seen;
        bool dq_seen = false, ordered = true;
        for (int64_t n = 0; n < (nkv + nq) * heads; ++n) {
          const geometry::JointBlock<int64_t> b = geometry::bwd_joint_block<int64_t>(n, nkv, nq, heads);
          CHECK(b.tile >= 0);
          CHECK(b.tile < (b.dkv ? nkv : nq));
          CHECK(b.head >= 0);
          CHECK(b.head < heads);
          seen.insert({b.dkv, b.tile, b.head});
          ordered = ordered && !(dq_seen && b.dkv);
          dq_seen = dq_seen || !b.dkv;
        }
        CHECK(static_cast<int64_t>(seen.size()) == (nkv + nq) * heads);
        CHECK(ordered);
        // order=1: every (pass, tile, head) once, head by head, each head's dK/dV tiles before its dQ tiles.
        std::set<std::tuple<bool, int64_t, int64_t>> by_head;
        int64_t last_head = 0;
        bool head_ordered = true;
        for (int64_t n = 0; n < (nkv + nq) * heads; ++n) {
          const geometry::JointBlock<int64_t> b = geometry::bwd_joint_block_by_head<int64_t>(n, nkv, nq);
          CHECK(b.tile < (b.dkv ? nkv : nq));
          CHECK(b.head < heads);
          by_head.insert({b.dkv, b.tile, b.head});
          head_ordered = head_ordered && b.head >= last_head && b.dkv == (n % (nkv + nq) < nkv);
          last_head = b.head;
        }
        CHECK(by_head == seen);
        CHECK(head_ordered);
      }
  // Enough tiles that no plan splits one for parallelism (a short problem's would: a combine after).
  const Problem p = parse_problem_text(R"({"seq_len": 4000, "head_dim": 64, "heads": 16, "dtype": "bf16", )"
                                       R"("pattern": {"window": {"left": 100, "right": 100}}})", "p.json");
  const Acsr acsr = analyze(p);
  // The default on the wgmma engine (sm_90a); joint=1 on the others.
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CAPTURE(arch);
    const bool wg = std::string(arch) == "sm_90a";
    const BackwardModule m = generate_backward(p, acsr, wg ? BackwardTuning{} : parse_backward_tuning("joint=1"), arch);
    CHECK(m.engine == (wg ? "wgmma" : "mma.sync"));
    REQUIRE(m.kernels.size() == 2);
    CHECK(m.kernels[0].name == "splat_bwd_delta");
    CHECK(m.kernels[1].name == "splat_bwd_p0");
    const int64_t nq = static_cast<int64_t>(m.plans.rows.passes[0].tiles.size());
    const int64_t nkv = static_cast<int64_t>(m.plans.cols.passes[0].tiles.size());
    CHECK(nq == 63);
    CHECK(m.kernels[1].grid_x == nq + nkv);
    CHECK(m.tuning.joint == 1);
    // 126 tiles a head: head by head on wgmma (the default there), every head's dK/dV tiles first elsewhere.
    CHECK(m.tuning.order == (wg ? 1 : 0));
    CHECK(m.source.find(std::string(wg ? "bwd_joint_block<true>(" : "bwd_joint_block(") + std::to_string(nkv) + ", " +
                        std::to_string(nq) + ")") != std::string::npos);
    // order=1 against order=0: the same launch with its blocks head by head; nothing else in the module changes.
    const BackwardModule h = generate_backward(p, acsr, parse_backward_tuning(wg ? "order=1" : "joint=1,order=1"), arch);
    const BackwardModule o = generate_backward(p, acsr, parse_backward_tuning(wg ? "order=0" : "joint=1,order=0"), arch);
    REQUIRE(h.kernels.size() == 2);
    REQUIRE(o.kernels.size() == 2);
    CHECK(o.source.find("bwd_joint_block(" + std::to_string(nkv) + ", " + std::to_string(nq) + ")") != std::string::npos);
    CHECK(h.kernels[1].grid_x == o.kernels[1].grid_x);
    CHECK(h.kernels[1].smem_dynamic == o.kernels[1].smem_dynamic);
    CHECK(h.source.find("bwd_joint_block<true>(" + std::to_string(nkv) + ", " + std::to_string(nq) + ")") != std::string::npos);
    CHECK(h.source.find("bwd_joint_block(") == std::string::npos);
    // joint=0: the two launches, dQ's first, each with its own grid and shared memory.
    const BackwardModule s = generate_backward(p, acsr, parse_backward_tuning("joint=0"), arch);
    REQUIRE(s.kernels.size() == 3);
    CHECK(s.kernels[1].name == "splat_bwd_dq_p0");
    CHECK(s.kernels[1].grid_x == nq);
    CHECK(s.kernels[2].name == "splat_bwd_dkv_p0");
    CHECK(s.kernels[2].grid_x == nkv);
    CHECK(m.kernels[1].smem_dynamic == std::max(s.kernels[1].smem_dynamic, s.kernels[2].smem_dynamic));
    CHECK(s.source.find("bwd_joint_block") == std::string::npos);
    if (!wg) CHECK(generate_backward(p, acsr, BackwardTuning{}, arch).kernels.size() == 3);  // mma.sync: a launch each
  }
  Problem f = p;
  f.dtype = DType::FP32;
  CHECK(generate_backward(f, analyze(f), BackwardTuning{}, "sm_90a").tuning.joint == 0);
  // Longformer's global rows and keys split tiles into chunks: each pass's combine after the joint
  // launch, the dK/dV pass's partials after the dQ pass's (launched apart, the passes share one region).
  const Problem g = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / "patterns/longformer-4k-bf16.json").string());
  const Acsr ga = analyze(g);
  const BackwardModule gm = generate_backward(g, ga, BackwardTuning{}, "sm_90a");
  const BackwardModule g0 = generate_backward(g, ga, parse_backward_tuning("joint=0"), "sm_90a");
  REQUIRE_FALSE(gm.plans.rows.passes[0].splits.empty());
  REQUIRE_FALSE(gm.plans.cols.passes[0].splits.empty());
  std::vector<std::string> names, names0;
  for (const KernelDesc& k : gm.kernels) names.push_back(k.name);
  for (const KernelDesc& k : g0.kernels) names0.push_back(k.name);
  CHECK(names == std::vector<std::string>{"splat_bwd_delta", "splat_bwd_p0", "splat_bwd_dq_p0_combine", "splat_bwd_dkv_p0_combine"});
  CHECK(names0 == std::vector<std::string>{"splat_bwd_delta", "splat_bwd_dq_p0", "splat_bwd_dq_p0_combine", "splat_bwd_dkv_p0",
                                           "splat_bwd_dkv_p0_combine"});
  const int64_t split_q = gm.plans.rows.passes[0].slots * 64 * 64, split_kv = gm.plans.cols.passes[0].slots * 128 * 64;
  CHECK(gm.workspace_floats_per_bh - g0.workspace_floats_per_bh == std::min(split_q, split_kv));
  CHECK(gm.source.find("split_ws += (i64)gridDim.y * " + std::to_string(split_q) + ";") != std::string::npos);
  CHECK(g0.source.find("split_ws +=") == std::string::npos);
  // Column slices (head_dim over 128): a launch per pass and slice.
  Problem wide = p;
  wide.head_dim = 256;
  for (const KernelDesc& k : generate_backward(wide, analyze(wide)).kernels) CHECK(k.name != "splat_bwd_p0");
  CHECK_THROWS_WITH_AS(parse_backward_tuning("joint=2"), doctest::Contains("joint must be 0..1"), std::invalid_argument);
}

// The joint launch's measured defaults follow the plans: where no tile is split, blocks head by head
// where a head has at most 256 tiles of the two plans and three stages where every tile walks at most
// 4 key tiles; a key given in the tuning wins; the other engines and the fast mode keep order 0 and
// two stages.
TEST_CASE("backward: the joint launch's block order and stages from the plans" * doctest::test_suite("unit")) {
  struct Case {
    const char* pattern;
    int64_t seq_len;
    int order, stages;
  };
  const Case cases[] = {
      {R"({"window": {"left": 256, "right": 256}})", 4096, 1, 2},    // 128 tiles a head, walks of 9
      {R"({"window": {"left": 256, "right": 256}})", 8192, 1, 2},    // 256
      {R"({"window": {"left": 256, "right": 256}})", 16384, 0, 2},   // 512
      {R"({"blocked": {"block": 256}})", 4096, 1, 3},                 // walks of 4
      {R"({"blocked": {"block": 256}})", 16384, 0, 3},
      {R"({"blocked": {"block": 512}})", 4096, 1, 2},                 // walks of 8
      {R"({"block_window": {"block": 64, "left": 1, "right": 1}})", 16384, 0, 3},  // walks of 3
  };
  for (const Case& c : cases) {
    CAPTURE(c.pattern);
    CAPTURE(c.seq_len);
    const Problem p = parse_problem_text(R"({"seq_len": )" + std::to_string(c.seq_len) +
                                             R"(, "head_dim": 64, "heads": 16, "dtype": "bf16", "pattern": )" + c.pattern + "}",
                                         "p.json");
    const Acsr acsr = analyze(p);
    const BackwardModule m = generate_backward(p, acsr, BackwardTuning{}, "sm_90a");
    REQUIRE(m.kernels.size() == 2);
    CHECK(m.kernels[1].name == "splat_bwd_p0");
    const int64_t tiles = m.kernels[1].grid_x;
    CHECK((tiles <= 256) == (c.order == 1));
    int64_t longest = 0;
    for (const Plan* plan : {&m.plans.rows, &m.plans.cols})
      for (const PlanTile& t : plan->passes[0].tiles) longest = std::max(longest, t.key_tiles);
    CHECK((longest <= 4) == (c.stages == 3));
    CHECK(m.tuning.order == c.order);
    CHECK(m.tuning.stages == c.stages);
    CHECK(m.source.find(c.order == 1 ? "bwd_joint_block<true>(" : "bwd_joint_block(") != std::string::npos);
    CHECK(m.source.find("BwdWgmmaEngine<bf16_t, SPLAT_HD, SPLAT_SEQ, SPLAT_KV, true, " + std::to_string(c.stages) + ">") !=
          std::string::npos);
    CHECK(m.kernels[1].smem_dynamic == geometry::bwd_wgmma_smem(c.stages, 64, true));
    // The resolved tuning as --tune-backward reads it back, in the manifest too.
    CHECK(format_backward_tuning(m.tuning) == "stages=" + std::to_string(c.stages) + ",cw=64,areg=0,minb=3,wg=1,joint=1,order=" +
                                                  std::to_string(c.order));
    CHECK(parse_backward_tuning(format_backward_tuning(m.tuning)) == m.tuning);
    CHECK(backward_manifest(m, {})["tuning"] == format_backward_tuning(m.tuning));
    // --explain: each choice and why.
    const std::string why = explain_backward(m);
    CHECK(why.find(c.order == 1 ? "blocks head by head (order 1): " + std::to_string(tiles) + " tiles a head"
                                : "every head's dK/dV blocks first (order 0): " + std::to_string(tiles) + " tiles a head") !=
          std::string::npos);
    CHECK(why.find(c.stages == 3 ? "3 stages: every tile walks at most 4 key tiles" : "2 stages: a tile walks more than 4") !=
          std::string::npos);
    CHECK(why.find("splat_bwd_p0: grid " + std::to_string(tiles) + " x batch*heads, block 128, " +
                   std::to_string(m.kernels[1].smem_dynamic) + " B shared memory, programmatic launch") != std::string::npos);
    // The tuning's keys win over the defaults.
    const BackwardModule t = generate_backward(p, acsr, parse_backward_tuning(c.order == 1 ? "order=0,stages=2" : "order=1,stages=3"), "sm_90a");
    CHECK(t.tuning.order == 1 - c.order);
    CHECK(t.tuning.stages == (c.order == 1 ? 2 : 3));
    CHECK(explain_backward(t).find(std::to_string(t.tuning.stages) + " stages (tuning)") != std::string::npos);
    CHECK(explain_backward(t).find("(order " + std::to_string(t.tuning.order) + ") (tuning)") != std::string::npos);
    // The mma.sync engine (two launches) and the fast mode (no joint launch): order 0, two stages.
    for (const BackwardModule& o : {generate_backward(p, acsr, BackwardTuning{}, "sm_80"),
                                    generate_backward(p, acsr, parse_backward_tuning("joint=1"), "sm_80")}) {
      CHECK(o.tuning.order == 0);
      CHECK(o.tuning.stages == 2);
      CHECK(parse_backward_tuning(format_backward_tuning(o.tuning)) == o.tuning);
    }
    CHECK(format_backward_tuning(BackwardTuning{}).empty());
    CHECK(format_backward_tuning(parse_backward_tuning("order=1,minb=0")) == "minb=0,order=1");
    BackwardTuning fast;
    fast.fast = true;
    const BackwardModule f = generate_backward(p, acsr, fast, "sm_90a");
    CHECK(f.tuning.order == 0);
    CHECK(f.tuning.stages == 2);
  }
  // A split tile (Longformer's global rows): every head's dK/dV tiles first and two stages, though a
  // head has few tiles and most tiles walk few key tiles.
  const Problem g = parse_problem_text(R"({"seq_len": 4096, "head_dim": 64, "heads": 16, "dtype": "bf16", "pattern": )"
                                       R"({"union": [{"window": {"left": 64, "right": 64}}, {"global": {"tokens": [0, 1, 2, 3]}}]}})",
                                       "p.json");
  const BackwardModule gm = generate_backward(g, analyze(g), BackwardTuning{}, "sm_90a");
  const bool split = !gm.plans.rows.passes[0].splits.empty() || !gm.plans.cols.passes[0].splits.empty();
  CHECK(split);
  CHECK(gm.tuning.order == 0);
  CHECK(gm.tuning.stages == 2);
  CHECK(explain_backward(gm).find("every head's dK/dV blocks first (order 0): a split tile") != std::string::npos);
}
