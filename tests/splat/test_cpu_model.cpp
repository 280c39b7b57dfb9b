// CPU model of the fused kernel (same plan: passes, row tiles, groups, walks, key tiles, split-KV
// chunks and their combine; online softmax in the same order) against brute-force attention over
// the pattern's own mask, in float64.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/columns.h"
#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/cpu_model.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/pattern/pattern.h"

TEST_SUITE_BEGIN("cpu-model");

using namespace splat;

namespace {

Problem small(const std::string& pattern, int64_t L, int64_t d) {
  std::string doc = R"({"seq_len": )" + std::to_string(L) + R"(, "head_dim": )" + std::to_string(d) +
                    R"(, "pattern": )" + pattern + "}";
  return parse_problem_text(doc, "model");
}

std::vector<double> brute(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                          const std::vector<double>& v) {
  const int64_t L = p.seq_len, KV = p.kv_len, D = p.head_dim;
  std::vector<double> o(static_cast<size_t>(L * D), 0.0);
  for (int64_t i = 0; i < L; ++i) {
    std::vector<std::pair<int64_t, double>> s;
    double mx = -INFINITY;
    for (int64_t j = 0; j < KV; ++j) {
      if (!kept(p, i, j)) continue;
      double dot = 0;
      for (int64_t x = 0; x < D; ++x) dot += q[static_cast<size_t>(i * D + x)] * k[static_cast<size_t>(j * D + x)];
      s.push_back({j, dot * p.scale});
      mx = std::max(mx, dot * p.scale);
    }
    double l = 0;
    for (auto& [j, x] : s) l += std::exp(x - mx);
    for (auto& [j, x] : s)
      for (int64_t y = 0; y < D; ++y)
        o[static_cast<size_t>(i * D + y)] += std::exp(x - mx) / l * v[static_cast<size_t>(j * D + y)];
  }
  return o;
}

// The plan of an ACSR, its structure analysed here.
Plan plan_of(const Acsr& a, const TileShape& shape = {}) { return make_plan(a, analyze_structure(a, shape.br), shape); }

// headroom: the lazy rescale of the bf16/fp16 kernels (8 in log2 units), or 0 (exact maxima).
// band: walk as the structure's closed-form kernels do (band_pass, lattice_pass).
double max_diff(const Problem& p, const TileShape& shape, double headroom = 0.0, bool checked = false,
                bool band = false) {
  Acsr a = analyze(p);
  Plan plan = plan_of(a, shape);
  const StructureKind kernels = band ? analyze_structure(a).kind : StructureKind{};
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n;
  auto fill = [&](int64_t rows) {
    std::vector<double> x(static_cast<size_t>(rows * p.head_dim));
    for (double& e : x) e = n(rng);
    return x;
  };
  auto q = fill(p.seq_len), k = fill(p.kv_len), v = fill(p.kv_len);
  auto got = cpu_model_attention(plan, p.head_dim, p.scale, q, k, v, headroom, checked, kernels);
  auto want = brute(p, q, k, v);
  double d = 0;
  for (size_t x = 0; x < got.size(); ++x) d = std::max(d, std::fabs(got[x] - want[x]));
  return d;
}

// Calls f on each GPU edge-case problem (tests/gpu/*.json; per-head patterns: on each head group);
// returns how many.
template <class F>
int for_each_gpu_problem(F f) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(TRSPLAT_SOURCE_DIR) / "tests" / "gpu")) {
    if (e.path().extension() != ".json") continue;
    const std::string name = e.path().string();
    CAPTURE(name);
    for (const Problem& p : head_group_problems(load_problem(name))) f(p);
    ++n;
  }
  return n;
}

// Every kept (row, key) visited exactly once by the band kernel's walk, as the plan's walk does.
void check_band_visits(const Problem& p, const Plan& plan, const StructureKind& kernels) {
  auto visits = cpu_model_visits(plan, kernels);
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<int64_t> got = visits[static_cast<size_t>(i)], want;
    std::sort(got.begin(), got.end());
    for (int64_t j = 0; j < p.kv_len; ++j)
      if (kept(p, i, j)) want.push_back(j);
    CHECK(got == want);
  }
}

}  // namespace

