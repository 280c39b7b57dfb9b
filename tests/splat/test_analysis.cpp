// Analysis: run algebra and every term against brute force on random small problems, ACSR
// expanded back equals the mask, segment counts for affine patterns, metadata formulas, peer
// densities, COO and PNG output.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <unistd.h>
#include <zlib.h>

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/columns.h"
#include "libsplat/analysis/rows.h"
#include "libsplat/report/analysis_report.h"
#include "libsplat/report/picture.h"

TEST_SUITE_BEGIN("unit");

using namespace splat;
using json = nlohmann::json;

namespace {

std::set<int64_t> points(const std::vector<Run>& v) {
  std::set<int64_t> s;
  for (const Run& r : v)
    for (int64_t k = 0; k < r.count; ++k) s.insert(r.start + k * r.stride);
  return s;
}

// The invariants of rows.h: sorted by start, disjoint, count >= 1, stride 1 when count == 1.
void check_canonical(const std::vector<Run>& v) {
  int64_t total = 0;
  for (size_t k = 0; k < v.size(); ++k) {
    CHECK(v[k].count >= 1);
    CHECK(v[k].stride >= 1);
    if (v[k].count == 1) CHECK(v[k].stride == 1);
    if (k) CHECK(v[k - 1].start < v[k].start);
    total += v[k].count;
  }
  CHECK(static_cast<int64_t>(points(v).size()) == total);
}

// Mask from the ACSR compared with kept() for every (i, j), independently of validate().
void check_expansion(const Problem& p, const Acsr& a) {
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<Run> r = a.row(i);
    check_canonical(r);
    std::set<int64_t> s = points(r);
    for (int64_t j = 0; j < p.kv_len; ++j)
      if ((s.count(j) != 0) != kept(p, i, j)) {
        FAIL_CHECK("row " << i << " column " << j << " differs");
        return;
      }
    for (int64_t j : s) REQUIRE((j >= 0 && j < p.kv_len));
  }
}

Problem make(int64_t L, int64_t kv, bool causal, const json& pattern) {
  json doc{{"seq_len", L}, {"kv_len", kv}, {"head_dim", 8}, {"causal", causal}, {"pattern", pattern}};
  return parse_problem(doc, "random");
}

// A random term of the given kind with parameters that fit an L x kv problem.
json random_term(std::mt19937_64& g, const std::string& kind, int64_t L, int64_t kv) {
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  if (kind == "window") return {{"window", {{"left", u(0, 12)}, {"right", u(0, 12)}}}};
  if (kind == "dilated") return {{"dilated", {{"left", u(0, 6)}, {"right", u(0, 6)}, {"dilation", u(1, 5)}}}};
  if (kind == "strided") {
    int64_t s = u(1, 9);
    return {{"strided", {{"stride", s}, {"offset", u(0, s - 1)}}}};
  }
  if (kind == "fixed") {
    int64_t b = u(1, 9);
    return {{"fixed", {{"block", b}, {"summary", u(0, b)}}}};
  }
  if (kind == "blocked") return {{"blocked", {{"block", u(1, 12)}}}};
  if (kind == "block_window") return {{"block_window", {{"block", u(1, 8)}, {"left", u(0, 2)}, {"right", u(0, 2)}}}};
  if (kind == "global") {
    json t = json::array();
    for (int64_t k = u(1, 4); k > 0; --k) t.push_back(u(0, std::max(L, kv) - 1));
    return {{"global", {{"tokens", t}}}};
  }
  if (kind == "random_blocks") {
    int64_t b = u(1, 8), nkb = (kv + b - 1) / b;
    return {{"random_blocks", {{"block", b}, {"per_row", u(1, std::min<int64_t>(nkb, 3))}, {"seed", u(0, 1000)}}}};
  }
  if (kind == "affine")
    return {{"affine", {{"slope", u(-2, 2)}, {"offset", u(-10, 10)}, {"stride", u(1, 5)}, {"count", u(1, 8)}}}};
  json pts = json::array();
  for (int64_t k = u(1, 3 * L); k > 0; --k) pts.push_back({u(0, L - 1), u(0, kv - 1)});
  return {{"coo", pts}};
}

