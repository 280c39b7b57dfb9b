// Code generation: every emitted module compiles with NVRTC (no GPU needed), manifests are
// complete, and the plan covers every kept (row, key) exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/cpu_model.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/device/geometry.cuh"
#include "nvrtc_cache.h"
#include "libsplat/pattern/pattern.h"

TEST_SUITE_BEGIN("unit");

namespace fs = std::filesystem;
using namespace splat;

namespace {

Problem problem(const std::string& pattern, int64_t L, const std::string& dtype = "bf16", int64_t d = 64) {
  std::string doc = R"({"seq_len": )" + std::to_string(L) + R"(, "head_dim": )" + std::to_string(d) +
                    R"(, "heads": 16, "dtype": ")" + dtype + R"(", "pattern": )" + pattern + "}";
  return parse_problem_text(doc, "test");
}

// The plan of an ACSR, its structure analysed here.
Plan plan_of(const Acsr& a, const TileShape& shape = {}) { return make_plan(a, analyze_structure(a, shape.br), shape); }

// Every kept key of every row is visited exactly once by the plan.
void check_coverage(const Problem& p, const Acsr& a, const TileShape& shape = {}) {
  Plan plan = plan_of(a, shape);
  auto visits = cpu_model_visits(plan);
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<int64_t> v = visits[static_cast<size_t>(i)];
    std::sort(v.begin(), v.end());
    std::vector<int64_t> want;
    for (int64_t j = 0; j < p.kv_len; ++j)
      if (kept(p, i, j)) want.push_back(j);
    REQUIRE_MESSAGE(v == want, "row " << i);
  }
}

// The fused kernels only, for an architecture, tuning ("key=value,...") and test hooks.
GeneratedModule fused_module(const Problem& p, const std::string& arch, const std::string& tune,
                             const CodegenTestHooks& hooks = {}) {
  CodegenOptions co;
  co.arch = arch;
  co.pipeline = false;
  co.tuning = parse_tuning(tune);
  co.test = hooks;
  return generate(p, analyze(p), co);
}

// The kernel families of a module's fused entry points, in launch order.
std::vector<KernelFamily> families(const GeneratedModule& m) {
  std::vector<KernelFamily> f;
  for (const KernelSpec& k : m.selection.fused) f.push_back(k.family());
  return f;
}

// The engine configuration of a module's first fused entry point.
const EngineConfig& engine0(const GeneratedModule& m) {
  REQUIRE(!m.selection.fused.empty());
  return m.selection.fused[0].engine;
}

// The module compiles to a non-trivial CUBIN for arch (ptxas checks registers, shared memory and
// the wgmma / TMA operands).
void check_cubin(const GeneratedModule& m, const std::string& arch) {
  CompileResult c = test_compile(m.source, m.name + ".cu", arch, CompileTarget::Cubin);
  CHECK(c.image.size() > 1000);
}

constexpr CodegenTestHooks kFailSumChecks{true};

}  // namespace

TEST_CASE("plan covers each kept key once (window, dilated, strided, blocked, longformer, bigbird)" * doctest::test_suite("cpu-model")) {
  for (const char* pat : {
           R"({"window": {"left": 37, "right": 20}})",
           R"({"dilated": {"left": 20, "right": 20, "dilation": 3}})",
           R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})",
           R"({"blocked": {"block": 48}})",
           R"({"union": [{"window": {"left": 30, "right": 30}}, {"global": {"tokens": [0, 1, 2, 77]}}]})",
           R"({"union": [{"block_window": {"block": 16, "left": 1, "right": 1}}, {"global": {"tokens": [0, 5]}},
                         {"random_blocks": {"block": 16, "per_row": 2, "seed": 3}}]})",
           R"({"fixed": {"block": 32, "summary": 4}})",
           R"({"union": [{"fixed": {"block": 40, "summary": 3}}, {"dilated": {"left": 9, "right": 9, "dilation": 2}}]})",
       }) {
    CAPTURE(pat);
    Problem p = problem(pat, 300);
    Acsr a = analyze(p);
    check_coverage(p, a);
  }
}

TEST_CASE("generated module compiles with NVRTC for sm_80 and sm_90" * doctest::test_suite("nvrtc")) {
  Problem p = problem(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64}}]})", 1024);
  Acsr a = analyze(p);
  GeneratedModule m = generate(p, a);
  CHECK(m.fused.size() >= 1);
  CHECK(m.pipeline.size() == 3);
  for (const char* arch : {"sm_80", "sm_90"}) {
    CompileResult r = test_compile(m.source, "test.cu", arch, CompileTarget::Ptx);
    CHECK(r.image.find(".entry splat_fused_p0") != std::string::npos);
    CHECK(r.image.find(".entry splat_spmm") != std::string::npos);
  }
}

namespace {

std::vector<fs::path> pattern_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(TRSPLAT_SOURCE_DIR) / "patterns"))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

// NVRTC costs about a second per module: every pattern is compiled to PTX for sm_90 (front end
// and code generation), and the 4k patterns also to CUBIN for sm_80 (ptxas: registers, shared
// memory, instruction availability on the oldest supported architecture).
TEST_CASE("every pattern in patterns/ compiles: PTX for sm_90, CUBIN for sm_80 (4k patterns)" * doctest::test_suite("nvrtc")) {
  auto files = pattern_files();
  REQUIRE(!files.empty());
  for (const fs::path& f : files)
    for (const Problem& p : head_group_problems(load_problem(f.string()))) {  // per-head patterns: a module per group
      CAPTURE(p.name);
      GeneratedModule m = generate(p, analyze(p));
      CompileResult ptx = test_compile(m.source, p.name + ".cu", "sm_90", CompileTarget::Ptx);
      for (const KernelDesc& k : m.fused) CHECK(ptx.image.find(".entry " + k.name) != std::string::npos);
      for (const KernelDesc& k : m.pipeline) CHECK(ptx.image.find(".entry " + k.name) != std::string::npos);
      if (f.filename().string().find("-4k-") != std::string::npos) {
        CompileResult cubin = test_compile(m.source, p.name + ".cu", "sm_80", CompileTarget::Cubin);
        CHECK(cubin.image.size() > 1000);
      }
    }
}

TEST_CASE("manifests are complete") {
  Problem p = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / "patterns" / "longformer-4k-bf16.json").string());
  GeneratedModule m = generate(p, analyze(p));
  nlohmann::json j = manifest(p, m, "ptx", "sm_90", {"longformer-4k-bf16.ptx", "manifest.json"});
  for (const char* key : {"name", "pattern_hash", "target", "arch", "files", "problem", "parameters", "kernels",
                          "launch_order", "workspace_floats_per_bh", "scores_floats_per_bh", "table_words", "tensor_maps", "tile"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["parameters"].size() == kernel_params().size());
  CHECK(j["tensor_maps"].empty());  // sm_90: no TMA
  {
    // sm_90a (wgmma, TMA): the maps the tmaps parameter points to, in order.
    CodegenOptions co;
    co.arch = "sm_90a";
    nlohmann::json h = manifest(p, generate(p, analyze(p), co), "ptx", "sm_90a", {"x.ptx"});
    REQUIRE(h["tensor_maps"].size() == 4);
    CHECK(h["tensor_maps"][0]["tensor"] == "k");
    CHECK(h["tensor_maps"][1]["tensor"] == "v");
    CHECK(h["tensor_maps"][0]["dims"] == nlohmann::json::array({64, 16 * 4096}));
    CHECK(h["tensor_maps"][2]["dims"] == nlohmann::json::array({64, 2, 8 * 4096}));
    CHECK(h["tensor_maps"][3]["box"] == nlohmann::json::array({64, 1, 64}));
    CHECK(h["tensor_maps"][0]["swizzle"] == "128B");
  }
  CHECK(j["pattern_hash"].get<std::string>().rfind("fnv1a64:", 0) == 0);
  for (const char* kind : {"fused", "pipeline"}) {
    REQUIRE(!j["kernels"][kind].empty());
    for (const auto& k : j["kernels"][kind]) {
      CHECK(k.contains("name"));
      CHECK(k["grid"].size() == 3);
      CHECK(k["block"][0].get<int>() > 0);
      CHECK(k.contains("shared_memory_dynamic_bytes"));
      CHECK(k.contains("programmatic_launch"));
    }
  }
  // Longformer's global rows are split (split-KV): a combine entry follows the pass.
  CHECK(j["kernels"]["fused"].size() == 2);
  CHECK(j["workspace_floats_per_bh"].get<int64_t>() > 0);
  // The hash follows the pattern: another window gives another hash.
  Problem q = p;
  q.pattern.children[0].left = 255;
  CHECK(generate(q, analyze(q)).pattern_hash != m.pattern_hash);
}

TEST_CASE("plan uses phase regrouping for strided and dilated patterns") {
  Problem d = problem(R"({"dilated": {"left": 64, "right": 64, "dilation": 2}})", 1024);
  Plan pd = plan_of(analyze(d));
  REQUIRE(pd.passes.size() == 1);
  CHECK(pd.passes[0].period == 2);
  CHECK(pd.tile_fill() > 0.6);
  Problem s = problem(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64}}]})", 4096);
  Plan ps = plan_of(analyze(s));
  REQUIRE(ps.passes.size() == 2);
  CHECK(ps.passes[1].period == 64);
  for (const PlanTile& t : ps.passes[1].tiles)
    for (const PlanGroup& g : t.groups)
      for (const KeyWalk& w : g.walks) CHECK(w.step == 64);  // gathered lattice: only kept keys
}

TEST_CASE("NVRTC errors carry the log; bad architectures are refused" * doctest::test_suite("nvrtc")) {
  CHECK_THROWS_WITH_AS(nvrtc_compile("__global__ void f() { undefined_symbol(); }", "bad.cu", "sm_90", CompileTarget::Ptx),
                       doctest::Contains("bad.cu"), CompileError);
  CHECK_THROWS_AS(parse_arch("sm_70"), std::invalid_argument);
  CHECK_THROWS_AS(parse_arch("compute_90"), std::invalid_argument);
  CHECK(parse_arch("sm_90a") == 90);
  // An architecture this NVRTC does not know is refused here, with the supported list, not inside
  // a compile (exit 3 before).
  CHECK_THROWS_WITH_AS(parse_arch("sm_99"), doctest::Contains("supported: sm_80"), std::invalid_argument);
  const auto archs = supported_archs();
  CHECK(std::find(archs.begin(), archs.end(), "sm_90a") != archs.end());
  CHECK(std::find(archs.begin(), archs.end(), "sm_75") == archs.end());
}

