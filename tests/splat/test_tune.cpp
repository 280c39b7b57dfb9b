// The tuning cache (compile/tuning_cache.h: key, file, merge, precedence) and the tuner's candidates
// (tune/tune.h: tuning_candidates). No GPU.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <unistd.h>

#include "libsplat/analysis/analysis.h"
#include "libsplat/compile/tuning_cache.h"
#include "libsplat/tune/tune.h"

TEST_SUITE_BEGIN("unit");

namespace fs = std::filesystem;
using namespace splat;

namespace {

Problem window(const std::string& dtype, int64_t hd, int64_t len = 512) {
  return parse_problem_text(R"({"name": "w", "seq_len": )" + std::to_string(len) + R"(, "head_dim": )" + std::to_string(hd) +
                                R"(, "heads": 2, "dtype": ")" + dtype + R"(", "pattern": {"window": {"left": 64, "right": 64}}})",
                            "w");
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("splat_tune_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

void write(const fs::path& f, const std::string& text) { std::ofstream(f, std::ios::binary) << text; }

std::string read(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TuningEntry entry(const std::string& tuning, double us) {
  TuningEntry e;
  e.tuning = tuning;
  e.time_us = us;
  e.default_us = 50;
  e.date = "2026-12-03T08:00:00Z";
  e.problem = "w";
  return e;
}

std::vector<std::string> labels(const CandidateSet& c) {
  std::vector<std::string> out;
  for (const KernelTuning& t : c.tunings) out.push_back(format_tuning(t));
  return out;
}

}  // namespace

TEST_CASE("tuning cache key: the parsed problem, not the file's text") {
  const Problem a = parse_problem_text(
      R"({"name": "a", "seq_len": 512, "head_dim": 64, "dtype": "bf16",
          "pattern": {"union": [{"window": {"left": 8, "right": 8}}, {"global": {"tokens": [0, 3]}}]}})", "a");
  // Other whitespace, key order, name, the union's children swapped, tokens unsorted: the same problem.
  const Problem b = parse_problem_text(
      R"({"pattern":{"union":[{"global":{"tokens":[3,0]}},{"window":{"right":8,"left":8}}]},"dtype":"bf16",
          "head_dim":64,"seq_len":512,"name":"other"})", "b");
  CHECK(canonical_problem(a) == canonical_problem(b));
  CHECK(tuning_key(a, "sm_90a") == tuning_key(b, "sm_90a"));
  CHECK(tuning_key(a, "sm_90a").size() == 64);
  // Anything that changes the kernels changes the key: dtype, head_dim, arch, the pattern, sizes.
  Problem c = a;
  c.dtype = DType::FP16;
  CHECK(tuning_key(c, "sm_90a") != tuning_key(a, "sm_90a"));
  c = a;
  c.head_dim = 128;
  CHECK(tuning_key(c, "sm_90a") != tuning_key(a, "sm_90a"));
  CHECK(tuning_key(a, "sm_90") != tuning_key(a, "sm_90a"));
  c = a;
  c.pattern.children[0].right = 9;
  CHECK(tuning_key(c, "sm_90a") != tuning_key(a, "sm_90a"));
  c = a;
  c.heads = 4;
  CHECK(tuning_key(c, "sm_90a") != tuning_key(a, "sm_90a"));
  // --dtype / --head-dim overrides give the key of the problem they make.
  const fs::path dir = scratch("override");
  write(dir / "p.json", R"({"seq_len": 512, "head_dim": 32, "dtype": "fp32",
                            "pattern": {"union": [{"window": {"left": 8, "right": 8}}, {"global": {"tokens": [0, 3]}}]}})");
  ProblemOverrides over;
  over.dtype = DType::BF16;
  over.head_dim = 64;
  const Problem d = load_problem((dir / "p.json").string(), {}, over);
  CHECK(d.dtype == DType::BF16);
  CHECK(d.head_dim == 64);
  CHECK(d.scale == doctest::Approx(0.125));
  CHECK(tuning_key(d, "sm_90a") == tuning_key(a, "sm_90a"));
  over.head_dim = 0;
  CHECK_THROWS_WITH(load_problem((dir / "p.json").string(), {}, over), doctest::Contains("--head-dim"));
  fs::remove_all(dir);
}