const std::vector<std::string> kKinds = {"window", "dilated", "strided", "fixed", "blocked", "block_window",
                                         "global", "random_blocks", "affine", "coo"};

AnalyzeOptions validating() {
  AnalyzeOptions o;
  o.validate = true;
  return o;
}

}  // namespace

TEST_CASE("runs: union and intersection of random progressions equal the set operations") {
  std::mt19937_64 g(7);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  auto random_list = [&]() {
    // Build from points of a few progressions, then canonicalise through a union with nothing.
    std::vector<Run> acc;
    for (int64_t k = u(0, 3); k > 0; --k) {
      int64_t s = u(1, 7);
      std::vector<Run> one{{u(0, 40), s, u(1, 12)}};
      if (one[0].count == 1) one[0].stride = 1;
      std::vector<Run> out;
      runs_union(acc, one, out);
      acc = out;
    }
    return acc;
  };
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<Run> a = random_list(), b = random_list(), un, in;
    check_canonical(a);
    runs_union(a, b, un);
    runs_intersect(a, b, in);
    std::set<int64_t> pa = points(a), pb = points(b), pu, pi;
    std::set_union(pa.begin(), pa.end(), pb.begin(), pb.end(), std::inserter(pu, pu.end()));
    std::set_intersection(pa.begin(), pa.end(), pb.begin(), pb.end(), std::inserter(pi, pi.end()));
    CHECK(points(un) == pu);
    CHECK(points(in) == pi);
    check_canonical(un);
    check_canonical(in);
  }
  // Interleaved progressions stay compact: multiples of 3 or of 5 are 3 runs, not one per point.
  std::vector<Run> out;
  runs_union({{0, 3, 100}}, {{0, 5, 60}}, out);
  CHECK(out.size() <= 3);
  CHECK(points(out).size() == 100 + 60 - 20);
  runs_intersect({{0, 2, 100}}, {{1, 3, 60}}, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0] == Run{4, 6, 30});  // x == 0 mod 2, x == 1 mod 3: 4, 10, ..., 178
}

// runs_join: pieces of one set, cut anywhere, come back joined where they continue each other.
TEST_CASE("runs: runs_join joins pieces that continue each other") {
  std::vector<Run> v = {{20, 1, 5}, {10, 1, 10}, {25, 1, 1}, {100, 4, 3}, {112, 4, 2}, {40, 1, 1}};
  runs_join(v);
  check_canonical(v);
  CHECK(v == std::vector<Run>{{10, 1, 16}, {40, 1, 1}, {100, 4, 5}});
  // Random cuts of random canonical lists keep their points and come back canonical.
  std::mt19937_64 g(3);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<Run> a, one{{u(0, 30), u(1, 5), u(2, 20)}}, two{{u(0, 60), 1, u(1, 30)}};
    runs_union(one, two, a);
    std::vector<Run> pieces;
    for (const Run& r : a)
      for (int64_t k = 0; k < r.count;) {
        const int64_t n = std::min(r.count - k, u(1, 4));
        pieces.push_back({r.start + k * r.stride, n > 1 ? r.stride : 1, n});
        k += n;
      }
    std::shuffle(pieces.begin(), pieces.end(), g);
    runs_join(pieces);
    check_canonical(pieces);
    CHECK(points(pieces) == points(a));
  }
}