TEST_CASE("kernel tuning: parsing, measured defaults, launch configuration") {
  KernelTuning t = parse_tuning("mw=32,stages=3,minb=0,bc=128,qs=1");
  CHECK(t.warp_rows == 32);
  CHECK(t.stages == 3);
  CHECK(t.min_blocks == 0);
  CHECK(t.key_tile == 128);
  CHECK(t.q_shared == 1);
  CHECK(parse_tuning("") == KernelTuning{});
  CHECK(format_tuning(t) == "mw=32,stages=3,bc=128,minb=0,qs=1");
  CHECK(parse_tuning(format_tuning(t)) == t);
  CHECK(format_tuning(KernelTuning{}).empty());
  CHECK_THROWS_AS(parse_tuning("bc=96"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tuning("qs=2"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tuning("mw=24"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tuning("stages=x"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tuning("warps=2"), std::invalid_argument);
  CHECK_THROWS_AS(parse_tuning("mw"), std::invalid_argument);
  // The sides of experiments that lost are not keys.
  for (const char* gone : {"lazy=1", "alias=0", "batch=0", "x3=0", "wg=0", "ovl=1", "chk=2", "tma=0", "band=0", "gkeys=0",
                           "wgrows=128", "order=1", "pdl=0", "nomask=0"})
    CHECK_THROWS_WITH(parse_tuning(gone), doctest::Contains("unknown key"));

  const std::string window = R"({"window": {"left": 256, "right": 256}})";
  const std::string strided = R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64}}]})";
  const auto gen = [](const Problem& p, const std::string& tu = "") { return fused_module(p, "", tu); };
  // bf16 single-pass window (mma.sync): 2 warps x 32 rows, 2 stages of K and V (64 keys x (64 + 8)
  // x 2 bytes), 4 blocks per SM.
  GeneratedModule w = gen(problem(window, 2048));
  REQUIRE(w.fused.size() == 1);
  CHECK(families(w) == std::vector{KernelFamily::Table});
  CHECK(engine0(w).kind == EngineKind::Mma);
  CHECK(engine0(w).warp_rows == 32);
  CHECK(engine0(w).stages == 2);
  CHECK(engine0(w).key_tile == 64);
  CHECK(engine0(w).min_blocks == 4);
  CHECK(w.fused[0].block == 64);
  CHECK(w.fused[0].smem_dynamic == 2 * 2 * 64 * 72 * 2);
  CHECK(w.source.find("__launch_bounds__(64, 4) splat_fused_p0") != std::string::npos);  // the spec reaches the source
  // Two passes (strided): 4 warps x 16 rows.
  GeneratedModule s = gen(problem(strided, 2048));
  REQUIRE(s.fused.size() == 2);
  for (const KernelDesc& k : s.fused) CHECK(k.block == 128);
  for (const KernelSpec& k : s.selection.fused) CHECK(k.engine.warp_rows == 16);
  // Overrides.
  GeneratedModule o = gen(problem(window, 2048), "mw=16,stages=3,minb=2");
  CHECK(o.fused[0].block == 128);
  CHECK(o.fused[0].smem_dynamic == 3 * 2 * 64 * 72 * 2);
  CHECK(engine0(o).min_blocks == 2);
  // 128-key softmax steps: twice the stage memory, hence at most 3 blocks per SM.
  GeneratedModule b = gen(problem(window, 2048), "bc=128");
  CHECK(b.fused[0].block == 64);
  CHECK(b.fused[0].smem_dynamic == 2 * 2 * 128 * 72 * 2);
  CHECK(engine0(b).key_tile == 128);
  CHECK(engine0(b).min_blocks == 3);
  // tf32 on tensor cores (m16n8k8): 4 warps x 16 rows, fp32 K (HD + 16) and V (HD + 4) rows in two
  // stages; 2 blocks per SM at d = 64 (measured faster than the 3 that shared memory allows), 1 at d = 128.
  GeneratedModule tf = gen(problem(window, 2048, "tf32"));
  CHECK(tf.tensor_cores);
  CHECK(tf.selection.engine.kind == EngineKind::MmaTf32);
  CHECK(tf.fused[0].block == 128);
  CHECK(tf.fused[0].smem_dynamic == 2 * 64 * (80 + 68) * 4);
  CHECK(engine0(tf).min_blocks == 2);
  GeneratedModule t128 = gen(problem(window, 2048, "tf32", 128), "mw=32");
  CHECK(t128.fused[0].block == 128);  // tf32 keeps 16 rows per warp
  CHECK(engine0(t128).min_blocks == 1);
  // A head_dim below the engine's width runs padded: tf32 48 as 64 (K rows 64 + 16, V rows 64 + 4
  // floats), bf16 72 as 80 (rows 80 + 8), fp32 20 as 32; the reason says so.
  GeneratedModule t48 = gen(problem(window, 2048, "tf32", 48));
  CHECK(t48.selection.engine.kind == EngineKind::MmaTf32);
  CHECK(t48.fused[0].smem_dynamic == 2 * 64 * (80 + 68) * 4);
  CHECK(t48.selection.engine.reason.find("head_dim 48 padded to 64") != std::string::npos);
  GeneratedModule b72 = gen(problem(window, 2048, "bf16", 72));
  CHECK(b72.selection.engine.kind == EngineKind::Mma);  // wgmma takes 64 and 128 only
  CHECK(b72.fused[0].smem_dynamic == 2 * 2 * 64 * 88 * 2);
  CHECK(engine0(b72).min_blocks == 3);  // as at 80: more than 64 columns of O and Q fragments
  CHECK(b72.selection.engine.reason.find("padded to 80") != std::string::npos);
  GeneratedModule f20 = gen(problem(window, 2048, "fp32", 20));
  CHECK(f20.selection.engine.kind == EngineKind::MmaTf32x3);
  CHECK(f20.fused[0].smem_dynamic == 2 * 64 * (48 + 36) * 4);
  // bf16/fp16 up to 256 on mma.sync: one block per SM (2 stages of 64 keys x 264 columns of K and V);
  // 128-key steps would need more shared memory than a block has: the tuning is refused.
  GeneratedModule b256 = gen(problem(window, 2048, "bf16", 256));
  CHECK(b256.selection.engine.kind == EngineKind::Mma);
  CHECK(b256.fused[0].smem_dynamic == 2 * 2 * 64 * 264 * 2);
  CHECK(engine0(b256).min_blocks == 1);
  CHECK_THROWS_WITH(gen(problem(window, 2048, "bf16", 256), "bc=128"), doctest::Contains("--tune"));
  // No fused engine (rows not of whole 16-byte chunks, or wider than 256 / 128): the fused kernel alone is
  // refused with the JSON path and the way out; with both kinds asked for, the pipeline alone is
  // generated and the selection says why.
  for (const auto& [dtype, d] : {std::pair<const char*, int64_t>{"bf16", 36}, {"fp16", 264}, {"fp32", 136}, {"tf32", 6}}) {
    CAPTURE(dtype);
    CAPTURE(d);
    const Problem pd = problem(window, 2048, dtype, d);
    std::string refused;
    try {
      gen(pd);
    } catch (const Error& e) {
      refused = e.what();
    }
    CHECK(refused.find("no engine for head_dim " + std::to_string(d)) != std::string::npos);
    CHECK(refused.find("--kernel pipeline runs any head_dim") != std::string::npos);
    CodegenOptions both;
    GeneratedModule pm = generate(pd, analyze(pd), both);
    CHECK(pm.fused.empty());
    CHECK(pm.pipeline.size() == 3);
    CHECK(pm.engine == "cuda cores");
    CHECK(explain(pm.selection).find("no tensor-core engine for head_dim " + std::to_string(d)) != std::string::npos);
  }
  // The pipeline keeps a query row in shared memory: a limit, named.
  const Problem huge = problem(window, 2048, "bf16", kPipelineMaxHeadDim + 8);
  CHECK_THROWS_WITH(generate(huge, analyze(huge)), doctest::Contains("head_dim at most 4096"));
  // The selection explains itself (splatc emit --explain).
  const std::string why = explain(w.selection);
  CHECK(why.find("engine: mma.sync") != std::string::npos);
  CHECK(why.find("splat_fused_p0: table pass") != std::string::npos);
  CHECK(why.find("32 rows per warp") != std::string::npos);
}

// Padded widths (head_dim below the engine's k-step multiple) compile for every engine, and the
// pipeline at head_dims of no vector width (ptxas: registers and shared memory at 256).
TEST_CASE("padded engine widths and any-head_dim pipelines compile to CUBIN for sm_80" * doctest::test_suite("nvrtc")) {
  const std::string pat = R"({"union": [{"window": {"left": 40, "right": 40}}, {"strided": {"stride": 64}}]})";
  for (const auto& [dtype, d] : {std::pair<const char*, int64_t>{"bf16", 72}, {"fp16", 8}, {"bf16", 120}, {"fp32", 20},
                                 {"fp32", 100}, {"tf32", 68}, {"bf16", 256}, {"fp16", 200}}) {
    CAPTURE(dtype);
    CAPTURE(d);
    check_cubin(fused_module(problem(pat, 512, dtype, d), "", ""), "sm_80");
  }
  for (const auto& [dtype, d] : {std::pair<const char*, int64_t>{"bf16", 13}, {"fp32", 256}, {"fp16", 1}}) {
    CAPTURE(dtype);
    CAPTURE(d);
    CodegenOptions co;
    co.fused = false;
    const Problem p = problem(pat, 512, dtype, d);
    check_cubin(generate(p, analyze(p), co), "sm_80");
  }
}

// Every engine configuration the tuning can select builds (ptxas, the oldest architecture).
TEST_CASE("every kernel tuning variant compiles to CUBIN for sm_80" * doctest::test_suite("nvrtc")) {
  const std::string pat = R"({"union": [{"window": {"left": 40, "right": 40}}, {"strided": {"stride": 64}}]})";
  struct V {
    const char* dtype;
    int64_t d;
    const char* tuning;
  };
  for (const V& v : {V{"bf16", 64, "mw=32,stages=3"}, V{"bf16", 128, "mw=16,stages=3"}, V{"fp16", 32, "mw=32"},
                     V{"fp32", 64, "minb=0"}, V{"fp32", 96, "stages=3"}, V{"tf32", 64, ""}, V{"tf32", 128, "stages=3"},
                     V{"tf32", 32, "minb=2"}}) {
    CAPTURE(v.dtype);
    CAPTURE(v.d);
    CAPTURE(v.tuning);
    check_cubin(fused_module(problem(pat, 512, v.dtype, v.d), "", v.tuning), "sm_80");
  }
}

// The bf16/fp16 128-key softmax steps build for both architectures the tuning targets, single-pass
// (32 rows per warp) and multi-pass with split-KV (16 rows per warp).
TEST_CASE("128-key softmax steps compile to CUBIN for sm_80 and sm_90" * doctest::test_suite("nvrtc")) {
  const std::string window = R"({"window": {"left": 200, "right": 200}})";
  const std::string longformer =
      R"({"union": [{"window": {"left": 100, "right": 100}}, {"global": {"tokens": [0, 1, 2]}}]})";
  struct V {
    const std::string* pat;
    const char* dtype;
    int64_t d;
    const char* tuning;
  };
  for (const V& v : {V{&window, "bf16", 64, "bc=128"}, V{&longformer, "bf16", 64, "bc=128"},
                     V{&window, "fp16", 128, "mw=16,bc=128"}}) {
    CAPTURE(*v.pat);
    CAPTURE(v.dtype);
    CAPTURE(v.tuning);
    GeneratedModule m = fused_module(problem(*v.pat, 1024, v.dtype, v.d), "", v.tuning);
    CHECK(engine0(m).key_tile == 128);
    for (const char* arch : {"sm_80", "sm_90"}) {
      CAPTURE(arch);
      check_cubin(m, arch);
    }
  }
}