TEST_CASE("tuning cache: round trip, merge, atomic write") {
  const fs::path dir = scratch("roundtrip");
  const std::string file = (dir / "sub" / "tuning.json").string();  // the folder is created
  const std::string k1(64, 'a'), k2(64, 'b');
  TuningCache u;
  u.entries[k1] = entry("stages=3,qs=0", 40.5);
  merge_tuning_cache(file, u, false);
  TuningCache c = load_tuning_cache(file);
  REQUIRE(c.find(k1));
  CHECK(c.find(k1)->tuning == "stages=3,qs=0");
  CHECK(c.find(k1)->time_us == 40.5);
  CHECK(c.find(k1)->default_us == 50);
  CHECK(c.find(k1)->date == "2026-12-03T08:00:00Z");
  CHECK(nlohmann::json::parse(read(file))["schema_version"] == kTuningCacheSchema);
  // Merge: another entry keeps the first; the same key replaces it; "" (the defaults won) is kept.
  TuningCache v;
  v.entries[k2] = entry("", 48);
  merge_tuning_cache(file, v, false);
  v.entries.clear();
  v.entries[k1] = entry("mw=16", 39);
  merge_tuning_cache(file, v, false);
  c = load_tuning_cache(file);
  CHECK(c.entries.size() == 2);
  CHECK(c.find(k1)->tuning == "mw=16");
  REQUIRE(c.find(k2));
  CHECK(c.find(k2)->tuning.empty());
  for (const auto& e : fs::directory_iterator(dir / "sub")) CHECK(e.path().filename() == "tuning.json");  // no temporary
  // A missing file is an empty cache, or an error when it must exist.
  CHECK(load_tuning_cache((dir / "none.json").string()).entries.empty());
  CHECK_THROWS_WITH(load_tuning_cache((dir / "none.json").string(), false), doctest::Contains("no such file"));
  fs::remove_all(dir);
}

TEST_CASE("tuning cache: a bad file is a located error, replaced only when asked") {
  const fs::path dir = scratch("bad");
  const fs::path f = dir / "tuning.json";
  const auto fails = [&](const std::string& text, const std::string& what) {
    write(f, text);
    CAPTURE(text);
    CHECK_THROWS_AS(load_tuning_cache(f.string()), Error);
    CHECK_THROWS_WITH(load_tuning_cache(f.string()), doctest::Contains(what.c_str()));
    CHECK_THROWS_WITH(load_tuning_cache(f.string()), doctest::Contains(f.string().c_str()));
  };
  fails("{\n  \"schema_version\": 1,\n  \"entries\": {,\n}", f.string() + ":3:");  // line:col of the syntax error
  fails("[]", "not a JSON object");
  fails(R"({"entries": {}})", "schema_version");
  fails(R"({"schema_version": 99, "entries": {}})", "schema 1, the file has 99");
  fails(R"({"schema_version": 1})", "entries");
  fails(R"({"schema_version": 1, "entries": {"xyz": {}}})", "entries.xyz: the key is not a SHA-256");
  const std::string k(64, 'c');
  fails(R"({"schema_version": 1, "entries": {")" + k + R"(": {"tuning": "mw=24", "time_us": 1, "default_us": 1}}})",
        "entries." + k + ".tuning: tuning: mw must be 16 or 32");
  fails(R"({"schema_version": 1, "entries": {")" + k + R"(": {"tuning": "", "default_us": 1}}})", ".time_us: missing");
  CHECK_THROWS_WITH(load_tuning_cache(dir.string()), doctest::Contains("directory"));
  // Writing over a bad file: refused (and the file left as it was) unless replace_bad.
  TuningCache u;
  u.entries[k] = entry("qs=1", 10);
  write(f, "not json");
  CHECK_THROWS_AS(merge_tuning_cache(f.string(), u, false), Error);
  CHECK(read(f) == "not json");
  merge_tuning_cache(f.string(), u, true);
  CHECK(load_tuning_cache(f.string()).find(k)->tuning == "qs=1");
  fs::remove_all(dir);
}