TEST_CASE("cpu model matches brute force: window, dilated, blocked (one pass)") {
  for (const char* pat : {R"({"window": {"left": 40, "right": 17}})",
                          R"({"dilated": {"left": 12, "right": 9, "dilation": 4}})", R"({"blocked": {"block": 50}})"}) {
    CAPTURE(pat);
    CHECK(max_diff(small(pat, 333, 16), {}) < 1e-12);
  }
}

// The band kernel's walk (band_pass): closed-form tiles per phase, key tiles from 64t + k_lo that
// may reach below key 0 or past the last key, masks from the band, full tiles unmasked (the model
// throws if a full tile holds a key some real row does not keep).
TEST_CASE("cpu model matches brute force: band walk (windows, causal, one-sided, dilated)") {
  struct Case {
    const char* pat;
    int64_t L;
  };
  for (const Case& c : {Case{R"({"window": {"left": 40, "right": 17}})", 333}, Case{R"({"window": {"left": 64, "right": 64}})", 512},
                        Case{R"({"window": {"left": 100, "right": 0}})", 300}, Case{R"({"window": {"left": 0, "right": 70}})", 257},
                        Case{R"({"window": {"left": 3, "right": 3}})", 200}, Case{R"({"window": {"left": 500, "right": 500}})", 130},
                        Case{R"({"dilated": {"left": 12, "right": 9, "dilation": 4}})", 332},
                        Case{R"({"dilated": {"left": 70, "right": 70, "dilation": 2}})", 400}}) {
    CAPTURE(c.pat);
    CAPTURE(c.L);
    Problem p = small(c.pat, c.L, 16);
    Plan plan = plan_of(analyze(p));
    const StructureKind kind = analyze_structure(analyze(p)).kind;
    REQUIRE(std::holds_alternative<Band>(kind));
    CHECK(max_diff(p, {}, 0.0, false, true) < 1e-12);
    // The lazy rescale and checked sums take the same path as with the plan's walk.
    CHECK(max_diff(p, {}, 8.0 * std::log(2.0), true, true) < 1e-12);
    check_band_visits(p, plan, kind);
  }
}

// Bands with global tokens (Longformer): the plan's tiles of the first row tile (split-KV chunks
// where they are heavy), then the band from row tile 1 with each row tile's key tile of global keys
// outside its rows' windows.
TEST_CASE("cpu model matches brute force: band walk with global tokens") {
  struct Case {
    const char* pat;
    int64_t L;
  };
  for (const Case& c : {Case{R"({"union": [{"window": {"left": 40, "right": 17}}, {"global": {"tokens": [0, 1, 2]}}]})", 333},
                        Case{R"({"union": [{"window": {"left": 20, "right": 20}}, {"global": {"tokens": [0, 1, 2, 3]}}]})", 1024},
                        Case{R"({"union": [{"window": {"left": 100, "right": 0}}, {"global": {"tokens": [0]}}]})", 700},
                        Case{R"({"union": [{"window": {"left": 0, "right": 70}}, {"global": {"tokens": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}}]})", 257},
                        Case{R"({"union": [{"window": {"left": 150, "right": 150}}, {"global": {"tokens": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                              10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36,
                              37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]}}]})", 900}}) {
    CAPTURE(c.pat);
    CAPTURE(c.L);
    Problem p = small(c.pat, c.L, 16);
    Plan plan = plan_of(analyze(p));
    const StructureKind kind = analyze_structure(analyze(p)).kind;
    REQUIRE(std::holds_alternative<BandWithGlobals>(kind));
    CHECK(max_diff(p, {}, 0.0, false, true) < 1e-12);
    CHECK(max_diff(p, {}, 8.0 * std::log(2.0), true, true) < 1e-12);
    p.scale *= 6;  // references move after the band's tiles (the global tile last): checks fail
    CHECK(max_diff(p, {}, 8.0 * std::log(2.0), true, true) < 1e-12);
    check_band_visits(p, plan, kind);
  }
}