// Hopper wgmma engine: chosen only when generating for sm_90a (bf16/fp16, head_dim 64 or 128); its launch
// configuration follows the plan and the tuning; every wgmma variant builds for sm_90a (ptxas checks the
// wgmma operands, descriptors and fences).
TEST_CASE("wgmma engine: selection by architecture, launch configuration, tuning" * doctest::test_suite("nvrtc")) {
  const std::string window = R"({"window": {"left": 256, "right": 256}})";
  const std::string longformer =
      R"({"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": [0, 1, 2, 3]}}]})";
  // Global tokens that are not the leading ones: no band structure, the table kernel.
  const std::string scattered =
      R"({"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": [0, 1, 2, 999]}}]})";
  const auto gen = [](const Problem& p, const std::string& arch, const std::string& tuning = "",
                      const CodegenTestHooks& hooks = {}) { return fused_module(p, arch, tuning, hooks); };
  // A window over more keys than rows is not a band: the table kernel. Defaults: two stages, checked
  // row sums, Q in registers for a single-run plan, K/V by TMA (unit-step walks), 4 blocks per SM.
  Problem wt = problem(window, 2048);
  wt.kv_len = 2100;
  GeneratedModule w = gen(wt, "sm_90a");
  CHECK(w.engine == "wgmma");
  CHECK(families(w) == std::vector{KernelFamily::Table});
  CHECK(engine0(w).stages == 2);
  CHECK(engine0(w).sum_checks == 1);
  CHECK_FALSE(engine0(w).q_shared);
  CHECK(engine0(w).tma);
  CHECK(engine0(w).min_blocks == 4);
  CHECK(w.fused[0].block == 128);
  CHECK(w.fused[0].smem_dynamic == 2 * 2 * 64 * 64 * 2 + 1024);
  // A band: the band kernel, three stages.
  GeneratedModule wb = gen(problem(window, 2048), "sm_90a");
  CHECK(families(wb) == std::vector{KernelFamily::Band});
  CHECK(wb.fused[0].smem_dynamic == 3 * 2 * 64 * 64 * 2 + 1024);
  // TMA: four tensor maps (K, V as batch*heads*kv_len rows; K, V as row pairs for stride-2 walks).
  REQUIRE(wb.tensor_maps.size() == 4);
  const uint64_t rows = static_cast<uint64_t>(problem(window, 2048).batch * problem(window, 2048).heads * 2048);
  CHECK(wb.tensor_maps[0].tensor == "k");
  CHECK(wb.tensor_maps[1].tensor == "v");
  CHECK(wb.tensor_maps[0].dims == std::vector<uint64_t>{64, rows});
  CHECK(wb.tensor_maps[0].strides == std::vector<uint64_t>{128});
  CHECK(wb.tensor_maps[0].box == std::vector<uint32_t>{64, 64});
  CHECK(wb.tensor_maps[2].dims == std::vector<uint64_t>{64, 2, rows / 2});
  CHECK(wb.tensor_maps[2].strides == std::vector<uint64_t>{128, 256});
  CHECK(wb.tensor_maps[3].box == std::vector<uint32_t>{64, 1, 64});
  // Stride-2 walks over an odd number of key rows: the pair view misses the last row, so cp.async
  // (and the table kernel).
  Problem odd = problem(R"({"dilated": {"left": 64, "right": 64, "dilation": 2}})", 2047);
  odd.heads = odd.kv_heads = 1;
  REQUIRE((odd.batch * odd.heads * odd.kv_len) % 2 == 1);
  GeneratedModule mo = gen(odd, "sm_90a");
  CHECK(mo.tensor_maps.empty());
  CHECK(families(mo) == std::vector{KernelFamily::Table});
  CHECK_FALSE(engine0(mo).tma);
  // More key rows than 32-bit TMA coordinates reach (2^20 heads x 4096 keys): cp.async.
  Problem huge = problem(window, 4096);
  huge.heads = huge.kv_heads = int64_t{1} << 20;
  CHECK(gen(huge, "sm_90a").tensor_maps.empty());
  huge.kv_heads = 16;  // grouped heads: the maps hold the K/V heads' rows only
  CHECK_FALSE(gen(huge, "sm_90a").tensor_maps.empty());
  // A lattice that does not fill its phases (2040 rows, stride 16): the table passes, TMA for the
  // window, cp.async for the lattice; with 2048 rows, the band kernel and the lattice kernel.
  const char* strided = R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})";
  GeneratedModule st = gen(problem(strided, 2040), "sm_90a");
  REQUIRE(families(st) == std::vector{KernelFamily::Table, KernelFamily::Table});
  CHECK(st.selection.fused[0].engine.tma);
  CHECK_FALSE(st.selection.fused[1].engine.tma);
  CHECK(families(gen(problem(strided, 2048), "sm_90a")) == std::vector{KernelFamily::Band, KernelFamily::Lattice});
  // Q in shared memory; the test hook that fails every row-sum check (the rare recompute path).
  GeneratedModule qh = gen(wt, "sm_90a", "qs=1", kFailSumChecks);
  CHECK(engine0(qh).q_shared);
  CHECK(engine0(qh).sum_checks == 2);
  CHECK(qh.fused[0].smem_dynamic == (2 * 2 + 1) * 64 * 64 * 2 + 1024);
  // Q in shared memory (one more 8 KB tile) by default for plans whose rows carry several runs.
  GeneratedModule lf = gen(problem(scattered, 2048), "sm_90a");
  CHECK(families(lf)[0] == KernelFamily::Table);
  CHECK(engine0(lf).q_shared);
  CHECK(lf.fused[0].smem_dynamic == (2 * 2 + 1) * 64 * 64 * 2 + 1024);
  // Longformer's leading global tokens: the band with globals' kernel and its three stages.
  CHECK(gen(problem(longformer, 2048), "sm_90a").fused[0].smem_dynamic == 3 * 2 * 64 * 64 * 2 + 1024);
  // The engine follows the target: not on other architectures, other head dims, fp32/tf32.
  CHECK(gen(problem(window, 2048), "sm_90").engine == "mma.sync");
  CHECK(gen(problem(window, 2048), "").engine == "mma.sync");
  CHECK(gen(problem(window, 2048, "bf16", 96), "sm_90a").engine == "mma.sync");
  CHECK(gen(problem(window, 2048, "bf16", 32), "sm_90a").engine == "mma.sync");
  CHECK(gen(problem(window, 2048, "fp16"), "sm_90a").engine == "wgmma");
  CHECK(gen(problem(window, 2048, "tf32"), "sm_90a").engine == "mma.sync tf32");
  CHECK(gen(problem(window, 2048, "fp32"), "sm_90a").engine == "mma.sync 3xtf32");
  // Three stages.
  GeneratedModule d = gen(wt, "sm_90a", "stages=3");
  CHECK(engine0(d).stages == 3);
  CHECK(d.fused[0].smem_dynamic == 2 * 3 * 64 * 64 * 2 + 1024);
  // Every wgmma variant builds: table kernels (one run, several runs, cp.async stride-2 walks),
  // the band kernel (dilated, stride-2 TMA view) and the band with globals.
  const std::string dilated = R"({"dilated": {"left": 64, "right": 64, "dilation": 2}})";
  for (const auto& [tuning, hooks] : std::vector<std::pair<std::string, CodegenTestHooks>>{
           {"", {}}, {"", kFailSumChecks}, {"qs=1", {}}, {"qs=0", {}}, {"stages=3", {}}}) {
    CAPTURE(tuning);
    CAPTURE(hooks.fail_sum_checks);
    for (const std::string* pat : {&window, &longformer, &scattered, &dilated}) {
      Problem p = problem(*pat, 1024, "fp16");
      if (pat == &window) p.kv_len = 1100;
      check_cubin(gen(p, "sm_90a", tuning, hooks), "sm_90a");
    }
  }
}

// head_dim 128 on wgmma: stages of two 64-column blocks (twice the shared memory), tensor-map
// boxes of 64 columns (two per key tile), 2 blocks per SM (O and Q's fragments take 96 registers);
// every variant and pattern family builds for sm_90a.
TEST_CASE("wgmma engine at head_dim 128: launch configuration, tensor maps, every variant builds" * doctest::test_suite("nvrtc")) {
  const auto gen = [](const Problem& p, const std::string& tuning = "", const CodegenTestHooks& hooks = {}) {
    return fused_module(p, "sm_90a", tuning, hooks);
  };
  const std::string window = R"({"window": {"left": 256, "right": 256}})";
  GeneratedModule w = gen(problem(window, 2048, "bf16", 128));
  CHECK(w.engine == "wgmma");
  CHECK(families(w) == std::vector{KernelFamily::Band});
  CHECK(w.fused[0].block == 128);
  CHECK(w.fused[0].smem_dynamic == 3 * 2 * 64 * 128 * 2 + 1024);  // the band kernel's three stages
  CHECK(engine0(w).min_blocks == 2);
  REQUIRE(w.tensor_maps.size() == 4);
  const uint64_t rows = static_cast<uint64_t>(problem(window, 2048).batch * problem(window, 2048).heads * 2048);
  CHECK(w.tensor_maps[0].dims == std::vector<uint64_t>{128, rows});
  CHECK(w.tensor_maps[0].strides == std::vector<uint64_t>{256});
  CHECK(w.tensor_maps[0].box == std::vector<uint32_t>{64, 64});
  CHECK(w.tensor_maps[2].dims == std::vector<uint64_t>{128, 2, rows / 2});
  CHECK(w.tensor_maps[2].strides == std::vector<uint64_t>{256, 512});
  CHECK(w.tensor_maps[3].box == std::vector<uint32_t>{64, 1, 64});
  // The table kernel (a window over more keys than rows) with Q in shared memory.
  Problem wt = problem(window, 2048, "fp16", 128);
  wt.kv_len = 2100;
  GeneratedModule t = gen(wt, "qs=1");
  CHECK(families(t) == std::vector{KernelFamily::Table});
  CHECK(t.fused[0].smem_dynamic == (2 * 2 + 1) * 64 * 128 * 2 + 1024);
  // Blocks per SM: 3 for an unmasked table pass (aligned blocks), 2 for a masked one and for the
  // band and lattice kernels.
  CHECK(engine0(gen(problem(R"({"blocked": {"block": 256}})", 2048, "bf16", 128))).min_blocks == 3);
  CHECK(engine0(t).min_blocks == 2);
  // mma.sync (sm_80, sm_90): registers for the wider O and Q fragments, 2 blocks per SM at d = 128
  // and 3 at d = 96 (at 4, 128 registers, they spilled); 4 at d = 64.
  for (const auto& [d, arch, blocks] : std::vector<std::tuple<int, std::string, int>>{
           {128, "sm_80", 2}, {96, "sm_80", 3}, {64, "sm_80", 4}, {128, "sm_90", 2}}) {
    CAPTURE(d);
    GeneratedModule m = fused_module(problem(window, 2048, "bf16", d), arch, "mw=16");
    CHECK(m.engine == "mma.sync");
    CHECK(engine0(m).min_blocks == blocks);
  }
  const std::string dilated = R"({"dilated": {"left": 64, "right": 64, "dilation": 2}})";
  const std::string longformer =
      R"({"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": [0, 1, 2, 3]}}]})";
  const std::string strided = R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})";
  const std::string fixed = R"({"fixed": {"block": 128, "summary": 8}})";
  for (const auto& [tuning, hooks] : std::vector<std::pair<std::string, CodegenTestHooks>>{
           {"", {}}, {"", kFailSumChecks}, {"qs=1", {}}, {"qs=0", {}}, {"stages=2,minb=3", {}}}) {
    CAPTURE(tuning);
    CAPTURE(hooks.fail_sum_checks);
    for (const std::string* pat : {&window, &dilated, &longformer, &strided, &fixed}) {
      CAPTURE(*pat);
      GeneratedModule m = gen(problem(*pat, 1024, "bf16", 128), tuning, hooks);
      CHECK(m.engine == "wgmma");
      check_cubin(m, "sm_90a");
    }
  }
}

TEST_CASE("128-row tiles (two warpgroups) cover each kept key once" * doctest::test_suite("cpu-model")) {
  for (const char* pat : {R"({"window": {"left": 37, "right": 20}})",
                          R"({"dilated": {"left": 20, "right": 20, "dilation": 3}})",
                          R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})",
                          R"({"blocked": {"block": 48}})"}) {
    CAPTURE(pat);
    Problem p = problem(pat, 300);
    TileShape t;
    t.br = 128;
    check_coverage(p, analyze(p), t);
  }
}