TEST_CASE("tuning precedence: --tune, then the cache, then the defaults") {
  const Problem p = window("bf16", 64);
  TuningCache cache;
  cache.entries[tuning_key(p, "sm_90a")] = entry("stages=2,qs=1", 30);
  const TuningCacheRef ref{&cache, "/x/tuning.json"};
  ResolvedTuning r = resolve_tuning(p, "sm_90a", std::nullopt, ref);
  CHECK(format_tuning(r.tuning) == "stages=2,qs=1");
  CHECK(r.source == "cache /x/tuning.json");
  CHECK(r.entry != nullptr);
  r = resolve_tuning(p, "sm_90a", parse_tuning("minb=3"), ref);  // --tune wins
  CHECK(format_tuning(r.tuning) == "minb=3");
  CHECK(r.source == "--tune");
  r = resolve_tuning(p, "sm_90a", KernelTuning{}, ref);  // an explicit empty --tune: the defaults
  CHECK(r.tuning == KernelTuning{});
  CHECK(r.source == "--tune");
  r = resolve_tuning(p, "sm_80", std::nullopt, ref);  // no entry for this arch
  CHECK(r.tuning == KernelTuning{});
  CHECK(r.source == "default");
  CHECK(resolve_tuning(p, "sm_90a", std::nullopt, {}).source == "default");  // no cache
  cache.entries.begin()->second.tuning = "";  // the defaults won: still from the cache
  r = resolve_tuning(p, "sm_90a", std::nullopt, ref);
  CHECK(r.tuning == KernelTuning{});
  CHECK(r.source == "cache /x/tuning.json");
}

TEST_CASE("tuner candidates: the keys of the engine, the defaults first, no two alike") {
  // fp32 (3xTF32): minb and stages. Defaults: 2 stages, 2 blocks (255 registers, as 0 or 1 would be);
  // 3 stages: 1 block fits (shared memory), so minb=2 with it is 3 stages again.
  const Problem f32 = window("fp32", 64);
  CandidateSet c = tuning_candidates(f32, analyze(f32), "sm_90a");
  CHECK(c.engine == EngineKind::MmaTf32x3);
  CHECK(c.keys == std::vector<std::string>{"minb", "stages"});
  CHECK(labels(c) == std::vector<std::string>{"", "minb=3", "minb=4", "stages=3", "stages=3,minb=3", "stages=3,minb=4"});

  // wgmma (bf16 at head_dim 64 on sm_90a), a band kernel: qs, stages and minb only.
  const Problem b16 = window("bf16", 64);
  c = tuning_candidates(b16, analyze(b16), "sm_90a");
  CHECK(c.engine == EngineKind::Wgmma);
  CHECK(c.kernels == "band kernel");
  CHECK(c.keys == std::vector<std::string>{"qs", "stages", "minb"});
  std::vector<std::string> l = labels(c);
  CHECK(l.front().empty());
  // The band kernel's defaults: Q in registers, 3 stages, 4 blocks (128 registers).
  CHECK(std::count(l.begin(), l.end(), "qs=1") == 1);
  CHECK(std::count(l.begin(), l.end(), "qs=0") == 0);
  CHECK(std::count(l.begin(), l.end(), "stages=2") == 1);
  CHECK(std::count(l.begin(), l.end(), "stages=3") == 0);
  CHECK(std::count(l.begin(), l.end(), "minb=4") == 0);
  CHECK(l[1] == "qs=1");  // one key at a time, the most promising key first
  for (const KernelTuning& t : c.tunings) {
    CHECK(t.warp_rows == 0);
    CHECK(t.key_tile == 0);
  }
  // 3 keys of 2, 2 and 3 values: 12 distinct kernels (minb=4 is the default's 4 blocks).
  CHECK(l == std::vector<std::string>{"", "qs=1", "stages=2", "minb=2", "minb=3", "stages=2,qs=1", "minb=2,qs=1",
                                      "minb=3,qs=1", "stages=2,minb=2", "stages=2,minb=3", "stages=2,minb=2,qs=1",
                                      "stages=2,minb=3,qs=1"});

  // mma.sync (bf16 on sm_80): mw, minb, stages, bc; minb counts the blocks of the candidate's size.
  c = tuning_candidates(b16, analyze(b16), "sm_80");
  CHECK(c.engine == EngineKind::Mma);
  CHECK(c.keys == std::vector<std::string>{"mw", "minb", "stages", "bc"});
  l = labels(c);
  CHECK(l[1] == "mw=16");  // the window's default is 32 rows per warp
  CHECK(std::count(l.begin(), l.end(), "bc=128") == 1);
  for (const KernelTuning& t : c.tunings) {
    CAPTURE(format_tuning(t));
    const int rows = t.warp_rows > 0 ? t.warp_rows : 32;
    const std::vector<int> levels = rows == 16 ? std::vector<int>{2, 3, 4} : std::vector<int>{4, 6, 8};
    if (t.min_blocks >= 0) CHECK(std::count(levels.begin(), levels.end(), t.min_blocks) == 1);
    CHECK(t.q_shared == -1);
  }
  CHECK(std::count(l.begin(), l.end(), "mw=16,minb=2") == 1);  // 255 registers at 4 warps
  CHECK(std::count(l.begin(), l.end(), "minb=6") == 1);        // 168 registers at 2 warps

  // tf32: the same keys as fp32; no fused kernel (head_dim 42 in fp32): an error.
  const Problem t32 = window("tf32", 64);
  CHECK(tuning_candidates(t32, analyze(t32), "sm_90a").keys == std::vector<std::string>{"minb", "stages"});
  const Problem none = window("fp32", 42);
  CHECK_THROWS_AS(tuning_candidates(none, analyze(none), "sm_90a"), Error);
  CHECK(tuning_keys(EngineKind::CudaCores).empty());
}