// A window plus a key lattice (strided): the window's band walk, then the lattice walk
// (lattice_pass) on its own state, merged at the end; holes of one and several lattice points,
// ragged phases (rows per phase not a multiple of 64), a window joined to an adjacent lattice key.
TEST_CASE("cpu model matches brute force: window, then lattice (strided)") {
  struct Case {
    const char* pat;
    int64_t L, period, hole_lo, hole_hi;
  };
  for (const Case& c : {Case{R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64, "offset": 0}}]})", 1024, 64, 0, 0},
                        Case{R"({"union": [{"window": {"left": 20, "right": 20}}, {"strided": {"stride": 32, "offset": 0}}]})", 2048, 32, 0, 0},
                        Case{R"({"union": [{"window": {"left": 70, "right": 70}}, {"strided": {"stride": 32, "offset": 0}}]})", 4096, 32, -2, 2},
                        Case{R"({"union": [{"window": {"left": 100, "right": 10}}, {"strided": {"stride": 48, "offset": 0}}]})", 3360, 48, -2, 0},
                        Case{R"({"union": [{"strided": {"stride": 8, "offset": 0}}, {"window": {"left": 0, "right": 5}}]})", 1200, 8, 0, 0}}) {
    CAPTURE(c.pat);
    CAPTURE(c.L);
    Problem p = small(c.pat, c.L, 16);
    Plan plan = plan_of(analyze(p));
    const StructureKind kind = analyze_structure(analyze(p)).kind;
    REQUIRE(std::holds_alternative<WindowLattice>(kind));
    const Lattice& lat = std::get<WindowLattice>(kind).lattice;
    CHECK(lat.period == c.period);
    CHECK(lat.rows == c.L / c.period);
    CHECK(lat.hole_lo == c.hole_lo);
    CHECK(lat.hole_hi == c.hole_hi);
    CHECK(max_diff(p, {}, 0.0, false, true) < 1e-12);
    CHECK(max_diff(p, {}, 8.0 * std::log(2.0), true, true) < 1e-12);
    p.scale *= 6;  // the lattice's references move (checks fail), then the merge rescales both
    CHECK(max_diff(p, {}, 8.0 * std::log(2.0), true, true) < 1e-12);
    check_band_visits(p, plan, kind);
  }
}

TEST_CASE("find_band_lattice: only a window plus its phase's whole lattice" * doctest::test_suite("unit")) {
  auto has = [](const char* pat, int64_t L) {
    return std::holds_alternative<WindowLattice>(analyze_structure(analyze(small(pat, L, 16))).kind);
  };
  CHECK(has(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64, "offset": 0}}]})", 4096));
  // Rows per phase not whole (kv_len not a multiple of the stride), a shifted lattice, the lattice
  // alone, an extra global token, a dilated window: tables.
  CHECK_FALSE(has(R"({"union": [{"window": {"left": 63, "right": 63}}, {"strided": {"stride": 64, "offset": 0}}]})", 1000));
  CHECK_FALSE(has(R"({"union": [{"window": {"left": 10, "right": 10}}, {"strided": {"stride": 64, "offset": 5}}]})", 1024));
  CHECK_FALSE(has(R"({"strided": {"stride": 64, "offset": 0}})", 1024));
  CHECK_FALSE(has(R"({"union": [{"window": {"left": 10, "right": 10}}, {"strided": {"stride": 64, "offset": 0}}, {"global": {"tokens": [500]}}]})", 1024));
  CHECK_FALSE(has(R"({"union": [{"dilated": {"left": 10, "right": 10, "dilation": 2}}, {"strided": {"stride": 64, "offset": 0}}]})", 1024));
  CHECK_FALSE(has(R"({"window": {"left": 10, "right": 10}})", 1024));
}

TEST_CASE("cpu model: the band walk needs a band") {
  // No band recognised: the kernels' walk is the plan's.
  Problem p = small(R"({"blocked": {"block": 50}})", 200, 16);
  const Structure st = analyze_structure(analyze(p));
  CHECK(std::holds_alternative<Unstructured>(st.kind));
  Plan plan = plan_of(analyze(p));
  CHECK(cpu_model_visits(plan, st.kind) == cpu_model_visits(plan));
}

TEST_CASE("cpu model matches brute force: strided lattice (two passes, state hand-over)") {
  Problem p = small(R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})", 400, 16);
  Plan plan = plan_of(analyze(p));
  CHECK(plan.passes.size() == 2);
  CHECK(max_diff(p, {}) < 1e-12);
}

TEST_CASE("cpu model matches brute force: global rows split into chunks (split-KV + combine)") {
  Problem p = small(R"({"union": [{"window": {"left": 20, "right": 20}}, {"global": {"tokens": [0, 1, 2, 3]}}]})", 1024, 16);
  Plan plan = plan_of(analyze(p));
  int slots = 0;
  for (const PlanPass& pass : plan.passes) slots += pass.slots;
  CHECK(slots > 1);
  CHECK(max_diff(p, {}) < 1e-12);
}