// analyze_rows over a problem's own rows gives the ACSR analyze() gives.
TEST_CASE("analysis: analyze_rows over computed rows equals analyze") {
  for (const char* pat : {R"({"fixed": {"block": 50, "summary": 6}})",
                          R"({"union": [{"window": {"left": 9, "right": 9}}, {"strided": {"stride": 40}}]})"}) {
    CAPTURE(pat);
    Problem p = parse_problem_text(std::string(R"({"seq_len": 700, "head_dim": 16, "pattern": )") + pat + "}", "t");
    Acsr want = analyze(p);
    RowEvaluator ev(p);
    Acsr got = analyze_rows(p.seq_len, p.kv_len, [&](int64_t i) -> const std::vector<Run>& { return ev.row(i); });
    REQUIRE(got.segments.size() == want.segments.size());
    for (int64_t i = 0; i < p.seq_len; ++i) CHECK(got.row(i) == want.row(i));
    CHECK(got.metadata_bytes() == want.metadata_bytes());
  }
}

TEST_CASE("analysis: every term against brute force (random parameters, ragged sizes, kv_len != seq_len, causal)") {
  std::mt19937_64 g(2024);
  for (const std::string& kind : kKinds) {
    for (int iter = 0; iter < 40; ++iter) {
      int64_t L = std::uniform_int_distribution<int64_t>(1, 45)(g);
      int64_t kv = iter % 3 == 0 ? L : std::uniform_int_distribution<int64_t>(1, 60)(g);
      bool causal = iter % 4 == 1;
      Problem p = make(L, kv, causal, random_term(g, kind, L, kv));
      CAPTURE(kind);
      CAPTURE(L);
      CAPTURE(kv);
      CAPTURE(causal);
      Acsr a = analyze(p, validating());
      check_expansion(p, a);
      AnalysisStats s = stats(p, a);
      int64_t nnz = 0;
      for (int64_t i = 0; i < L; ++i)
        for (int64_t j = 0; j < kv; ++j) nnz += kept(p, i, j);
      CHECK(s.nnz == nnz);
      CHECK(a.nnz() == nnz);
    }
  }
}

// A problem with q_offset k is the rows [k, k + L) of the same pattern over k + L rows: its ACSR's
// rows equal the full problem's (an evaluation without q_offset), row for row.
TEST_CASE("analysis: q_offset rows equal the full problem's trailing rows (every term, causal)") {
  std::mt19937_64 g(77);
  for (const std::string& kind : kKinds) {
    for (int iter = 0; iter < 30; ++iter) {
      const int64_t k = std::uniform_int_distribution<int64_t>(0, 40)(g);
      const int64_t L = std::uniform_int_distribution<int64_t>(1, 25)(g);
      const int64_t kv = iter % 2 ? k + L : std::uniform_int_distribution<int64_t>(1, 80)(g);
      const bool causal = iter % 3 == 0;
      json term = random_term(g, kind, k + L, kv);
      if (kind == "coo") {  // rows are positions: keep the points of the chunk's rows
        json pts = json::array();
        for (const json& pt : term["coo"])
          if (pt[0].get<int64_t>() >= k) pts.push_back(pt);
        if (pts.empty()) pts.push_back({k, 0});
        term["coo"] = pts;
      }
      CAPTURE(kind);
      CAPTURE(k);
      CAPTURE(L);
      CAPTURE(kv);
      std::string shown = term.dump();
      CAPTURE(shown);
      Problem full = make(k + L, kv, causal, term);
      json doc{{"seq_len", L}, {"kv_len", kv}, {"q_offset", k}, {"head_dim", 8}, {"causal", causal}, {"pattern", term}};
      Problem chunk = parse_problem(doc, "chunk");
      Acsr a = analyze(chunk, validating()), b = analyze(full);
      for (int64_t i = 0; i < L; ++i) REQUIRE(points(a.row(i)) == points(b.row(k + i)));
      check_expansion(chunk, a);
    }
  }
}