// The GPU edge-case problems (scripts/check-gpu) build for both targets with every engine they
// select: wgmma, mma.sync (bf16/fp16 at d = 128), tf32, 3xTF32 at d = 32/64/96/128.
TEST_CASE("grouped-query heads and q_offset: K/V layout, tensor maps, hash, fill split") {
  const std::string doc = R"({"seq_len": 1, "kv_len": 131072, "q_offset": 131071, "head_dim": 64, "heads": 32,
      "kv_heads": 8, "dtype": "bf16", "causal": true,
      "pattern": {"union": [{"window": {"left": 4095, "right": 0}}, {"global": {"tokens": [0, 1, 2, 3]}}]}})";
  Problem p = parse_problem_text(doc, "decode");
  CodegenOptions co;
  co.arch = "sm_90a";
  co.pipeline = false;
  GeneratedModule m = generate(p, analyze(p), co);
  CHECK(m.nnz == 4096 + 4);
  // Query head bh reads K/V head bh / 4.
  CHECK(m.source.find("#define SPLAT_KV_GROUP 4") != std::string::npos);
  nlohmann::json j = manifest(p, m, "ptx", "sm_90a", {"decode.ptx"});
  CHECK(j["problem"]["kv_heads"] == 8);
  CHECK(j["problem"]["q_offset"] == 131071);
  CHECK(j["layout"].get<std::string>().find("k, v: [batch, kv_heads, kv_len, head_dim]") != std::string::npos);
  REQUIRE(!j["tensor_maps"].empty());
  CHECK(j["tensor_maps"][0]["dims"] == nlohmann::json::array({64, 8 * 131072}));
  // One row tile of 65 key tiles over 32 heads: split into 9 chunks of 8 (288 blocks), then combined.
  REQUIRE(m.fused.size() == 2);
  CHECK(m.fused[0].grid_x == 9);
  CHECK(m.fused[1].role.find("combine") != std::string::npos);
  // The combine starts one block for the split tile's one row (of 2 rows a block), not 32.
  CHECK(m.fused[1].grid_x == 1);
  CHECK(m.source.find(", 1>(kSplits0") != std::string::npos);
  // The group is part of the hash (the code differs); q_offset is, through the ACSR.
  Problem mha = p;
  mha.kv_heads = mha.heads;
  GeneratedModule m1 = generate(mha, analyze(mha), co);
  CHECK(m1.pattern_hash != m.pattern_hash);
  CHECK(m1.source.find("#define SPLAT_KV_GROUP 4") == std::string::npos);
  Problem shifted = p;
  shifted.q_offset -= 1;
  CHECK(generate(shifted, analyze(shifted), co).pattern_hash != m.pattern_hash);
}

TEST_CASE("split-KV workspace: the partials start 16-byte aligned and fit when batch*heads*seq_len is odd") {
  // The fp32/tf32 engines store a partial O row as float4; the partials follow the pass-to-pass
  // state of gridDim.y * seq_len * (head_dim + 2) floats, which is 8 mod 16 bytes at an odd
  // gridDim.y * seq_len. The device rounds their start up to 4 floats (split_region); the
  // workspace must hold that rounding for every batch*heads.
  for (const char* dtype : {"tf32", "fp32", "bf16"}) {
    CAPTURE(dtype);
    const std::string doc = R"({"seq_len": 1, "kv_len": 6000, "q_offset": 5999, "head_dim": 64, "heads": 3,
        "batch": 1, "dtype": ")" + std::string(dtype) + R"(", "causal": true, "pattern": {"window": {"left": 4000, "right": 0}}})";
    Problem p = parse_problem_text(doc, "decode-odd");
    CodegenOptions co;
    co.arch = "sm_90a";
    co.pipeline = false;
    GeneratedModule m = generate(p, analyze(p), co);
    int slots = 0;
    for (const PlanPass& pass : m.plan.passes) slots = std::max(slots, pass.slots);
    REQUIRE(slots > 0);  // decode at 3 heads fills the GPU with chunks
    for (int64_t bh : {1, 3, 5, 7, 96}) {
      CAPTURE(bh);
      const int64_t state = bh * p.seq_len * (p.head_dim + 2);
      const int64_t split_begin = (state + 3) / 4 * 4;  // split_region
      CHECK(split_begin % 4 == 0);
      const int64_t split_floats = bh * slots * 64 * (p.head_dim + 2);
      CHECK(split_begin + split_floats <= bh * m.workspace_floats_per_bh);
    }
  }
}

TEST_CASE("decode engine: by default for fp32/tf32 only, a K/V head's query heads per block, the split for batch*kv_heads") {
  const std::string doc = R"({"seq_len": 1, "kv_len": 131072, "q_offset": 131071, "head_dim": 64, "heads": 32,
      "kv_heads": 8, "dtype": "bf16", "causal": true,
      "pattern": {"union": [{"window": {"left": 4095, "right": 0}}, {"global": {"tokens": [0, 1, 2, 3]}}]}})";
  const Problem p = parse_problem_text(doc, "decode");
  CHECK(decode_group(p) == 4);
  CodegenOptions co;
  co.arch = "sm_90a";
  co.pipeline = false;
  // bf16 by default: the table pass of the tensor-core engine (measured faster on an H100), decode
  // with decode=1. fp32 and tf32 by default: decode (3x faster than 3xTF32 on the H100); decode=0: never.
  CHECK(generate(p, analyze(p), co).engine == "wgmma");
  CHECK_FALSE(decode_engine(p, -1));
  CHECK(decode_engine(p, 1));
  for (const char* dt : {"fp32", "tf32"}) {
    CAPTURE(dt);
    std::string d32 = doc;
    d32.replace(d32.find("bf16"), 4, dt);
    const Problem p32 = parse_problem_text(d32, "decode32");
    CHECK(decode_engine(p32, -1));
    CHECK_FALSE(decode_engine(p32, 0));
    CHECK(generate(p32, analyze(p32), co).engine == "decode");
    CodegenOptions never = co;
    never.tuning = parse_tuning("decode=0");
    CHECK(generate(p32, analyze(p32), never).engine.rfind("mma.sync", 0) == 0);
  }
  co.tuning = parse_tuning("decode=1");
  const GeneratedModule m = generate(p, analyze(p), co);
  CHECK(m.engine == "decode");
  CHECK_FALSE(m.tensor_cores);
  CHECK(m.tensor_maps.empty());
  REQUIRE(m.fused.size() == 2);
  // 8 warps, each staging 32 K and 32 V rows of 128 + 16 bytes; Q as floats and as bf16, P.
  CHECK(geometry::decode_warps(64, 2) == 8);
  CHECK(m.fused[0].block == 256);
  CHECK(m.fused[0].smem_dynamic == geometry::decode_smem(4, 64, 2));
  CHECK(m.fused[0].smem_dynamic == 4 * 64 * (4 + 2) + 4 * 8 * 32 * 4 + 8 * 2 * 32 * (128 + 16));
  CHECK(m.fused[1].role.find("combine") != std::string::npos);
  // Split for 8 K/V heads (blocks serve a K/V head each): 65 key tiles of the 4100 keys in chunks of
  // at least 4, where the tensor-core engine's split for 32 query heads made 9 chunks.
  const PlanPass& pass = m.plan.passes.at(0);
  const int64_t tiles = static_cast<int64_t>(pass.tiles.size());
  CHECK(tiles == 17);
  CHECK(pass.slots == 17);
  // grid.y stays batch*heads: block (x, y) takes tile 4x + y % 4 for K/V head y / 4.
  CHECK(m.fused[0].grid_x == (tiles + 3) / 4);
  CHECK(m.source.find("decode_pass<bf16_t, SPLAT_SEQ, SPLAT_KV, SPLAT_HD, 1, ") != std::string::npos);
  CHECK(m.source.find("DecodeTables{kItems, kTiles0, 17, kGroups0") != std::string::npos);
  CodegenOptions plain;
  plain.arch = "sm_90a";
  plain.pipeline = false;
  CHECK(m.pattern_hash == generate(p, analyze(p), plain).pattern_hash);
}

TEST_CASE("decode engine: which problems it takes (decode_group)") {
  const auto group = [](const std::string& fields) {
    return decode_group(parse_problem_text(R"({"kv_len": 9000, "causal": true, "pattern": {"window": {"left": 500, "right": 0}}, )" +
                                               fields + "}",
                                           "g"));
  };
  CHECK(group(R"("seq_len": 16, "q_offset": 8984, "head_dim": 64, "heads": 2, "dtype": "bf16")") == 1);
  CHECK(group(R"("seq_len": 17, "q_offset": 8983, "head_dim": 64, "heads": 2, "dtype": "bf16")") == 0);  // 17 pairs
  CHECK(group(R"("seq_len": 2, "q_offset": 8998, "head_dim": 64, "heads": 16, "kv_heads": 2, "dtype": "bf16")") == 8);
  CHECK(group(R"("seq_len": 4, "q_offset": 8996, "head_dim": 64, "heads": 16, "kv_heads": 2, "dtype": "bf16")") == 0);
  CHECK(group(R"("seq_len": 1, "q_offset": 8999, "head_dim": 256, "heads": 4, "kv_heads": 1, "dtype": "fp32")") == 4);
  CHECK(group(R"("seq_len": 2, "q_offset": 8998, "head_dim": 256, "heads": 4, "kv_heads": 1, "dtype": "fp32")") == 0);  // 2048 > 1024
  CHECK(group(R"("seq_len": 1, "q_offset": 8999, "head_dim": 36, "heads": 2, "dtype": "fp32")") == 1);
  CHECK(group(R"("seq_len": 1, "q_offset": 8999, "head_dim": 36, "heads": 2, "dtype": "bf16")") == 0);  // not 16-byte rows
  // A plan of two passes (a strided lattice) keeps the tensor-core engines.
  const Problem two = parse_problem_text(R"({"seq_len": 2, "kv_len": 9000, "q_offset": 8998, "head_dim": 64, "heads": 2,
      "dtype": "bf16", "pattern": {"union": [{"window": {"left": 300, "right": 0}}, {"strided": {"stride": 96}}]}})", "two");
  REQUIRE(decode_group(two) == 1);
  CodegenOptions co;
  co.arch = "sm_90a";
  co.pipeline = false;
  co.tuning = parse_tuning("decode=1");
  const GeneratedModule m = generate(two, analyze(two), co);
  CHECK(m.plan.passes.size() == 2);
  CHECK(m.engine != "decode");
}

TEST_CASE("decode engine: every tests/gpu problem it takes compiles to CUBIN for sm_80 and sm_90a" * doctest::test_suite("nvrtc")) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TRSPLAT_SOURCE_DIR) / "tests" / "gpu")) {
    if (e.path().extension() != ".json") continue;
    const Problem whole = load_problem(e.path().string());
    if (!whole.head_groups.empty() || decode_group(whole) == 0) continue;
    CAPTURE(whole.name);
    for (const char* arch : {"sm_80", "sm_90a"})
      for (bool lse : {false, true}) {
        CAPTURE(arch);
        CAPTURE(lse);
        CodegenOptions co;
        co.arch = arch;
        co.pipeline = false;
        co.save_lse = lse;
        co.tuning = parse_tuning("decode=1");
        const GeneratedModule m = generate(whole, analyze(whole), co);
        if (m.plan.passes.size() != 1) continue;
        CHECK(m.engine == "decode");
        CHECK(test_compile(m.source, whole.name + ".cu", arch, CompileTarget::Cubin).image.size() > 1000);
        ++n;
      }
  }
  CHECK(n >= 28);  // 7 problems x 2 targets x 2
}

TEST_CASE("the GPU edge-case problems in tests/gpu compile to CUBIN for sm_80 and sm_90a" * doctest::test_suite("nvrtc")) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(fs::path(TRSPLAT_SOURCE_DIR) / "tests" / "gpu")) {
    if (e.path().extension() != ".json") continue;
    CAPTURE(e.path().string());
    for (const Problem& p : head_group_problems(load_problem(e.path().string())))  // per-head patterns: each group
    for (const char* arch : {"sm_80", "sm_90a"}) {
      CAPTURE(p.name);
      CAPTURE(arch);
      CodegenOptions co;
      co.arch = arch;
      // The fused kernels alone, but for the problems no fused engine takes (pipeline-*): the pipeline.
      co.pipeline = !choose_engine(p, arch).tensor_cores;
      co.fused = !co.pipeline;
      GeneratedModule m = generate(p, analyze(p), co);
      CHECK(m.fused.empty() == co.pipeline);
      CompileResult c = test_compile(m.source, p.name + ".cu", arch, CompileTarget::Cubin);
      CHECK(c.image.size() > 1000);
    }
    ++n;
  }
  CHECK(n >= 54);
}