TEST_CASE("tuner candidates: the decode engine against the tensor-core engines where it takes the problem") {
  const auto decode = [](const char* dtype) {
    return parse_problem_text(std::string(R"({"seq_len": 1, "kv_len": 20000, "q_offset": 19999, "head_dim": 64, "heads": 8,
        "kv_heads": 2, "causal": true, "pattern": {"window": {"left": 2047, "right": 0}}, "dtype": ")") + dtype + "\"}",
                              "decode");
  };
  // bf16: the tensor-core table pass by default; decode=1 the decode engine, decode=0 the defaults again.
  const Problem b16 = decode("bf16");
  CandidateSet c = tuning_candidates(b16, analyze(b16), "sm_90a");
  CHECK(c.engine == EngineKind::Wgmma);
  CHECK(c.keys.back() == "decode");
  std::vector<std::string> l = labels(c);
  CHECK(std::count(l.begin(), l.end(), "decode=1") == 1);
  CHECK(std::count(l.begin(), l.end(), "decode=0") == 0);
  for (const KernelTuning& t : c.tunings)
    if (t.decode == 1) CHECK(format_tuning(t) == "decode=1");  // the engine's other keys change nothing
  // fp32: the decode engine by default; decode=0 the 3xTF32 engine.
  const Problem f32 = decode("fp32");
  c = tuning_candidates(f32, analyze(f32), "sm_90a");
  CHECK(c.engine == EngineKind::Decode);
  CHECK(c.keys == std::vector<std::string>{"decode"});
  CHECK(labels(c) == std::vector<std::string>{"", "decode=0"});
  // A problem the decode engine does not take: no decode key.
  CHECK(tuning_candidates(window("bf16", 64), analyze(window("bf16", 64)), "sm_90a").keys ==
        std::vector<std::string>{"qs", "stages", "minb"});
}

namespace {

// A runner with scripted results: each candidate (by its tuning's text, "" the defaults) takes the
// times in `us` in turn (the last one repeats); `fails` fail their check, `broken` fail to compile.
struct ScriptedRunner : CandidateRunner {
  std::map<std::string, std::vector<double>> us;
  std::set<std::string> fails, broken;
  std::map<std::string, int> runs;
  std::string arch() const override { return "sm_90a"; }
  std::string device() const override { return "scripted"; }
  std::string set_problem(const Problem&, const Acsr&) override { return "none"; }
  CompiledFused compile(const Problem&, const Acsr&, const KernelTuning& t) const override {
    if (broken.count(format_tuning(t))) throw std::runtime_error("scripted compile error");
    CompiledFused c;
    c.image = format_tuning(t);
    return c;
  }
  KernelResult run(const CompiledFused& c) override {
    const int n = runs[c.image]++;
    const auto it = us.find(c.image);
    const double t = it == us.end() ? 100.0 : it->second[std::min<size_t>(static_cast<size_t>(n), it->second.size() - 1)];
    KernelResult k;
    k.kind = "fused";
    k.ran = true;
    k.ms_median = t * 1e-3;
    k.tolerance = 2e-2;
    k.rel_err = fails.count(c.image) ? 0.5 : 1e-3;
    k.pass = !fails.count(c.image);
    return k;
  }
};

const CandidateResult& candidate(const TuneResult& r, const std::string& tuning) {
  for (const CandidateResult& c : r.candidates)
    if (format_tuning(c.tuning) == tuning) return c;
  FAIL("no candidate " << tuning);
  return r.candidates.front();
}

}  // namespace