TEST_CASE("analysis: random union / intersect trees against brute force") {
  std::mt19937_64 g(99);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  for (int iter = 0; iter < 250; ++iter) {
    int64_t L = u(1, 40), kv = u(1, 50);
    std::function<json(int)> tree = [&](int depth) -> json {
      if (depth == 0 || u(0, 2) == 0) return random_term(g, kKinds[static_cast<size_t>(u(0, 9))], L, kv);
      json kids = json::array();
      for (int64_t k = u(1, 3); k > 0; --k) kids.push_back(tree(depth - 1));
      return {{u(0, 1) ? "union" : "intersect", kids}};
    };
    json t = tree(3);
    std::string shown = t.dump();
    CAPTURE(shown);
    Problem p = make(L, kv, u(0, 3) == 0, t);
    Acsr a = analyze(p, validating());
    check_expansion(p, a);
  }
}

// The column ACSR holds, for every key j, exactly the rows i that keep it (kept(), not the row ACSR),
// as canonical runs; affine patterns stay affine.
TEST_CASE("column ACSR: every key's rows against brute force, random terms and trees") {
  std::mt19937_64 g(2026);
  auto u = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(g); };
  for (int iter = 0; iter < 200; ++iter) {
    const int64_t L = u(1, 60), kv = u(1, 70);
    json t = random_term(g, kKinds[static_cast<size_t>(iter) % kKinds.size()], L, kv);
    if (iter % 3 == 0) t = {{"union", {t, random_term(g, kKinds[static_cast<size_t>(u(0, 9))], L, kv)}}};
    const std::string shown = t.dump();
    CAPTURE(shown);
    const Problem p = make(L, kv, iter % 4 == 0, t);
    const Acsr c = column_acsr(analyze(p), p.limits);
    REQUIRE(c.seq_len == kv);
    REQUIRE(c.kv_len == L);
    int64_t total = 0;
    for (int64_t j = 0; j < kv; ++j) {
      const std::vector<Run> r = c.row(j);
      check_canonical(r);
      const std::set<int64_t> rows = points(r);
      total += static_cast<int64_t>(rows.size());
      for (int64_t i = 0; i < L; ++i)
        if ((rows.count(i) != 0) != kept(p, i, j)) {
          FAIL_CHECK("key " << j << " row " << i << " differs");
          break;
        }
    }
    CHECK(total == c.nnz());
  }
  // A window's columns are a window (three segments), a dilated window's too (by phase at the edges).
  const Problem w = make(1000, 1000, false, {{"window", {{"left", 30}, {"right", 7}}}});
  const Acsr cw = column_acsr(analyze(w), w.limits);
  CHECK(cw.segments.size() == 3);
  CHECK(cw.row(500) == std::vector<Run>{{493, 1, 38}});
  // Past the memory budget: a located error, nothing allocated.
  Limits tight;
  tight.max_memory = 1000;
  CHECK_THROWS_WITH_AS(column_acsr(analyze(w), tight, "w.json"), doctest::Contains("the column ACSR (4 bytes a kept pair)"), Error);
}

TEST_CASE("analysis: options without phase segments, den or tables give the same mask") {
  std::mt19937_64 g(5);
  for (int iter = 0; iter < 60; ++iter) {
    int64_t L = 30 + static_cast<int64_t>(iter), kv = 40;
    Problem p = make(L, kv, iter % 2 == 0, random_term(g, kKinds[static_cast<size_t>(iter) % kKinds.size()], L, kv));
    AnalyzeOptions o = validating();
    o.allow_den = false;
    o.tabulate = iter % 3 != 0;
    o.phase_segments = iter % 5 != 0;
    Acsr a = analyze(p, o);
    for (const Segment& s : a.segments)
      for (const AffineRun& r : s.runs) CHECK(r.den == 1);
    check_expansion(p, a);
  }
}