// Saving the log-sum-exp touches every kernel family's end: the band (TMA) and lattice kernels, table
// passes with split-KV and the combine, band plus global keys, each engine (wgmma, mma.sync, tf32,
// 3xTF32), packed batches, head groups and the pipeline.
TEST_CASE("modules that save the log-sum-exp compile to CUBIN for sm_80 and sm_90a" * doctest::test_suite("nvrtc")) {
  for (const char* name : {"window-ragged-bf16", "lattice-ragged-bf16", "decode-window-global-bf16", "longformer-ragged-bf16",
                           "global-strided-fp32", "window-d96-tf32", "varlen-window-ragged-bf16", "pipeline-d13-fp16"}) {
    CAPTURE(name);
    const Problem p = load_problem(std::string(TRSPLAT_SOURCE_DIR) + "/tests/gpu/" + name + ".json");
    for (const char* arch : {"sm_80", "sm_90a"}) {
      CAPTURE(arch);
      CodegenOptions co;
      co.arch = arch;
      co.save_lse = true;
      co.pipeline = !p.varlen;
      const GeneratedModule m = generate(p, analyze(p), co);
      CHECK(m.source.find("#define SPLAT_LSE 1") != std::string::npos);
      CHECK(test_compile(m.source, p.name + ".cu", arch, CompileTarget::Cubin).image.size() > 1000);
    }
  }
}

TEST_CASE("every bf16/fp16 pattern in patterns/ compiles for sm_90a with the wgmma engine" * doctest::test_suite("nvrtc")) {
  int n = 0;
  for (const fs::path& f : pattern_files()) {
    const std::string name = f.filename().string();
    if (name.find("-bf16") == std::string::npos && name.find("-fp16") == std::string::npos) continue;
    CAPTURE(name);
    const Problem whole = load_problem(f.string());
    // Per-head patterns: the first head group (the others have the same engine).
    const Problem p = whole.head_groups.empty() ? whole : head_group(whole, 0);
    CodegenOptions co;
    co.arch = "sm_90a";
    GeneratedModule m = generate(p, analyze(p), co);
    CHECK(m.engine == "wgmma");
    // CUBIN: ptxas checks the wgmma operands; the pipeline kernels are arch-independent.
    CompileResult cubin = test_compile(m.source, p.name + ".cu", "sm_90a", CompileTarget::Cubin);
    CHECK(cubin.image.size() > 1000);
    ++n;
  }
  CHECK(n >= 20);
}

// Bands (windows, causal and one-sided windows, dilated windows) are recognised row by row; unions
// and other shapes are not. band_tile gives the key tiles the band kernel walks.
TEST_CASE("packed variable-length batches: table kernels clipped per sequence, bands per sequence, cu_seqlens, no pipeline") {
  // A window with global tokens: the plan's tables (cp.async) for a packed batch.
  const std::string doc = R"({"name": "vl", "seq_len": 1000, "head_dim": 64, "heads": 4, "kv_heads": 2, "dtype": "bf16",
      "varlen": {"max_total_tokens": 5000, "lengths": [1000, 1, 0]}, "pattern": {"union": [{"window": {"left": 70,
      "right": 20}}, {"global": {"tokens": [0, 1, 2, 600]}}]}})";
  const Problem p = parse_problem_text(doc, "vl");
  CodegenOptions co;
  co.arch = "sm_90a";
  const GeneratedModule m = generate(p, analyze(p), co);
  CHECK(m.varlen);
  CHECK(m.engine == "wgmma");
  CHECK(m.pipeline.empty());  // both asked for: the fused kernels only
  CHECK(m.tensor_maps.empty());
  REQUIRE(!m.fused.empty());
  for (const KernelSpec& k : m.selection.fused) {
    CHECK(k.family() == KernelFamily::Table);
    CHECK_FALSE(std::get<TableTraits>(k.traits).unmasked);
  }
  for (const PlanPass& pass : m.plan.passes) CHECK(pass.splits.empty());
  CHECK(m.source.find("#define SPLAT_VARLEN 1") != std::string::npos);
  CHECK(m.source.find("#define SPLAT_HEADS 4") != std::string::npos);
  CHECK(m.source.find("#define SPLAT_KV_HEADS 2") != std::string::npos);
  CHECK(m.source.find("const void* tmaps, const int* cu_seqlens) {") != std::string::npos);
  CHECK(m.source.find("ws, nullptr, table, tmaps, cu_seqlens);") != std::string::npos);
  const nlohmann::json j = manifest(p, m, "ptx", "sm_90a", {"vl.ptx"});
  REQUIRE(j["parameters"].size() == kernel_params().size() + 1);
  CHECK(j["parameters"].back()["name"] == "cu_seqlens");
  CHECK(j["parameters"].back()["index"] == kernel_params().size());
  CHECK(j["kernels"]["fused"][0]["grid"][1] == "sequences*heads");
  CHECK(j["problem"]["varlen"]["max_total_tokens"] == 5000);
  CHECK(j["layout"].get<std::string>().find("[total_tokens, heads, head_dim]") != std::string::npos);
  // A plain batch keeps its parameters and launch.
  const Problem plain = parse_problem_text(R"({"seq_len": 1000, "head_dim": 64, "pattern": {"window": {"left": 7}}})", "p");
  const GeneratedModule pm = generate(plain, analyze(plain), co);
  CHECK_FALSE(pm.varlen);
  CHECK(pm.source.find("const void* tmaps) {") != std::string::npos);
  CHECK(manifest(plain, pm, "ptx", "sm_90a", {})["parameters"].size() == kernel_params().size());
  // The pipeline alone does not take a packed batch; no fused engine for the head_dim is an error too.
  CodegenOptions pipe;
  pipe.fused = false;
  CHECK_THROWS_AS(generate(p, analyze(p), pipe), Error);
  // A unit-step window: the band kernel per sequence (band_pass_varlen), K and V by TMA through two
  // maps over the packed tokens ([max_total_tokens][kv_heads][head_dim], boxes of 64 tokens of one
  // head); the same window on sm_80, or a dilated one, keeps the tables.
  const std::string win = R"({"seq_len": 1000, "head_dim": 128, "heads": 4, "kv_heads": 2, "dtype": "bf16",
      "varlen": {"max_total_tokens": 5000}, "pattern": {"window": {"left": 70, "right": 20}}})";
  const Problem w = parse_problem_text(win, "w");
  const GeneratedModule wm = generate(w, analyze(w), co);
  REQUIRE(wm.selection.fused.size() == 1);
  CHECK(wm.selection.fused[0].family() == KernelFamily::Band);
  CHECK(wm.selection.fused[0].grid_x == 16);  // row tiles of the longest sequence
  CHECK(wm.selection.grid_y == "sequences*heads");
  CHECK(wm.source.find("band_pass_varlen<") != std::string::npos);
  CHECK(wm.source.find(", -70, 20>(") != std::string::npos);
  CHECK(wm.source.find("tmaps, cu_seqlens);") != std::string::npos);
  REQUIRE(wm.tensor_maps.size() == 2);
  for (const TensorMapDesc& t : wm.tensor_maps) {
    CHECK(t.dims == std::vector<uint64_t>{128, 2, 5000});
    CHECK(t.strides == std::vector<uint64_t>{256, 512});
    CHECK(t.box == std::vector<uint32_t>{64, 1, 64});
  }
  CHECK(wm.tensor_maps[0].tensor == "k");
  CHECK(wm.tensor_maps[1].tensor == "v");
  CodegenOptions ampere;
  ampere.arch = "sm_80";
  CHECK(generate(w, analyze(w), ampere).selection.fused[0].family() == KernelFamily::Table);
  const Problem dil = parse_problem_text(R"({"seq_len": 1000, "head_dim": 64, "dtype": "bf16", "varlen": {"max_total_tokens":
      5000}, "pattern": {"dilated": {"left": 10, "right": 10, "dilation": 2}}})", "d");
  const GeneratedModule dm = generate(dil, analyze(dil), co);
  CHECK(dm.selection.fused[0].family() == KernelFamily::Table);
  CHECK(dm.tensor_maps.empty());
  const Problem odd = parse_problem_text(
      R"({"seq_len": 100, "head_dim": 13, "dtype": "fp16", "varlen": {"max_total_tokens": 200}, "pattern": {"window": {"left": 7}}})", "o");
  try {
    generate(odd, analyze(odd));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("a packed variable-length batch runs on the fused engines only") != std::string::npos);
  }
}

TEST_CASE("per-head patterns: a module per head group, its grid.y over the group's heads") {
  const Problem p = parse_problem_text(
      R"({"name": "hp", "seq_len": 1000, "head_dim": 64, "heads": 8, "kv_heads": 2, "dtype": "bf16", "head_patterns": [
          {"window": {"left": 64, "right": 0}}, {"strided": {"stride": 50}}, {"window": {"left": 64, "right": 0}},
          {"strided": {"stride": 50}}]})",
      "hp");
  REQUIRE(p.head_groups.size() == 2);
  CodegenOptions co;
  co.arch = "sm_90a";
  CHECK_THROWS_AS(generate(p, Acsr{}, co), std::invalid_argument);  // one group at a time
  CHECK_THROWS_AS(analyze(p), std::invalid_argument);
  const std::vector<Problem> groups = head_group_problems(p);
  const GeneratedModule a = generate(groups[0], analyze(groups[0]), co), b = generate(groups[1], analyze(groups[1]), co);
  // Group 0 is heads 0, 1, 4, 5 (the first and third entries, two heads each).
  CHECK(groups[0].group_heads == std::vector<int64_t>{0, 1, 4, 5});
  CHECK(a.source.find("#define SPLAT_HEAD_GROUP 4") != std::string::npos);
  CHECK(a.source.find("#define SPLAT_HEAD_IDS 0, 1, 4, 5\n") != std::string::npos);
  CHECK(a.source.find("#define SPLAT_HEADS 8\n") != std::string::npos);
  CHECK(b.source.find("#define SPLAT_HEAD_IDS 2, 3, 6, 7\n") != std::string::npos);
  CHECK(a.selection.grid_y == "batch*group_heads");
  CHECK(a.pattern_hash != b.pattern_hash);
  const nlohmann::json j = manifest(groups[1], b, "ptx", "sm_90a", {"hp.h1.ptx"});
  CHECK(j["problem"]["group_heads"] == nlohmann::json({2, 3, 6, 7}));
  CHECK(j["kernels"]["fused"][0]["grid"][1] == "batch*group_heads");
  CHECK(j["layout"].get<std::string>().find("group_heads[y % G]") != std::string::npos);
  // The same pattern over all heads, or another group of heads, is another module (the head map is
  // compiled in); a problem of one pattern has no head map.
  Problem alone = groups[0];
  alone.group_heads.clear();
  const GeneratedModule c = generate(alone, analyze(alone), co);
  CHECK(c.pattern_hash != a.pattern_hash);
  CHECK(c.source.find("SPLAT_HEAD_GROUP ") == std::string::npos);
  CHECK(c.selection.grid_y == "batch*heads");
  // A head group of a packed batch: grid.y over sequences x the group's heads.
  Problem vl = groups[1];
  vl.varlen = Varlen{4000, {}};
  CHECK(generate(vl, analyze(vl), co).selection.grid_y == "sequences*group_heads");
}