// Few row tiles against long rows of keys (decode, chunked prefill): with batch*heads known, every
// tile is cut into chunks until a pass has about kFillBlocks blocks.
TEST_CASE("cpu model matches brute force: few rows split to fill the GPU (decode, chunked prefill)") {
  const std::string doc = R"({"seq_len": 3, "kv_len": 2000, "q_offset": 1997, "head_dim": 16, "heads": 4, "causal": true,
      "pattern": {"union": [{"window": {"left": 900, "right": 0}}, {"global": {"tokens": [0, 1, 2, 40]}}]}})";
  Problem p = parse_problem_text(doc, "decode");
  TileShape fill;
  fill.batch_heads = 4;
  Plan plan = plan_of(analyze(p), fill);
  REQUIRE(plan.passes.size() == 1);
  // 15 key tiles of 64 (901 window keys + 4 global ones), 66 chunks wanted for 264 blocks: chunks
  // of the minimum, 4 key tiles.
  CHECK(plan.passes[0].slots == 4);
  CHECK(plan.passes[0].tiles.size() == 4);
  CHECK(plan_of(analyze(p)).passes[0].slots == 0);  // heads unknown: no split
  CHECK(max_diff(p, fill) < 1e-12);
  // Many heads: enough blocks without splitting.
  fill.batch_heads = 512;
  CHECK(plan_of(analyze(p), fill).passes[0].slots == 0);
}

// Scattered keys every row keeps, factored out of the items (Plan::globals) and walked from the
// table by every tile of the first pass: the `fixed` pattern (ragged blocks), and a window with
// scattered global tokens (global rows keep every key) over a strided lattice (two passes).
TEST_CASE("cpu model matches brute force: global keys factored out of the plan") {
  struct Case {
    const char* pattern;
    bool factored;
  };
  for (const Case& c : {Case{R"({"fixed": {"block": 50, "summary": 6}})", true},
                        Case{R"({"union": [{"window": {"left": 9, "right": 9}}, {"strided": {"stride": 40}},
                                          {"global": {"tokens": [0, 1, 5, 333]}}]})", true},
                        // Scattered tokens with many different gaps (more run strides than the
                        // key counts' difference arrays take): every row keeps them, but the
                        // token rows' remaining keys would cost more than the plan saves.
                        Case{R"({"global": {"tokens": [0, 5, 13, 22, 26, 39, 52, 56, 65, 73, 78, 90, 91, 104, 107, 117,
                                                       124, 130, 141, 143, 156, 158, 169, 175, 182, 192, 195, 208, 209]}})",
                             false}}) {
    CAPTURE(c.pattern);
    Problem p = small(c.pattern, 520, 16);
    const Plan plan = plan_of(analyze(p));
    CHECK(plan.global_keys.has_value() == c.factored);
    CHECK(max_diff(p, {}) < 1e-12);
    CHECK(max_diff(p, {128, 64}) < 1e-12);
  }
  // Causal: each row keeps the summary columns before it, a prefix of the global keys; blocks of 48
  // rows, so that a 64-row tile's rows keep prefixes of different lengths.
  Problem c = parse_problem_text(
      R"({"seq_len": 700, "head_dim": 16, "causal": true, "pattern": {"fixed": {"block": 48, "summary": 5}}})", "c");
  const Plan plan = plan_of(analyze(c));
  REQUIRE(plan.global_keys.has_value());
  CHECK(plan.global_keys->prefix_table >= 0);
  CHECK(global_prefix(plan, 0) == 0);
  CHECK(global_prefix(plan, 699) > global_prefix(plan, 300));
  CHECK(max_diff(c, {}) < 1e-12);
  CHECK(max_diff(c, {128, 64}) < 1e-12);
}

TEST_CASE("cpu model matches brute force: random blocks, causal, 128-row tiles") {
  Problem p = small(R"({"union": [{"block_window": {"block": 16, "left": 1, "right": 0}},
                                  {"random_blocks": {"block": 16, "per_row": 2, "seed": 11}}]})", 300, 16);
  CHECK(max_diff(p, {}) < 1e-12);
  CHECK(max_diff(p, {128, 64}) < 1e-12);
  Problem c = parse_problem_text(
      R"({"seq_len": 260, "head_dim": 16, "causal": true, "pattern": {"window": {"left": 70, "right": 70}}})", "c");
  CHECK(max_diff(c, {}) < 1e-12);
}

