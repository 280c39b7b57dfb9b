// Code generation: every emitted module compiles with NVRTC (no GPU needed), manifests are
// complete, and the plan covers every kept (row, key) exactly once.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/cpu_model.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/pattern/pattern.h"

namespace fs = std::filesystem;
using namespace splat;

namespace {

Problem problem(const std::string& pattern, int64_t L, const std::string& dtype = "bf16", int64_t d = 64) {
  std::string doc = R"({"seq_len": )" + std::to_string(L) + R"(, "head_dim": )" + std::to_string(d) +
                    R"(, "dtype": ")" + dtype + R"(", "pattern": )" + pattern + "}";
  return parse_problem_text(doc, "test");
}

// Every kept key of every row is visited exactly once by the plan.
void check_coverage(const Problem& p, const Acsr& a) {
  Plan plan = make_plan(a);
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

}  // namespace

TEST_CASE("plan covers each kept key once (window, dilated, strided, blocked, longformer, bigbird)") {
  for (const char* pat : {
           R"({"window": {"left": 37, "right": 20}})",
           R"({"dilated": {"left": 20, "right": 20, "dilation": 3}})",
           R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})",
           R"({"blocked": {"block": 48}})",
           R"({"union": [{"window": {"left": 30, "right": 30}}, {"global": {"tokens": [0, 1, 2, 77]}}]})",
           R"({"union": [{"block_window": {"block": 16, "left": 1, "right": 1}}, {"global": {"tokens": [0, 5]}},
                         {"random_blocks": {"block": 16, "per_row": 2, "seed": 3}}]})",
       }) {
    CAPTURE(pat);
    Problem p = problem(pat, 300);
    Acsr a = analyze(p);
    check_coverage(p, a);
  }
}

TEST_CASE("generated module compiles with NVRTC for sm_80 and sm_90") {
  Problem p = problem(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64}}]})", 1024);
  Acsr a = analyze(p);
  GeneratedModule m = generate(p, a);
  CHECK(m.fused.size() >= 1);
  CHECK(m.pipeline.size() == 3);
  for (const char* arch : {"sm_80", "sm_90"}) {
    CompileResult r = nvrtc_compile(m.source, "test.cu", arch, CompileTarget::Ptx);
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
TEST_CASE("every pattern in patterns/ compiles: PTX for sm_90, CUBIN for sm_80 (4k patterns)") {
  auto files = pattern_files();
  REQUIRE(!files.empty());
  for (const fs::path& f : files) {
    CAPTURE(f.string());
    Problem p = load_problem(f.string());
    GeneratedModule m = generate(p, analyze(p));
    CompileResult ptx = nvrtc_compile(m.source, p.name + ".cu", "sm_90", CompileTarget::Ptx);
    for (const KernelDesc& k : m.fused) CHECK(ptx.image.find(".entry " + k.name) != std::string::npos);
    for (const KernelDesc& k : m.pipeline) CHECK(ptx.image.find(".entry " + k.name) != std::string::npos);
    if (f.filename().string().find("-4k-") != std::string::npos) {
      CompileResult cubin = nvrtc_compile(m.source, p.name + ".cu", "sm_80", CompileTarget::Cubin);
      CHECK(cubin.image.size() > 1000);
    }
  }
}

TEST_CASE("manifests are complete") {
  Problem p = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / "patterns" / "longformer-4k-bf16.json").string());
  GeneratedModule m = generate(p, analyze(p));
  nlohmann::json j = manifest(p, m, "ptx", "sm_90", {"longformer-4k-bf16.ptx", "manifest.json"});
  for (const char* key : {"name", "pattern_hash", "target", "arch", "files", "problem", "parameters", "kernels",
                          "launch_order", "workspace_floats_per_bh", "scores_floats_per_bh", "table_words", "tile"})
    CHECK_MESSAGE(j.contains(key), key);
  CHECK(j["parameters"].size() == kernel_params().size());
  CHECK(j["pattern_hash"].get<std::string>().rfind("fnv1a64:", 0) == 0);
  for (const char* kind : {"fused", "pipeline"}) {
    REQUIRE(!j["kernels"][kind].empty());
    for (const auto& k : j["kernels"][kind]) {
      CHECK(k.contains("name"));
      CHECK(k["grid"].size() == 3);
      CHECK(k["block"][0].get<int>() > 0);
      CHECK(k.contains("shared_memory_dynamic_bytes"));
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
  Plan pd = make_plan(analyze(d));
  REQUIRE(pd.passes.size() == 1);
  CHECK(pd.passes[0].period == 2);
  CHECK(pd.tile_fill() > 0.6);
  Problem s = problem(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64}}]})", 4096);
  Plan ps = make_plan(analyze(s));
  REQUIRE(ps.passes.size() == 2);
  CHECK(ps.passes[1].period == 64);
  for (const PlanTile& t : ps.passes[1].tiles)
    for (const PlanGroup& g : t.groups)
      for (const KeyWalk& w : g.walks) CHECK(w.step == 64);  // gathered lattice: only kept keys
}

TEST_CASE("NVRTC errors carry the log; bad architectures are refused") {
  CHECK_THROWS_WITH_AS(nvrtc_compile("__global__ void f() { undefined_symbol(); }", "bad.cu", "sm_90", CompileTarget::Ptx),
                       doctest::Contains("bad.cu"), CompileError);
  CHECK_THROWS_AS(parse_arch("sm_70"), std::invalid_argument);
  CHECK_THROWS_AS(parse_arch("compute_90"), std::invalid_argument);
  CHECK(parse_arch("sm_90a") == 90);
}