TEST_CASE("saved softmax statistics (save_lse): every entry point takes float* lse, last") {
  CodegenOptions co;
  co.arch = "sm_90a";
  co.save_lse = true;
  // A window plus a lattice (band pass, lattice pass), with the pipeline.
  const Problem p = parse_problem_text(
      R"({"seq_len": 1024, "head_dim": 64, "dtype": "bf16", "pattern": {"union": [{"window": {"left": 63, "right": 63}},
          {"strided": {"stride": 64}}]}})",
      "s");
  const GeneratedModule m = generate(p, analyze(p), co);
  CHECK(m.save_lse);
  CHECK(m.source.find("#define SPLAT_LSE 1") != std::string::npos);
  size_t entries = 0, with_lse = 0;
  for (size_t at = m.source.find("extern \"C\" __global__"); at != std::string::npos;
       at = m.source.find("extern \"C\" __global__", at + 1)) {
    ++entries;
    const std::string head = m.source.substr(at, m.source.find('{', at) - at);
    with_lse += head.find("const void* tmaps, float* lse)") != std::string::npos;
  }
  CHECK(entries == m.fused.size() + m.pipeline.size());
  CHECK(with_lse == entries);
  CHECK(m.source.find(", ws, lse, tmaps);") != std::string::npos);                 // band and lattice passes
  CHECK(m.source.find("softmax_row<SPLAT_SEQ>(") != std::string::npos);
  CHECK(m.source.find(", scores, lse);") != std::string::npos);                     // the pipeline's softmax
  const nlohmann::json j = manifest(p, m, "ptx", "sm_90a", {});
  REQUIRE(j["parameters"].size() == kernel_params().size() + 1);
  CHECK(j["parameters"].back()["name"] == "lse");
  CHECK(j["parameters"].back()["index"] == kernel_params().size());
  // A packed batch: cu_seqlens, then lse.
  Problem vl = p;
  vl.varlen = Varlen{4096, {}};
  const GeneratedModule v = generate(vl, analyze(vl), co);
  CHECK(v.source.find("const int* cu_seqlens, float* lse) {") != std::string::npos);
  const nlohmann::json jv = manifest(vl, v, "ptx", "sm_90a", {});
  REQUIRE(jv["parameters"].size() == kernel_params().size() + 2);
  CHECK(jv["parameters"][8]["name"] == "cu_seqlens");
  CHECK(jv["parameters"][9]["name"] == "lse");
  // Not asked for: no parameter, no define, the passes get nullptr.
  co.save_lse = false;
  const GeneratedModule n = generate(p, analyze(p), co);
  CHECK_FALSE(n.save_lse);
  CHECK(n.source.find("float* lse)") == std::string::npos);
  CHECK(n.source.find("#define SPLAT_LSE") == std::string::npos);
  CHECK(n.source.find(", ws, nullptr, tmaps);") != std::string::npos);
  CHECK(manifest(p, n, "ptx", "sm_90a", {})["parameters"].size() == kernel_params().size());
}

TEST_CASE("find_band recognises windows and dilated windows, and nothing else") {
  struct Case {
    const char* pat;
    int64_t L;
    bool band;
    int64_t d, lo, hi;
  };
  for (const Case& c : {Case{R"({"window": {"left": 256, "right": 256}})", 4096, true, 1, -256, 256},
                        Case{R"({"window": {"left": 100, "right": 0}})", 1000, true, 1, -100, 0},
                        Case{R"({"window": {"left": 0, "right": 7}})", 100, true, 1, 0, 7},
                        Case{R"({"window": {"left": 900, "right": 900}})", 300, true, 1, -299, 299},
                        Case{R"({"dilated": {"left": 256, "right": 256, "dilation": 2}})", 4096, true, 2, -256, 256},
                        Case{R"({"dilated": {"left": 5, "right": 9, "dilation": 3}})", 999, true, 3, -5, 9},
                        Case{R"({"dilated": {"left": 5, "right": 9, "dilation": 3}})", 1000, false, 0, 0, 0},
                        Case{R"({"blocked": {"block": 256}})", 4096, false, 0, 0, 0},
                        Case{R"({"strided": {"stride": 64}})", 4096, true, 64, -63, 63},  // j = i mod 64, any distance
                        Case{R"({"union": [{"window": {"left": 32, "right": 32}}, {"global": {"tokens": [0]}}]})", 1024, false, 0, 0, 0}}) {
    const std::string pat = c.pat;
    CAPTURE(pat);
    CAPTURE(c.L);
    const std::optional<Band> found = find_band(analyze(problem(c.pat, c.L)));
    REQUIRE(found.has_value() == c.band);
    if (!c.band) continue;
    const Band& b = *found;
    CHECK(b.dilation == c.d);
    CHECK(b.k_lo == c.lo);
    CHECK(b.k_hi == c.hi);
    CHECK(b.rows == c.L / c.d);
  }
  // kv_len != seq_len: no band kernel (keys and rows share the phase lattice).
  Problem p = problem(R"({"window": {"left": 16, "right": 16}})", 512);
  p.kv_len = 600;
  CHECK_FALSE(find_band(analyze(p)).has_value());
}

TEST_CASE("band_tile: the key tiles of a window's row tiles (interior, edges, ragged end)") {
  Band b{1, -256, 256, 1000};
  // Interior: u from 64t - 256, nine tiles, the first and last masked (the diagonal edges).
  BandTile mid = band_tile(b, 7);
  CHECK(mid.u_start == 448 - 256);
  CHECK(mid.first == 0);
  CHECK(mid.count == 9);
  CHECK(mid.full_begin == 1);
  CHECK(mid.full_end == 8);
  // First row tile: keys below 0 skipped (tiles 0..3 lie entirely below key 0).
  BandTile t0 = band_tile(b, 0);
  CHECK(t0.u_start == -256);
  CHECK(t0.first == 4);
  CHECK(t0.count == 5);
  CHECK(t0.full_begin == 4);
  CHECK(t0.full_end == 8);
  // Last row tile (rows 960..999): keys up to 999 only.
  BandTile tl = band_tile(b, 15);
  CHECK(tl.u_start == 960 - 256);
  CHECK(tl.first == 0);
  CHECK(tl.count == 5);  // u in [704, 999]
  CHECK(tl.full_begin == 1);
  CHECK(tl.full_end == 4);  // the tile from u = 960 holds keys past 999
}

// The band kernel's checked softmax takes the exact step on a row tile's first key tile and skips
// the vote on rows without a reference after it: every row's first kept key must lie in that tile.
TEST_CASE("band_tile: every row's first kept key is in its row tile's first key tile") {
  int checked = 0;
  for (const Band& b : {Band{1, -256, 256, 1000}, Band{1, -256, 0, 4096}, Band{1, 0, 300, 777}, Band{1, -5, 3, 70},
                        Band{1, -2000, 2000, 300}, Band{1, 40, 90, 200}, Band{2, -256, 256, 2048}, Band{1, -100, -20, 500}}) {
    CAPTURE(b.k_lo);
    CAPTURE(b.k_hi);
    CAPTURE(b.rows);
    for (int64_t t = 0; t < b.tiles_per_phase(); ++t) {
      const BandTile bt = band_tile(b, t);
      for (int64_t m = 64 * t; m < std::min(64 * t + 64, b.rows); ++m) {
        const int64_t lo = std::max<int64_t>(0, m + b.k_lo), hi = std::min(b.rows - 1, m + b.k_hi);
        if (lo > hi) continue;  // a row with no keys: stays without a reference (the sum check catches it)
        CAPTURE(t);
        CAPTURE(m);
        REQUIRE(bt.count > 0);
        const int64_t first_u = bt.u_start + 64 * bt.first;
        CHECK(lo >= first_u);
        CHECK(lo < first_u + 64);
        ++checked;
      }
    }
  }
  CHECK(checked > 8000);
}

// The band kernel replaces the plan's tables where the wgmma engine loads K/V by TMA (dilation 1
// or 2: the tensor maps' two views), and only there.
TEST_CASE("band patterns get the table-free band kernel on sm_90a (TMA), tables elsewhere" * doctest::test_suite("nvrtc")) {
  const auto gen = [](const Problem& p, const std::string& arch) { return fused_module(p, arch, ""); };
  Problem w = problem(R"({"window": {"left": 256, "right": 256}})", 4096);
  GeneratedModule m = gen(w, "sm_90a");
  REQUIRE(families(m) == std::vector{KernelFamily::Band});
  const BandTraits& bt = std::get<BandTraits>(m.selection.fused[0].traits);
  CHECK(bt.band == Band{1, -256, 256, 4096});
  CHECK_FALSE(bt.edge_masks);  // one-sided edge masks: dilated bands only
  CHECK_FALSE(bt.hands_over);
  CHECK(engine0(m).stages == 3);
  CHECK(engine0(m).tma);
  CHECK(m.fused[0].grid_x == 64);
  CHECK(m.tensor_maps.size() == 4);
  CHECK(m.source.find("kTiles0") == std::string::npos);  // no tables
  Problem dl = problem(R"({"dilated": {"left": 256, "right": 256, "dilation": 2}})", 4096);
  GeneratedModule md = gen(dl, "sm_90a");
  REQUIRE(families(md) == std::vector{KernelFamily::Band});
  CHECK(std::get<BandTraits>(md.selection.fused[0].traits).band == Band{2, -256, 256, 2048});
  CHECK(std::get<BandTraits>(md.selection.fused[0].traits).edge_masks);
  CHECK(md.fused[0].grid_x == 64);  // two phases of 32 row tiles
  // mma.sync (sm_80): the tables.
  CHECK(families(gen(w, "sm_80")) == std::vector{KernelFamily::Table});
  // Dilation 3: no tensor-map view, tables.
  Problem d3 = problem(R"({"dilated": {"left": 5, "right": 9, "dilation": 3}})", 999);
  CHECK(families(gen(d3, "sm_90a")) == std::vector{KernelFamily::Table});
  // The band kernels compile (ptxas checks the wgmma operands and the TMA copies).
  for (const GeneratedModule* g : {&m, &md}) check_cubin(*g, "sm_90a");
}

TEST_CASE("window plus lattice (strided) gets the band kernel and lattice_pass on sm_90a, tables elsewhere" * doctest::test_suite("nvrtc")) {
  const auto gen = fused_module;
  Problem st = problem(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64, "offset": 0}}]})", 16384);
  GeneratedModule m = gen(st, "sm_90a", "", {});
  // Pass 0: the window's band kernel, handing its state over; pass 1: the lattice.
  REQUIRE(families(m) == std::vector{KernelFamily::Band, KernelFamily::Lattice});
  const BandTraits& bt = std::get<BandTraits>(m.selection.fused[0].traits);
  CHECK(bt.band == Band{1, -63, 63, 16384});
  CHECK(bt.hands_over);
  const Lattice& lat = std::get<LatticeTraits>(m.selection.fused[1].traits).lattice;
  CHECK(lat.period == 64);
  CHECK(lat.hole_lo == 0);
  CHECK(lat.hole_hi == 0);
  // Table-free kernels hold no run bounds: Q in registers; three stages.
  for (const KernelSpec& k : m.selection.fused) {
    CHECK_FALSE(k.engine.q_shared);
    CHECK(k.engine.stages == 3);
    CHECK(k.engine.tma);
  }
  CHECK(m.source.find("kTiles0") == std::string::npos);
  CHECK(m.source.find("kTiles1") == std::string::npos);
  REQUIRE(m.fused.size() == 2);
  CHECK(m.fused[0].grid_x == 256);      // 256 row tiles of the window
  CHECK(m.fused[1].grid_x == 64 * 4);   // 64 phases of 256 rows
  // The lattice kernel reads the window's state only at its end: a programmatic dependent launch,
  // which the window's kernel lets start.
  CHECK(!m.fused[0].programmatic);
  CHECK(m.fused[1].programmatic);
  CHECK(m.selection.fused[0].launch_dependents);
  CHECK(m.source.find("pdl_launch_dependents();") != std::string::npos);
  CHECK(m.workspace_floats_per_bh >= 16384 * 66);
  // Maps: steps 1 and 2, then the lattice's [rows / 64][64][64] view.
  REQUIRE(m.tensor_maps.size() == 6);
  CHECK(m.tensor_maps[4].dims == std::vector<uint64_t>{64, 64, static_cast<uint64_t>(st.batch * st.heads * 16384 / 64)});
  CHECK(m.tensor_maps[4].strides == std::vector<uint64_t>{128, 64 * 128});
  CHECK(m.tensor_maps[4].box == std::vector<uint32_t>{64, 1, 64});
  CHECK(m.tensor_maps[5].tensor == "v");
  GeneratedModule x = gen(st, "sm_80", "", {});
  CHECK(families(x) == std::vector{KernelFamily::Table, KernelFamily::Table});
  CHECK(x.tensor_maps.empty());
  // They compile (ptxas checks the wgmma operands and the stride-P TMA copies).
  GeneratedModule mq = gen(st, "sm_90a", "qs=1", {});  // Q in shared memory (S from shared memory only)
  CHECK(mq.selection.fused[1].engine.q_shared);
  Problem wide = problem(R"({"union": [{"window": {"left": 100, "right": 10}}, {"strided": {"stride": 48, "offset": 0}}]})", 48 * 70);
  GeneratedModule mw = gen(wide, "sm_90a", "", {});
  REQUIRE(families(mw) == std::vector{KernelFamily::Band, KernelFamily::Lattice});
  CHECK(std::get<LatticeTraits>(mw.selection.fused[1].traits).lattice.hole_lo == -2);
  CHECK(std::get<LatticeTraits>(mw.selection.fused[1].traits).lattice.hole_hi == 0);
  for (const GeneratedModule* g : {&m, &mq, &mw}) check_cubin(*g, "sm_90a");
}