// The GPU edge-case problems (scripts/check-gpu): ragged sizes, kv_len != seq_len, causal, head
// dims 32..128, the fixed pattern's lattice groups; the plan the GPU kernels walk is right for each.
TEST_CASE("cpu model matches brute force on the GPU edge-case problems (tests/gpu)") {
  int bands = 0, lattices = 0;
  CHECK(for_each_gpu_problem([&](const Problem& p) {
          CHECK(max_diff(p, {}) < 1e-11);
          // The plan codegen makes: few blocks (batch*heads x row tiles) split into split-KV chunks.
          TileShape fill;
          fill.batch_heads = p.batch * served_heads(p);
          CHECK(max_diff(p, fill) < 1e-11);
          // Bands (the band kernel's walk too): ragged, causal, one-sided, wider than the sequence, dilated;
          // windows plus lattices (the band kernel's, then lattice_pass's walk).
          const StructureKind kind = analyze_structure(analyze(p)).kind;
          if (std::holds_alternative<WindowLattice>(kind)) ++lattices;
          if (!std::holds_alternative<Unstructured>(kind)) {
            ++bands;
            CHECK(max_diff(p, {}, 8 * std::log(2.0), true, true) < 1e-11);
          }
        }) >= 16);
  CHECK(bands >= 5);
  CHECK(lattices >= 3);
}

// The lazy rescale (a row's exponent reference moves only when a key tile's max exceeds it by more
// than 8 in log2 units), and the wgmma engine's checked row sums (references kept while each
// thread's share of a row's exponentials sums to <= 2^8, else moved to the row max), give the same
// output, and no exponentiated score exceeds 2^8 (the model throws otherwise). Scores scaled up 6x
// so that references do move after the first key tile (and checks fail).
TEST_CASE("cpu model: stale references (lazy rescale, checked row sums) give the same attention") {
  const double headroom = 8 * std::log(2.0);
  for (bool checked : {false, true}) {
    CAPTURE(checked);
    for (const char* pat : {R"({"window": {"left": 100, "right": 100}})",
                            R"({"union": [{"window": {"left": 15, "right": 15}}, {"strided": {"stride": 16}}]})",
                            R"({"union": [{"window": {"left": 20, "right": 20}}, {"global": {"tokens": [0, 1, 2, 3]}}]})"}) {
      CAPTURE(pat);
      Problem p = small(pat, 700, 16);
      CHECK(max_diff(p, {}, headroom, checked) < 1e-12);
      p.scale *= 6;
      CHECK(max_diff(p, {}, headroom, checked) < 1e-12);
    }
    CHECK(for_each_gpu_problem([&](const Problem& p) { CHECK(max_diff(p, {}, headroom, checked) < 1e-11); }) >= 12);
  }
}

// A backward pass walks each key tile's query rows (dK, dV): the plan the code generator makes of the
// column ACSR, with the band and lattice walks where the transposed pattern has them, visits every
// kept (row, key) pair exactly once, for every GPU edge-case problem.
TEST_CASE("cpu model: the column ACSR's plan (a backward pass's dK/dV walk) visits every kept pair once") {
  int n = 0, closed = 0;
  for_each_gpu_problem([&](const Problem& p) {
    if (p.varlen) return;
    ++n;
    const Acsr rows = analyze(p);
    std::vector<std::vector<int64_t>> want(static_cast<size_t>(p.kv_len));
    for (int64_t i = 0; i < p.seq_len; ++i)
      for (const Run& r : rows.row(i))
        for (int64_t c = 0; c < r.count; ++c) want[static_cast<size_t>(r.start + c * r.stride)].push_back(i);
    const Acsr cols = column_acsr(rows, p.limits);
    const Structure st = analyze_structure(cols);
    closed += !std::holds_alternative<Unstructured>(st.kind);
    const auto visits = cpu_model_visits(make_plan(cols, st), st.kind);
    for (int64_t j = 0; j < p.kv_len; ++j) {
      std::vector<int64_t> got = visits[static_cast<size_t>(j)];
      std::sort(got.begin(), got.end());
      CAPTURE(j);
      REQUIRE(got == want[static_cast<size_t>(j)]);
    }
  });
  CHECK(n >= 50);
  CHECK(closed >= 10);  // windows' and lattices' columns keep their closed-form walks
}