TEST_CASE("analysis: affine patterns need few segments") {
  auto segs = [](const json& pattern, int64_t L = 4096, bool causal = false) {
    Problem p = make(L, L, causal, pattern);
    Acsr a = analyze(p, validating());
    return a.segments.size();
  };
  CHECK(segs({{"window", {{"left", 256}, {"right", 256}}}}) <= 3);
  CHECK(segs({{"window", {{"left", 256}, {"right", 0}}}}, 4096, true) <= 2);
  CHECK(segs({{"dilated", {{"left", 256}, {"right", 256}, {"dilation", 2}}}}) <= 6);
  CHECK(segs({{"union", {{{"window", {{"left", 256}, {"right", 256}}}}, {{"global", {{"tokens", {0, 1, 2, 3}}}}}}}}) <= 5);
  CHECK(segs({{"blocked", {{"block", 256}}}}) == 16);
  CHECK(segs({{"strided", {{"stride", 64}}}}) <= 64);
  CHECK(segs({{"union", {{{"window", {{"left", 63}, {"right", 63}}}}, {{"strided", {{"stride", 64}}}}}}}) <= 70);
  // kv_len != seq_len: a window over a longer key range is still a handful of segments.
  Problem p = make(3000, 5000, false, {{"window", {{"left", 100}, {"right", 300}}}});
  CHECK(analyze(p, validating()).segments.size() <= 3);
}

TEST_CASE("analysis: irregular rows (coo) become tables; the metadata budget is enforced") {
  std::mt19937_64 g(11);
  Problem p = make(200, 300, false, random_term(g, "coo", 200, 300));
  Acsr a = analyze(p, validating());
  CHECK(stats(p, a).tabulated_segments >= 1);
  check_expansion(p, a);
  AnalyzeOptions tiny;
  tiny.max_metadata_bytes = 256;
  CHECK_THROWS_AS(analyze(p, tiny), Error);
}

TEST_CASE("stats: metadata byte formulas on a hand-counted example") {
  // blocked, block 2, 4 x 4: rows {0,1} keep columns {0,1}, rows {2,3} keep {2,3}.
  Problem p = make(4, 4, false, {{"blocked", {{"block", 2}}}});
  Acsr a = analyze(p, validating());
  AnalysisStats s = stats(p, a);
  CHECK(s.nnz == 8);
  CHECK(s.density == doctest::Approx(0.5));
  CHECK(s.bytes_csr == 4 * 5 + 4 * 8);
  CHECK(s.blocks64 == 1);
  CHECK(s.bytes_bsr64 == 4 * 2 + 4 * 1);
  CHECK(s.bytes_bsr128 == 4 * 2 + 4 * 1);
  CHECK(s.bytes_blockmask128 == 4 * (2 + 2 + 4));
  REQUIRE(a.segments.size() == 2);
  CHECK(s.bytes_acsr == 2 * (16 + 20));
  CHECK(s.runs_max == 1);
  CHECK(s.nnz_row_max == 2);
}

TEST_CASE("stats: density and block density of the peer patterns at L = 4096") {
  struct Case {
    const char* file;
    double density, block128;
  };
  // the team's H200 peer measurements (FlexAttention's create_block_mask at 128).
  for (Case c : {Case{"window-4k-bf16", 0.1213, 0.1504}, Case{"dilated-4k-bf16", 0.1174, 0.2617},
                 Case{"strided-4k-bf16", 0.0461, 1.0}, Case{"blocked-4k-bf16", 0.0625, 0.0625},
                 Case{"longformer-4k-bf16", 0.1286, 0.2070}}) {
    CAPTURE(c.file);
    Problem p = load_problem(std::string(TRSPLAT_SOURCE_DIR) + "/patterns/" + c.file + ".json");
    Acsr a = analyze(p);
    AnalysisStats s = stats(p, a);
    CHECK(s.density == doctest::Approx(c.density).epsilon(0.001));
    CHECK(s.block_density128 == doctest::Approx(c.block128).epsilon(0.001));
  }
}