// Runs of one stride on several lattices (the causal `fixed` pattern's summary columns, residues
// 120..127 mod 128, each row keeping those before it) get one group per lattice: gathered with
// step 128, no modular masks, few key tiles.
TEST_CASE("plan gives each key lattice of a stride its own group (causal fixed pattern)" * doctest::test_suite("cpu-model")) {
  Problem p = parse_problem_text(
      R"({"seq_len": 4096, "head_dim": 64, "heads": 16, "causal": true, "pattern": {"fixed": {"block": 128, "summary": 8}}})",
      "test");
  Acsr pa = analyze(p);
  Structure no_keys = analyze_structure(pa);
  no_keys.global_keys.clear();
  Plan plan = make_plan(pa, no_keys);
  REQUIRE(plan.passes.size() == 1);
  CHECK_FALSE(plan.global_keys.has_value());
  int64_t lattice_walks = 0, modular = 0, key_tiles = 0;
  for (const PlanTile& t : plan.passes[0].tiles) {
    key_tiles += t.key_tiles;
    for (const PlanGroup& g : t.groups)
      for (const KeyWalk& w : g.walks) {
        lattice_walks += w.step == 128;
        modular += w.modular;
      }
  }
  // 588 key tiles where one stride-1 walk per tile would visit every summary column's span.
  CHECK(lattice_walks > 64 * 4);
  // Global keys (PlanGlobalKeys::prefix_table: each row keeps the summary columns before it, a
  // prefix of them) were left out here; with them the plan walks 252 key tiles.
  Plan g = plan_of(analyze(p));
  REQUIRE(g.global_keys.has_value());
  CHECK(g.global_keys->count == 248);
  CHECK(g.global_keys->prefix_table >= 0);
  CHECK(global_prefix(g, 119) == 0);
  CHECK(global_prefix(g, 123) == 4);  // its block's summary columns 120..123
  CHECK(global_prefix(g, 128) == 8);
  CHECK(global_prefix(g, 4095) == 248);
  CHECK(g.passes.at(0).max_runs == 1);
  int64_t g_tiles = 0;
  for (const PlanTile& t : g.passes[0].tiles) g_tiles += t.key_tiles;
  CHECK(g_tiles < 260);
  check_coverage(p, analyze(p));
  GeneratedModule m = fused_module(p, "sm_90a", "");
  REQUIRE(families(m) == std::vector{KernelFamily::Table});
  CHECK(std::get<TableTraits>(m.selection.fused[0].traits).global_keys);  // pass 0 walks the global keys
  CHECK(modular == 0);
  CHECK(key_tiles < 600);
  CHECK(plan.passes[0].max_runs <= 8);
}

// Keys every row keeps, scattered (the non-causal `fixed` pattern's summary columns: 8 of every
// 128 keys), are factored out: the items describe each row's own block without them (one run),
// and every row tile walks the 256 global keys from the table as 4 full key tiles.
TEST_CASE("plan factors out scattered global keys (fixed pattern)" * doctest::test_suite("cpu-model")) {
  Problem p = problem(R"({"fixed": {"block": 128, "summary": 8}})", 4096);
  Plan plan = plan_of(analyze(p));
  REQUIRE(plan.passes.size() == 1);
  REQUIRE(plan.global_keys.has_value());
  const PlanGlobalKeys& gk = *plan.global_keys;
  REQUIRE(gk.count == 256);
  CHECK(gk.runs.size() >= 8);
  for (const Run& r : gk.runs)
    for (int64_t k = 0; k < r.count; ++k) CHECK((r.start + k * r.stride) % 128 >= 120);
  CHECK(plan.passes[0].max_runs == 1);
  int64_t key_tiles = 0;
  for (const PlanTile& t : plan.passes[0].tiles) {
    key_tiles += t.key_tiles;
    int global_groups = 0;
    for (const PlanGroup& g : t.groups) {
      if (!g.all_rows) continue;
      ++global_groups;
      REQUIRE(g.walks.size() == 1);
      const KeyWalk& w = g.walks[0];
      CHECK(w.indexed);
      CHECK(w.count == 256);
      CHECK(w.full_begin == 0);
      CHECK(w.full_end == 4);
      CHECK(walk_key(plan, w, 0) == 120);
      CHECK(walk_key(plan, w, 8) == 248);
      CHECK(walk_key(plan, w, 255) == 4095);
    }
    CHECK(global_groups == 1);
  }
  // Each 64-row tile: its block's 120 keys in 2 tiles, the global keys in 4 (774 before).
  CHECK(key_tiles == 64 * 6);
  CHECK(plan.tile_fill() > 0.97);
  // The kernels: pass 0 walks the global keys (an indexed walk).
  check_coverage(p, analyze(p));
  GeneratedModule m = fused_module(p, "sm_90a", "");
  CHECK(gk.prefix_table < 0);  // every row keeps all of them
  REQUIRE(families(m) == std::vector{KernelFamily::Table});
  CHECK(std::get<TableTraits>(m.selection.fused[0].traits).global_keys);
  // Blocks of 8 keys every 128: the wgmma kernel loads them by TMA, 8 blocks per 3D box.
  REQUIRE(gk.blocks.has_value());
  CHECK(gk.blocks->first == 120);
  CHECK(gk.blocks->period == 128);
  CHECK(gk.blocks->width == 8);
  CHECK(engine0(m).tma);
  REQUIRE(m.tensor_maps.size() == 6);
  CHECK(m.tensor_maps[4].dims == std::vector<uint64_t>{64, 128, 16 * 4096 / 128});
  CHECK(m.tensor_maps[5].box == std::vector<uint32_t>{64, 8, 8});
  // Blocks of 6 keys (not a divisor of 64) are gathered by cp.async.
  Problem r = problem(R"({"fixed": {"block": 100, "summary": 6}})", 2000);
  Plan rp = plan_of(analyze(r));
  REQUIRE(rp.global_keys.has_value());
  CHECK_FALSE(rp.global_keys->blocks.has_value());
  CHECK(fused_module(r, "sm_90a", "").tensor_maps.empty());
  // More than 256 global keys: rows are cut run by run (a different path in the plan).
  for (bool causal : {false, true}) {
    Problem b = parse_problem_text(std::string(R"({"seq_len": 1100, "head_dim": 16, "causal": )") + (causal ? "true" : "false") +
                                       R"(, "pattern": {"fixed": {"block": 16, "summary": 5}}})",
                                   "test");
    Plan bp = plan_of(analyze(b));
    REQUIRE(bp.global_keys.has_value());
    CHECK(bp.global_keys->count > 256);
    // Causal: the last 128 rows' summary columns are kept by too few rows to be global keys.
    CHECK(bp.passes.at(0).max_runs <= (causal ? 5 : 1));
    check_coverage(b, analyze(b));
  }
  // A contiguous block of global keys stays in the walks (no factoring).
  Problem c = problem(R"({"union": [{"blocked": {"block": 128}}, {"global": {"tokens": [0, 1, 2, 3]}}]})", 2048);
  CHECK_FALSE(plan_of(analyze(c)).global_keys.has_value());
}

// With global keys factored out, the fused plan's items hold the rows without them; the pipeline
// (which walks the ACSR itself) gets its own items for the ACSR's tabulated segments, whose table
// words must give back every row of those segments.
TEST_CASE("pipeline's tabulated segments keep their own table when the plan has global keys" * doctest::test_suite("cpu-model")) {
  Problem p = load_problem(std::string(TRSPLAT_SOURCE_DIR) + "/tests/gpu/global-strided-bf16.json");
  Acsr a = analyze(p);
  CodegenOptions co;
  co.arch = "sm_90a";
  GeneratedModule m = generate(p, a, co);
  REQUIRE(m.plan.global_keys.has_value());
  const size_t at = m.source.find("__device__ const Item kPipeItems[] = {");
  REQUIRE(at != std::string::npos);
  std::istringstream lines(m.source.substr(at));
  std::string line;
  std::getline(lines, line);
  int segments = 0;
  while (std::getline(lines, line) && line.rfind("  {", 0) == 0) {
    long long rb, re, rs, rp, rr, si;
    REQUIRE(std::sscanf(line.c_str(), "  {%lld, %lld, %lld, 0, 0, 1, 0, 0, 1, 1, %lld, %lld},  // segment %lld", &rb, &re, &rs, &rp,
                        &rr, &si) == 6);
    const Segment& sg = a.segments.at(static_cast<size_t>(si));
    CHECK(sg.tabulated);
    CHECK(sg.row_begin == rb);
    for (long long i = rb, x = 0; i < re; i += rs, ++x) {
      std::vector<Run> got;
      for (int32_t k = m.table.at(static_cast<size_t>(rp + x)); k < m.table.at(static_cast<size_t>(rp + x + 1)); ++k) {
        const size_t w = static_cast<size_t>(rr + 3 * k);
        if (m.table.at(w + 2) > 0) got.push_back({m.table[w], m.table[w + 1], m.table[w + 2]});
      }
      CHECK(got == a.row(i));
    }
    ++segments;
  }
  CHECK(segments > 0);
  CHECK(m.source.find("kSegRuns, kPipeItems, table") != std::string::npos);
}

// The plan marks the key tiles that need no mask. Window 256/256 with 64-row and 64-key tiles: the
// rows [r, r + 64) of an interior tile walk keys [r - 256, r + 320) in 9 tiles; tile t holds keys
// r - 256 + 64t .. + 63, kept by every row exactly for t = 1 .. 7. Blocked 128 (aligned): every
// tile is full. Dilated (phase-regrouped, lattice walks) as the window. The CPU model (test_cpu_model)
// checks every marked tile of every test pattern against the mask.
TEST_CASE("plan marks full key tiles (window, blocked, dilated)" * doctest::test_suite("cpu-model")) {
  auto interior = [](const Plan& plan) -> const KeyWalk& {
    for (const PlanTile& t : plan.passes[0].tiles)
      if (t.m_begin == 512) return t.groups.at(0).walks.at(0);  // rows phase + period * [512, 576)
    FAIL("no tile starting at m = 512");
    return plan.passes[0].tiles[0].groups[0].walks[0];
  };
  {
    Plan plan = plan_of(analyze(problem(R"({"window": {"left": 256, "right": 256}})", 2048)));
    // The first tile (rows 0..63) is masked only where rows start their runs.
    const KeyWalk& w = interior(plan);
    CHECK(w.count == 576);
    CHECK(w.full_begin == 1);
    CHECK(w.full_end == 8);
  }
  {
    Plan plan = plan_of(analyze(problem(R"({"blocked": {"block": 128}})", 2048)));
    for (const PlanTile& t : plan.passes[0].tiles)
      for (const PlanGroup& g : t.groups)
        for (const KeyWalk& w : g.walks) {
          CHECK(w.full_begin == 0);
          CHECK(w.full_end == w.count / 64);
        }
  }
  {
    // j = i + 2k, |k| <= 256: rows i0 + 2a (a < 64) of one parity walk keys i0 - 512 + 2u, and
    // row a keeps u in [a, a + 512]: 576 keys, tiles 1 .. 7 full as for the window.
    Plan plan = plan_of(analyze(problem(R"({"dilated": {"left": 256, "right": 256, "dilation": 2}})", 4096)));
    REQUIRE(plan.passes[0].period == 2);
    const KeyWalk& w = interior(plan);
    CHECK(w.step == 2);
    CHECK(w.count == 576);
    CHECK(w.full_begin == 1);
    CHECK(w.full_end == 8);
  }
}