TEST_CASE("tuner decisions: failed candidates discarded, the margin, confirmation, budget") {
  const Problem p = window("bf16", 64);  // wgmma band kernel on sm_90a: 12 candidates
  TuneOptions o;
  o.compile_ahead = 3;
  SUBCASE("the fastest passing candidate beyond the margin wins; a failed one is discarded") {
    ScriptedRunner run;
    run.us = {{"", {100}}, {"qs=1", {90}}, {"stages=2", {97}}, {"minb=2", {95}}};
    run.fails = {"qs=1"};
    run.broken = {"minb=3"};
    const TuneResult r = tune_problem(run, p, o, 1e6);
    CHECK(r.candidates.size() == 12);
    CHECK(r.default_ok);
    CHECK(r.check_failures == 1);
    CHECK(candidate(r, "qs=1").status.rfind("FAIL", 0) == 0);
    CHECK(candidate(r, "minb=3").status == "not run: scripted compile error");
    CHECK(candidate(r, "stages=2").status == "pass");
    CHECK(format_tuning(r.winner) == "minb=2");
    REQUIRE(r.entry);
    CHECK(r.entry->tuning == "minb=2");
    CHECK(r.entry->time_us == 95);
    CHECK(r.entry->default_us == 100);
    CHECK(r.entry->arch == "sm_90a");
    CHECK(r.key == tuning_key(p, "sm_90a"));
    CHECK(run.runs["minb=2"] == 1 + o.confirm_rounds);  // confirmed, alternately with the defaults
    CHECK(run.runs[""] == 1 + o.confirm_rounds);
    CHECK(format_tune_result(r).find("winner: minb=2, 95.0 us against the defaults' 100.0 us") != std::string::npos);
  }
  SUBCASE("within the margin, or not confirmed: the defaults win, and that is recorded") {
    ScriptedRunner run;
    run.us = {{"", {100}}, {"stages=2", {98.5}}};
    TuneResult r = tune_problem(run, p, o, 1e6);
    CHECK(r.winner == KernelTuning{});
    REQUIRE(r.entry);
    CHECK(r.entry->tuning.empty());
    CHECK(run.runs[""] == 1);  // nothing to confirm
    run = ScriptedRunner{};
    run.us = {{"", {100}}, {"stages=2", {90, 100.5, 99.5}}};  // lucky once
    r = tune_problem(run, p, o, 1e6);
    CHECK(r.winner == KernelTuning{});
    REQUIRE(r.entry);
    CHECK(r.entry->tuning.empty());
    CHECK(r.decision.find("did not stay ahead") != std::string::npos);
  }
  SUBCASE("budget spent: the defaults alone, the rest skipped") {
    ScriptedRunner run;
    const TuneResult r = tune_problem(run, p, o, 0);
    CHECK(candidate(r, "").status == "pass");
    CHECK(std::count_if(r.candidates.begin(), r.candidates.end(),
                        [](const CandidateResult& c) { return c.status == "skipped: budget"; }) == 11);
    REQUIRE(r.entry);
    CHECK(r.entry->tuning.empty());
  }
  SUBCASE("the defaults fail: nothing is recorded") {
    ScriptedRunner run;
    run.fails = {""};
    const TuneResult r = tune_problem(run, p, o, 1e6);
    CHECK_FALSE(r.default_ok);
    CHECK_FALSE(r.entry);
    CHECK(run.runs.size() == 1);
  }
}