TEST_CASE("report: COO lines in row-major order, JSON fields") {
  Problem p = make(20, 25, true, {{"union", {{{"window", {{"left", 3}, {"right", 3}}}}, {{"strided", {{"stride", 7}}}}}}});
  Acsr a = analyze(p, validating());
  auto path = std::filesystem::temp_directory_path() / "splat_test_coo.txt";
  write_coo(a, path.string());
  std::ifstream in(path);
  std::vector<std::pair<int64_t, int64_t>> got, want;
  for (int64_t i, j; in >> i >> j;) got.emplace_back(i, j);
  for (int64_t i = 0; i < 20; ++i)
    for (int64_t j = 0; j < 25; ++j)
      if (kept(p, i, j)) want.emplace_back(i, j);
  CHECK(got == want);
  std::filesystem::remove(path);
  json j = analysis_json(p, a, stats(p, a));
  CHECK(j["seq_len"] == 20);
  CHECK(j["kv_len"] == 25);
  CHECK(j["nnz"] == static_cast<int64_t>(want.size()));
  for (const char* k : {"acsr", "csr", "bsr128", "blockmask128"}) CHECK(j["metadata_bytes"].contains(k));
}

TEST_CASE("report: PNG encoder output decodes (chunks, CRC, zlib stream) and is compressed") {
  const int w = 300, h = 250;
  std::string rgb(static_cast<size_t>(w) * h * 3, '\0');
  for (size_t k = 0; k < rgb.size(); ++k) rgb[k] = static_cast<char>(k * 31 % 251);
  std::string png = encode_png(w, h, rgb);
  REQUIRE(png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  auto be = [&](size_t o) {
    return (uint32_t(uint8_t(png[o])) << 24) | (uint32_t(uint8_t(png[o + 1])) << 16) | (uint32_t(uint8_t(png[o + 2])) << 8) |
           uint32_t(uint8_t(png[o + 3]));
  };
  auto crc = [&](size_t o, size_t n) {  // bitwise CRC-32, independent of the table version
    uint32_t c = 0xFFFFFFFFu;
    for (size_t k = o; k < o + n; ++k) {
      c ^= uint8_t(png[k]);
      for (int b = 0; b < 8; ++b) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
    }
    return c ^ 0xFFFFFFFFu;
  };
  std::string idat;
  std::vector<std::string> types;
  for (size_t o = 8; o < png.size();) {
    uint32_t n = be(o);
    std::string type = png.substr(o + 4, 4);
    types.push_back(type);
    CHECK(be(o + 8 + n) == crc(o + 4, n + 4));
    if (type == "IHDR") {
      CHECK(be(o + 8) == uint32_t(w));
      CHECK(be(o + 12) == uint32_t(h));
    }
    if (type == "IDAT") idat += png.substr(o + 8, n);
    o += 12 + n;
  }
  CHECK(types == std::vector<std::string>{"IHDR", "IDAT", "IEND"});
  // The IDAT is one zlib stream (its Adler-32 checked by inflate) of the scanlines, filter 0 each.
  std::string raw(size_t(h) * (w * 3 + 1) + 16, '\0');
  uLongf n = static_cast<uLongf>(raw.size());
  REQUIRE(uncompress(reinterpret_cast<Bytef*>(raw.data()), &n, reinterpret_cast<const Bytef*>(idat.data()),
                     static_cast<uLong>(idat.size())) == Z_OK);
  REQUIRE(n == size_t(h) * (w * 3 + 1));
  for (int y = 0; y < h; ++y) {
    CHECK(raw[size_t(y) * (w * 3 + 1)] == 0);
    CHECK(raw.compare(size_t(y) * (w * 3 + 1) + 1, size_t(w) * 3, rgb, size_t(y) * w * 3, size_t(w) * 3) == 0);
  }
  // A picture of few colours (what show draws) compresses to a small fraction of its pixels.
  std::string flat(static_cast<size_t>(w) * h * 3, '\xf0');
  for (size_t k = 0; k < flat.size(); k += 97) flat[k] = '\x20';
  CHECK(encode_png(w, h, flat).size() < flat.size() / 20);
}

namespace {

// An SVG picture as text (written to a temporary file and read back).
std::string svg_of(const Problem& p, const PictureOptions& o = {}) {
  const auto path = std::filesystem::temp_directory_path() / ("splat_test_pic_" + std::to_string(::getpid()) + ".svg");
  const Acsr a = analyze(p);
  write_picture(p, a, stats(p, a), path.string(), o);
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::filesystem::remove(path);
  return text;
}

// The fill of the cell rectangle starting at column x, row y of a 20 x 20 picture at 25 pixels a
// cell (layout: left 110, top 92); "" when none starts there.
std::string fill_at(const std::string& svg, int x, int y) {
  const std::string at = "<rect x=\"" + std::to_string(110 + 25 * x) + "\" y=\"" + std::to_string(92 + 25 * y) + "\"";
  const size_t k = svg.find(at);
  if (k == std::string::npos) return "";
  const size_t f = svg.find("fill=\"#", k);
  return svg.substr(f + 6, 7);
}
bool reddish(const std::string& hex) { return std::stoi(hex.substr(1, 2), nullptr, 16) > std::stoi(hex.substr(5, 2), nullptr, 16) + 60; }
bool bluish(const std::string& hex) { return std::stoi(hex.substr(5, 2), nullptr, 16) > std::stoi(hex.substr(1, 2), nullptr, 16) + 60; }

}  // namespace

TEST_CASE("show: cells coloured by what keeps them, a legend of the colours present, and a zoom") {
  // The diagonal (one run family) and global token 5: row 5 and column 5 are the token's.
  const Problem p = make(20, 20, false, {{"union", {{{"window", {{"left", 0}, {"right", 0}}}}, {{"global", {{"tokens", {5}}}}}}}});
  const std::string svg = svg_of(p);
  CHECK(svg.find("global tokens' rows and columns") != std::string::npos);
  CHECK(reddish(fill_at(svg, 0, 5)));   // row 5: one red rectangle over the whole row
  CHECK(svg.find("<rect x=\"110\" y=\"217\" width=\"500\"") != std::string::npos);
  CHECK(reddish(fill_at(svg, 5, 10)));  // column 5 in row 10
  CHECK(bluish(fill_at(svg, 10, 10)));  // the diagonal: the row's run family
  CHECK(fill_at(svg, 3, 10).empty());   // not kept: white, no rectangle
  // No global term: no global colour in the legend; a strided lattice apart from the window.
  const std::string st = svg_of(make(40, 40, false, {{"union", {{{"window", {{"left", 2}, {"right", 2}}}}, {{"strided", {{"stride", 9}}}}}}}));
  CHECK(st.find("global tokens") == std::string::npos);
  CHECK(st.find("contiguous runs") != std::string::npos);
  CHECK(st.find("strided runs") != std::string::npos);
  // A global token inside an intersection does not keep its row whole: drawn as run families.
  const std::string in = svg_of(make(20, 20, false, {{"intersect", {{{"window", {{"left", 3}, {"right", 3}}}}, {{"global", {{"tokens", {5}}}}}}}}));
  CHECK(in.find("global tokens") == std::string::npos);
  // Zoom: rows 10:30 and keys 0:20 of a 40 x 40 mask; the subtitle and the ticks say so.
  PictureOptions o;
  o.rows = std::pair<int64_t, int64_t>{10, 30};
  o.cols = std::pair<int64_t, int64_t>{0, 20};
  const std::string z = svg_of(make(40, 40, false, {{"window", {{"left", 0}, {"right", 0}}}}), o);
  CHECK(z.find("rows 10:30, keys 0:20") != std::string::npos);
  CHECK(z.find(">10</text>") != std::string::npos);
  CHECK(z.find(">30</text>") != std::string::npos);
  CHECK(bluish(fill_at(z, 12, 2)));  // row 12 keeps key 12: cell (x 12, y 12 - 10)
  CHECK(fill_at(z, 12, 3).empty());
  o.rows = std::pair<int64_t, int64_t>{10, 41};
  CHECK_THROWS_WITH_AS(svg_of(make(40, 40, false, {{"window", {{"left", 0}, {"right", 0}}}}), o), doctest::Contains("--rows"), Error);
}

TEST_SUITE_END();