// pass_unmasked against brute force: a pass is unmasked exactly when every (real row, key) of every
// key tile of every walk is kept (no zero-filled padding keys either). 64-aligned BigBird and
// blocks are; windows, ragged blocks and ragged BigBird are not. 128-key tiles need walks of whole
// 128-key tiles.
TEST_CASE("pass_unmasked: every key tile full, against brute force") {
  struct Case {
    const char* pattern;
    int64_t L;
    bool want64, want128;
  };
  const char* bigbird = R"({"union": [{"block_window": {"block": 64, "left": 1, "right": 1}},
      {"global": {"tokens": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24,
       25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52,
       53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]}},
      {"random_blocks": {"block": 64, "per_row": 3, "seed": 0}}]})";
  for (const Case& c : std::vector<Case>{{bigbird, 2048, true, false},
                                         {R"({"blocked": {"block": 128}})", 1024, true, true},
                                         {R"({"blocked": {"block": 64}})", 1024, true, false},
                                         {R"({"blocked": {"block": 100}})", 1000, false, false},
                                         {R"({"window": {"left": 256, "right": 256}})", 2048, false, false},
                                         {R"({"union": [{"block_window": {"block": 64, "left": 1, "right": 1}}, {"global": {"tokens": [0, 1, 2, 999]}},
                                               {"random_blocks": {"block": 64, "per_row": 3, "seed": 5}}]})", 2000, false, false}}) {
    CAPTURE(c.pattern);
    Problem p = problem(c.pattern, c.L);
    Plan plan = plan_of(analyze(p));
    REQUIRE(plan.passes.size() == 1);
    const PlanPass& pass = plan.passes[0];
    bool brute = true;
    for (const PlanTile& t : pass.tiles) {
      const std::vector<int64_t> rows = tile_rows(plan, pass, t);
      for (const PlanGroup& g : t.groups)
        for (const KeyWalk& w : g.walks)
          for (int64_t u = 0; u < (w.count + 63) / 64 * 64; ++u)
            for (int64_t i : rows)
              if (i >= 0) brute = brute && u < w.count && kept(p, i, w.base + u * w.step);
    }
    CHECK(pass_unmasked(pass, 64) == brute);
    CHECK(pass_unmasked(pass, 64) == c.want64);
    CHECK(pass_unmasked(pass, 128) == c.want128);
  }
}

// An unmasked pass compiles without run bounds or masks (NOMASK; one run per row in the template),
// on every table engine; a masked one keeps them. BigBird's five runs per row then no longer cost the
// wgmma kernel its fourth block per SM, nor Q its registers.
TEST_CASE("unmasked passes get the NOMASK table kernel" * doctest::test_suite("nvrtc")) {
  const auto gen = [](const Problem& p, const std::string& arch, const std::string& tune = "") {
    return fused_module(p, arch, tune);
  };
  const auto bigbird = [](int first_block) {
    std::string tokens = "[";
    for (int k = 0; k < 64; ++k) tokens += (k ? ", " : "") + std::to_string(k);
    tokens += "]";
    return R"({"union": [{"block_window": {"block": )" + std::to_string(first_block) +
           R"(, "left": 1, "right": 1}}, {"global": {"tokens": )" + tokens +
           R"(}}, {"random_blocks": {"block": 64, "per_row": 4, "seed": 0}}]})";
  };
  // 64-aligned blocks: every key tile full.
  Problem b = problem(bigbird(64), 4096);
  Plan plan = plan_of(analyze(b));
  REQUIRE(plan.passes[0].max_runs >= 3);
  GeneratedModule m = gen(b, "sm_90a");
  REQUIRE(families(m) == std::vector{KernelFamily::Table, KernelFamily::Combine});
  const TableTraits& t = std::get<TableTraits>(m.selection.fused[0].traits);
  CHECK(t.unmasked);
  CHECK(t.runs == 1);
  CHECK(t.first);
  CHECK(t.last);
  // No run bounds in registers: 4 blocks per SM, Q in registers (two K/V stages of 64 x 64 only).
  CHECK(engine0(m).min_blocks == 4);
  CHECK_FALSE(engine0(m).q_shared);
  CHECK(m.fused[0].smem_dynamic == 2 * 2 * 64 * 64 * 2 + 1024);
  // Blocks of 48 keys: masked, the rows' run bounds in registers (3 blocks per SM, Q in shared memory).
  Problem r = problem(bigbird(48), 4096);
  Plan rplan = plan_of(analyze(r));
  GeneratedModule m0 = gen(r, "sm_90a");
  const TableTraits& t0 = std::get<TableTraits>(m0.selection.fused[0].traits);
  CHECK_FALSE(t0.unmasked);
  CHECK(t0.runs == rplan.passes[0].max_runs);
  CHECK(rplan.passes[0].max_runs >= 3);
  CHECK(engine0(m0).min_blocks == 3);
  CHECK(engine0(m0).q_shared);
  CHECK(m0.fused[0].smem_dynamic == (2 * 2 + 1) * 64 * 64 * 2 + 1024);
  // Windows are masked at their edges (the table kernel: sm_80).
  CHECK_FALSE(std::get<TableTraits>(gen(problem(R"({"window": {"left": 256, "right": 256}})", 4096), "sm_80")
                                        .selection.fused[0]
                                        .traits)
                  .unmasked);
  // Every engine compiles the NOMASK pass.
  for (const auto& [arch, tune, dtype] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"sm_90a", "", "bf16"}, {"sm_90a", "qs=1", "fp16"}, {"sm_80", "", "bf16"}, {"sm_80", "", "fp32"},
           {"sm_80", "", "tf32"}}) {
    CAPTURE(arch);
    CAPTURE(tune);
    CAPTURE(dtype);
    GeneratedModule x = gen(problem(bigbird(64), 2048, dtype), arch, tune);
    CHECK(std::get<TableTraits>(x.selection.fused[0].traits).unmasked);
    check_cubin(x, arch);
  }
}

// Bands with global tokens (Longformer): tokens [0, G), G <= 64, rows and keys, with a unit-step
// window; anything else is not one.
TEST_CASE("find_band_global recognises windows with leading global tokens, and nothing else") {
  auto globals = [](int n, int from = 0) {
    std::string s = "[";
    for (int k = 0; k < n; ++k) s += (k ? ", " : "") + std::to_string(from + k);
    return s + "]";
  };
  auto lf = [&](int left, int right, const std::string& tokens) {
    return R"({"union": [{"window": {"left": )" + std::to_string(left) + R"(, "right": )" + std::to_string(right) +
           R"(}}, {"global": {"tokens": )" + tokens + "}}]}";
  };
  struct Case {
    std::string pat;
    int64_t L;
    bool band;
    int64_t lo, hi, g;
  };
  for (const Case& c : std::vector<Case>{{lf(256, 256, globals(16)), 4096, true, -256, 256, 16},
                                         {lf(40, 17, globals(1)), 333, true, -40, 17, 1},
                                         {lf(100, 0, globals(64)), 1000, true, -100, 0, 64},
                                         {lf(0, 30, globals(5)), 500, true, 0, 30, 5},
                                         {lf(3, 3, globals(64)), 200, true, -3, 3, 64},
                                         {lf(256, 256, globals(65)), 4096, false, 0, 0, 0},
                                         {lf(256, 256, globals(16, 1)), 4096, false, 0, 0, 0},
                                         {lf(256, 256, "[0, 1, 2, 999]"), 4096, false, 0, 0, 0},
                                         {R"({"union": [{"dilated": {"left": 9, "right": 9, "dilation": 2}}, {"global": {"tokens": [0, 1]}}]})", 512, false, 0, 0, 0},
                                         {R"({"window": {"left": 256, "right": 256}})", 4096, false, 0, 0, 0},
                                         {R"({"union": [{"blocked": {"block": 64}}, {"global": {"tokens": [0, 1]}}]})", 512, false, 0, 0, 0}}) {
    CAPTURE(c.pat);
    CAPTURE(c.L);
    const std::optional<BandWithGlobals> found = find_band_with_globals(analyze(problem(c.pat, c.L)));
    REQUIRE(found.has_value() == c.band);
    const StructureKind kind = analyze_structure(analyze(problem(c.pat, c.L))).kind;
    if (!c.band) {
      CHECK_FALSE(std::holds_alternative<BandWithGlobals>(kind));
      continue;
    }
    REQUIRE(std::holds_alternative<BandWithGlobals>(kind));
    const Band& b = found->band;
    CHECK(b.dilation == 1);
    CHECK(b.k_lo == c.lo);
    CHECK(b.k_hi == c.hi);
    CHECK(found->globals == c.g);
    CHECK(std::get<BandWithGlobals>(kind).globals == c.g);
  }
}

// A band with globals on sm_90a: one kernel whose first blocks run the plan's pass restricted to
// the first row tile (split-KV chunks) and whose other blocks run the band kernel with G, then the
// chunks' combine; on other targets the plain table kernel.
TEST_CASE("bands with global tokens get the table pass for row tile 0 and the band kernel for the rest" * doctest::test_suite("nvrtc")) {
  const auto gen = [](const Problem& p, const std::string& arch) { return fused_module(p, arch, ""); };
  std::string tokens = "[";
  for (int k = 0; k < 16; ++k) tokens += (k ? ", " : "") + std::to_string(k);
  tokens += "]";
  Problem lf = problem(R"({"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": )" + tokens + "}}]}", 16384);
  GeneratedModule m = gen(lf, "sm_90a");
  REQUIRE(families(m) == std::vector{KernelFamily::BandWithGlobals, KernelFamily::Combine});
  CHECK(m.fused[0].name == "splat_fused_p0");
  CHECK(m.fused[1].name == "splat_fused_p0_combine");
  // The combine is a programmatic dependent launch (it waits before reading the chunks' states),
  // which the pass lets start.
  CHECK(!m.fused[0].programmatic);
  CHECK(m.fused[1].programmatic);
  CHECK(m.selection.fused[0].launch_dependents);
  const PlanPass& pass = m.plan.passes.at(0);
  const BandWithGlobalsTraits& t = std::get<BandWithGlobalsTraits>(m.selection.fused[0].traits);
  CHECK(t.globals == 16);
  CHECK(t.band.band == Band{1, -256, 256, 16384});
  CHECK(t.band_engine.stages == 3);
  CHECK(t.band_engine.tma);
  // Blocks in launch order: the chunks of every head first (every tile of the restricted pass is
  // one), then the band's.
  CHECK(t.chunks_first);
  CHECK(t.chunks == static_cast<size_t>(pass.slots));
  CHECK(t.head_pass.tiles.size() == static_cast<size_t>(pass.slots));
  // Row tile 0's split-KV chunks, then 256 band row tiles.
  CHECK(t.band_grid == 256);
  CHECK(m.fused[0].grid_x == pass.slots + 256);
  CHECK(m.fused[0].smem_dynamic == 3 * 2 * 64 * 64 * 2 + 1024);  // the band's three stages
  // mma.sync (sm_80): the table pass and its combine, a plain launch.
  GeneratedModule x = gen(lf, "sm_80");
  CHECK(families(x) == std::vector{KernelFamily::Table, KernelFamily::Combine});
  CHECK(!x.fused[1].programmatic);
  CHECK(x.fused[0].grid_x == static_cast<int64_t>(x.plan.passes.at(0).tiles.size()));
  // Small sequences, no split tile: row tile 0 is one table tile, its blocks not reordered.
  Problem s = problem(R"({"union": [{"window": {"left": 40, "right": 17}}, {"global": {"tokens": [0, 1, 2]}}]})", 333);
  s.heads = s.kv_heads = 64;  // enough blocks: no split to fill the GPU
  GeneratedModule ms = gen(s, "sm_90a");
  REQUIRE(families(ms) == std::vector{KernelFamily::BandWithGlobals});
  CHECK(ms.plan.passes.at(0).splits.empty());
  CHECK_FALSE(std::get<BandWithGlobalsTraits>(ms.selection.fused[0].traits).chunks_first);
  CHECK(ms.fused[0].role.find("global tokens") != std::string::npos);
  CHECK(ms.fused[0].grid_x == 1 + 6);  // row tile 0, then row tiles 1..5 of the band (blocks of t = 0 return)
  for (const GeneratedModule* g : {&m, &ms}) check_cubin(*g, "sm_90a");
}

TEST_SUITE_END();