TEST_SUITE_END();

// One sequence of `len` tokens of a packed batch: each row's visited keys, sorted, are the pattern's
// kept keys below len (none for rows at or past it).
static void require_sequence_visits(const Problem& p, const std::vector<std::vector<int64_t>>& visits, int64_t len) {
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<int64_t> got = visits[static_cast<size_t>(i)], want;
    std::sort(got.begin(), got.end());
    for (int64_t j = 0; i < len && j < len; ++j)
      if (kept(p, i, j)) want.push_back(j);
    CAPTURE(i);
    REQUIRE(got == want);
  }
}

// A packed variable-length batch (fused_pass with SPLAT_VARLEN): the plan codegen makes for the
// longest sequence (no split-KV), walked with its rows and keys clipped to a shorter sequence's
// length, visits exactly the pattern's kept (i, j) with i, j < length, once each, and its full key
// tiles stay full. Every varlen problem of tests/gpu, at the lengths around tile edges and its own.
TEST_CASE("cpu model: a packed variable-length batch's sequences (plan clipped to each length)" * doctest::test_suite("cpu-model")) {
  int n = 0;
  for_each_gpu_problem([&](const Problem& p) {
    if (!p.varlen) return;
    ++n;
    const Acsr a = analyze(p);
    const Structure st = analyze_structure(a);
    const TileShape shape = plan_shape(p, st);
    CHECK_FALSE(shape.split);
    const Plan plan = make_plan(a, st, shape);
    for (const PlanPass& pass : plan.passes) CHECK(pass.splits.empty());
    std::vector<int64_t> lengths = {0, 1, 2, 63, 64, 65, 127, 129, p.seq_len / 2, p.seq_len - 1, p.seq_len};
    lengths.insert(lengths.end(), p.varlen->lengths.begin(), p.varlen->lengths.end());
    for (int64_t len : lengths) {
      if (len > p.seq_len) continue;
      CAPTURE(len);
      require_sequence_visits(p, cpu_model_visits(plan, Unstructured{}, len), len);
    }
  });
  CHECK(n >= 6);
}

// A packed batch whose pattern is a unit-step band runs band_pass_varlen: per sequence, row tiles
// below its length, band_key_tiles over the length, each key tile's box moved down to end at the
// length where it would reach past it (its keys below the tile masked). That walk visits exactly the
// pattern's kept (i, j) with i, j < length, once each, at lengths around tile edges and around the
// band's reach; its full tiles are never moved (the model throws otherwise). Dilated bands and bands
// with global tokens keep the plan's tables in a packed batch: the model refuses them.
TEST_CASE("cpu model: a packed batch's band (band_pass_varlen) visits every kept pair once" * doctest::test_suite("cpu-model")) {
  int n = 0;
  for (const char* pat : {R"({"window": {"left": 70, "right": 20}})", R"({"window": {"left": 100, "right": 0}})",
                          R"({"window": {"left": 0, "right": 64}})", R"({"window": {"left": 300, "right": 300}})",
                          R"({"window": {"left": 1, "right": 1}})", R"({"window": {"left": 5, "right": 200}})"}) {
    CAPTURE(pat);
    const Problem p = small(pat, 1000, 16);
    const Acsr a = analyze(p);
    const Structure st = analyze_structure(a);
    REQUIRE(std::holds_alternative<Band>(st.kind));
    const Plan plan = make_plan(a, st);
    for (int64_t len : {0, 1, 2, 20, 63, 64, 65, 100, 127, 128, 129, 300, 301, 640, 999, 1000}) {
      CAPTURE(len);
      require_sequence_visits(p, cpu_model_visits(plan, st.kind, len), len);
      ++n;
    }
  }
  CHECK(n == 96);
  for (const char* name : {"band-dilated-fp16", "longformer-ragged-bf16"}) {
    const Problem w = load_problem(std::string(TRSPLAT_SOURCE_DIR) + "/tests/gpu/" + name + ".json");
    const Acsr a = analyze(w);
    const Structure st = analyze_structure(a);
    REQUIRE_FALSE(std::holds_alternative<Unstructured>(st.kind));
    CHECK_THROWS_AS(cpu_model_visits(make_plan(a, st), st.kind, 10), std::invalid_argument);
  }
}
