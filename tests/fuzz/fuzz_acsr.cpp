// Target 3: the ACSR analysis against the brute-force mask (a differential fuzzer).
//
// The input is decoded into a small valid problem (seq_len, kv_len <= 160, a quarter of them with
// queries at a q_offset up to 320) whose pattern is a tree
// of every term kind of the contract (window, dilated, strided, fixed, blocked, block_window,
// global, random_blocks, affine, coo, union, intersect; causal or not), with parameters mostly of
// the order of the sizes and sometimes at the documented bound 2^40. The document goes through the
// JSON validator (which must accept it), then through splat::analyze with options drawn from the
// input. Each row of the result must hold exactly the columns of the mask computed here directly
// from the contract's formulas (docs/splatc-patterns.md, also for the
// random-block generator): an evaluation independent of libsplat's kept(), which is compared too.
// The ACSR's structure is checked as acsr.h states it: every row in exactly one segment, exact
// divisions, no column twice in a row, columns in range; nnz(), max_row_nnz(), stats() and
// validate() agree with the mask. The column ACSR against the mask too, and the kernels' plans (the
// forward's, the backward's row and column plans) visit every kept pair exactly once.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/analysis/columns.h"
#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/cpu_model.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/pattern/pattern.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using json = nlohmann::json;
constexpr int64_t kMaxParam = int64_t{1} << 40;
constexpr int64_t kMaxLen = 160;

// The oracle (keep(), drawn_blocks(), oracle_row()) and the checks (check_structure(), stored_row(),
// compare()) are left out of the coverage instrumentation: their branches say nothing about
// libsplat, and tracing their per-cell comparisons took most of the time of an input (the calls
// into libsplat they make stay instrumented).
#define FUZZ_ORACLE __attribute__((no_sanitize("coverage")))

enum class Kind { Window, Dilated, Strided, Fixed, Blocked, BlockWindow, Global, RandomBlocks, Affine, Coo, Union, Intersect };
constexpr const char* kKindName[] = {"window", "dilated", "strided", "fixed", "blocked", "block_window",
                                     "global", "random_blocks", "affine", "coo", "union", "intersect"};

// A term as the contract states it, evaluated here without libsplat.
struct Spec {
  Kind id = Kind::Union;
  std::string kind;  // its JSON key
  int64_t a = 0, b = 0, c = 0, d = 0;  // parameters, by kind (see keep())
  uint64_t seed = 0;
  std::vector<int64_t> tokens;
  std::vector<std::pair<int64_t, int64_t>> points;
  std::vector<Spec> children;
  // random_blocks: the drawn key blocks of each row block met so far (a flag per key block).
  mutable std::map<int64_t, std::vector<char>> drawn;
};

FUZZ_ORACLE int64_t fdiv(int64_t x, int64_t m) { return x / m - ((x % m != 0) && ((x < 0) != (m < 0))); }
FUZZ_ORACLE int64_t fmod(int64_t x, int64_t m) { return x - fdiv(x, m) * m; }

// The random-block generator of docs/splatc-patterns.md, written out from the text.
FUZZ_ORACLE std::vector<int64_t> drawn_blocks(uint64_t seed, int64_t rb, int64_t r, int64_t nkb) {
  uint64_t state = seed ^ (static_cast<uint64_t>(rb) * 0xD1B54A32D192ED03ull);
  std::vector<int64_t> got;
  while (static_cast<int64_t>(got.size()) < r) {
    state += 0x9E3779B97F4A7C15ull;
    uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const int64_t k = static_cast<int64_t>(z % static_cast<uint64_t>(nkb));
    if (std::find(got.begin(), got.end(), k) == got.end()) got.push_back(k);
  }
  return got;
}

FUZZ_ORACLE bool keep(const Spec& t, int64_t kv_len, int64_t i, int64_t j) {
  switch (t.id) {
    case Kind::Window: return i - t.a <= j && j <= i + t.b;
    case Kind::Dilated: return fmod(j - i, t.c) == 0 && -t.a <= fdiv(j - i, t.c) && fdiv(j - i, t.c) <= t.b;
    case Kind::Strided: return fmod(i - j, t.a) == t.b;
    case Kind::Fixed: return fdiv(i, t.a) == fdiv(j, t.a) || fmod(j, t.a) >= t.a - t.b;
    case Kind::Blocked: return fdiv(i, t.a) == fdiv(j, t.a);
    case Kind::BlockWindow: return -t.b <= fdiv(j, t.a) - fdiv(i, t.a) && fdiv(j, t.a) - fdiv(i, t.a) <= t.c;
    case Kind::Global:
      return std::count(t.tokens.begin(), t.tokens.end(), i) > 0 || std::count(t.tokens.begin(), t.tokens.end(), j) > 0;
    case Kind::RandomBlocks: {
      const int64_t rb = fdiv(i, t.a), nkb = (kv_len + t.a - 1) / t.a;
      auto it = t.drawn.find(rb);
      if (it == t.drawn.end()) {
        it = t.drawn.emplace(rb, std::vector<char>(static_cast<size_t>(nkb), 0)).first;
        for (int64_t kb : drawn_blocks(t.seed, rb, t.b, nkb)) it->second[static_cast<size_t>(kb)] = 1;
      }
      return it->second[static_cast<size_t>(fdiv(j, t.a))] != 0;
    }
    case Kind::Affine: {  // j = slope*i + offset + k*stride, k in [0, count)
      const int64_t r = j - t.a * i - t.b;
      return r >= 0 && r % t.c == 0 && r / t.c < t.d;
    }
    case Kind::Coo: return std::count(t.points.begin(), t.points.end(), std::make_pair(i, j)) > 0;
    case Kind::Union:
      for (const Spec& c : t.children)
        if (keep(c, kv_len, i, j)) return true;
      return false;
    case Kind::Intersect:
      for (const Spec& c : t.children)
        if (!keep(c, kv_len, i, j)) return false;
      return true;
  }
  return false;
}

// The contract's row of query position pos: kept[j] for j in [0, kv_len).
FUZZ_ORACLE std::vector<char> oracle_row(const Spec& t, int64_t kv_len, int64_t pos, bool causal) {
  std::vector<char> want(static_cast<size_t>(kv_len), 0);
  for (int64_t j = 0; j < kv_len && (!causal || j <= pos); ++j) want[static_cast<size_t>(j)] = keep(t, kv_len, pos, j);
  return want;
}

struct Gen {
  FuzzedDataProvider& in;
  int64_t seq_len, kv_len;
  int64_t off;  // q_offset: query row i is position i + off

  // A non-negative parameter: mostly up to `hi` (of the order of the sizes), sometimes near 2^40.
  int64_t param(int64_t lo, int64_t hi) {
    switch (in.ConsumeIntegralInRange<int>(0, 15)) {
      case 0: return kMaxParam;
      case 1: return in.ConsumeIntegralInRange<int64_t>(std::max(lo, kMaxParam - 3), kMaxParam);
      case 2: return in.ConsumeIntegralInRange<int64_t>(lo, kMaxParam);
      default: return in.ConsumeIntegralInRange<int64_t>(lo, std::max(lo, hi));
    }
  }
  int64_t signed_param(int64_t hi) {
    int64_t v = param(0, hi);
    return in.ConsumeBool() ? -v : v;
  }

  Spec term(int depth) {
    const int last = depth >= 3 ? 9 : 11;
    Spec t;
    t.id = static_cast<Kind>(in.ConsumeIntegralInRange<int>(0, last));
    t.kind = kKindName[static_cast<int>(t.id)];
    const int64_t L = std::max(seq_len, kv_len);
    const std::string& k = t.kind;
    if (k == "window") {
      t.a = param(0, L);
      t.b = param(0, L);
    } else if (k == "dilated") {
      t.a = param(0, 12);
      t.b = param(0, 12);
      t.c = param(1, 12);
    } else if (k == "strided") {
      t.a = param(1, L + 1);
      t.b = in.ConsumeIntegralInRange<int64_t>(0, t.a - 1);
    } else if (k == "fixed") {
      t.a = param(1, L + 1);
      t.b = in.ConsumeIntegralInRange<int64_t>(0, t.a);
    } else if (k == "blocked") {
      t.a = param(1, L + 1);
    } else if (k == "block_window") {
      t.a = param(1, L + 1);
      t.b = param(0, 6);
      t.c = param(0, 6);
    } else if (k == "global") {
      const int n = in.ConsumeIntegralInRange<int>(1, 6);
      const int64_t positions = std::max(off + seq_len, kv_len);
      for (int q = 0; q < n; ++q) t.tokens.push_back(in.ConsumeIntegralInRange<int64_t>(0, positions - 1));
    } else if (k == "random_blocks") {
      t.a = param(1, L + 1);
      // kept() draws a row's blocks afresh for every position, by rejection: keep per_row moderate
      // when there are many key blocks, so that one input stays fast.
      const int64_t nkb = (kv_len + t.a - 1) / t.a;
      t.b = in.ConsumeIntegralInRange<int64_t>(1, nkb <= 24 ? nkb : 12);
      t.seed = in.ConsumeIntegral<uint64_t>();
    } else if (k == "affine") {
      t.a = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? signed_param(0) : in.ConsumeIntegralInRange<int64_t>(-3, 3);
      t.b = signed_param(L);
      t.c = param(1, 8);
      t.d = param(1, L);
    } else if (k == "coo") {
      const int n = in.ConsumeIntegralInRange<int>(1, 24);
      for (int q = 0; q < n; ++q)
        t.points.emplace_back(in.ConsumeIntegralInRange<int64_t>(off, off + seq_len - 1),
                              in.ConsumeIntegralInRange<int64_t>(0, kv_len - 1));
    } else {
      const int n = in.ConsumeIntegralInRange<int>(1, 4);
      for (int q = 0; q < n; ++q) t.children.push_back(term(depth + 1));
    }
    return t;
  }
};

json to_json(const Spec& t, FuzzedDataProvider& in) {
  const std::string& k = t.kind;
  json a = json::object();
  // Optional parameters are sometimes left out when they have their default value.
  auto opt = [&](const char* key, int64_t v, int64_t dflt) {
    if (v != dflt || in.ConsumeBool()) a[key] = v;
  };
  if (k == "window") { opt("left", t.a, 0); opt("right", t.b, 0); }
  else if (k == "dilated") { opt("left", t.a, 0); opt("right", t.b, 0); a["dilation"] = t.c; }
  else if (k == "strided") { a["stride"] = t.a; opt("offset", t.b, 0); }
  else if (k == "fixed") { a["block"] = t.a; a["summary"] = t.b; }
  else if (k == "blocked") { a["block"] = t.a; }
  else if (k == "block_window") { a["block"] = t.a; opt("left", t.b, 0); opt("right", t.c, 0); }
  else if (k == "global") { a["tokens"] = t.tokens; }
  else if (k == "random_blocks") {
    a["block"] = t.a;
    a["per_row"] = t.b;
    if (t.seed != 0 || in.ConsumeBool()) a["seed"] = t.seed;
  } else if (k == "affine") { opt("slope", t.a, 0); opt("offset", t.b, 0); opt("stride", t.c, 1); a["count"] = t.d; }
  else if (k == "coo") {
    a = json::array();
    for (auto [i, j] : t.points) a.push_back({i, j});
  } else {
    a = json::array();
    for (const Spec& c : t.children) a.push_back(to_json(c, in));
  }
  return json{{k, a}};
}

std::string where(const json& doc, int64_t i) { return "row " + std::to_string(i) + " of\n" + doc.dump(); }

// Every row in exactly one segment; exact divisions; tables well formed; options respected.
FUZZ_ORACLE void check_structure(const splat::Acsr& a, const splat::AnalyzeOptions& o, const json& doc) {
  std::vector<int> cover(static_cast<size_t>(a.seq_len), 0);
  for (const splat::Segment& s : a.segments) {
    if (s.row_stride < 1 || s.row_begin < 0 || s.row_end > a.seq_len || s.row_begin >= s.row_end)
      fuzz::finding("a segment with bad rows [" + std::to_string(s.row_begin) + ", " + std::to_string(s.row_end) +
                    ") step " + std::to_string(s.row_stride) + " in\n" + doc.dump());
    if (!o.phase_segments && s.row_stride != 1) fuzz::finding("a phase segment with phase_segments off in\n" + doc.dump());
    for (int64_t i = s.row_begin; i < s.row_end; i += s.row_stride) ++cover[static_cast<size_t>(i)];
    if (s.tabulated) {
      if (s.row_ptr.size() != static_cast<size_t>(s.rows()) + 1 || s.row_ptr.front() != 0 ||
          s.row_ptr.back() != static_cast<int64_t>(s.table.size()) || !std::is_sorted(s.row_ptr.begin(), s.row_ptr.end()))
        fuzz::finding("a tabulated segment with a bad row_ptr in\n" + doc.dump());
      continue;
    }
    for (const splat::AffineRun& r : s.runs) {
      if (r.den < 1 || (!o.allow_den && r.den != 1)) fuzz::finding("a run family with den " + std::to_string(r.den) + " in\n" + doc.dump());
      if (r.stride < 1) fuzz::finding("a run family with stride " + std::to_string(r.stride) + " in\n" + doc.dump());
      for (int64_t i = s.row_begin; i < s.row_end; i += s.row_stride)
        if ((r.start_slope * i + r.start_offset) % r.den != 0 || (r.count_slope * i + r.count_offset) % r.den != 0)
          fuzz::finding("an inexact division by den in " + where(doc, i));
    }
  }
  for (int64_t i = 0; i < a.seq_len; ++i)
    if (cover[static_cast<size_t>(i)] != 1)
      fuzz::finding("in " + std::to_string(cover[static_cast<size_t>(i)]) + " segments: " + where(doc, i));
  for (int64_t i = 0; i < a.seq_len; ++i)
    if (a.segment_of(i) < 0 || !(a.segments[static_cast<size_t>(a.segment_of(i))].row_begin <= i))
      fuzz::finding("segment_of is wrong for " + where(doc, i));
}

// The columns of row i as the segment stores them (count <= 0: no column), each at most once.
FUZZ_ORACLE std::vector<char> stored_row(const splat::Acsr& a, int64_t i, const json& doc) {
  std::vector<char> got(static_cast<size_t>(a.kv_len), 0);
  const splat::Segment& s = a.segments[static_cast<size_t>(a.segment_of(i))];
  std::vector<splat::Run> runs;
  if (s.tabulated) {
    const size_t r = static_cast<size_t>((i - s.row_begin) / s.row_stride);
    runs.assign(s.table.begin() + s.row_ptr[r], s.table.begin() + s.row_ptr[r + 1]);
  } else {
    for (const splat::AffineRun& f : s.runs) runs.push_back(f.at(i));
  }
  for (const splat::Run& r : runs) {
    if (r.count > 0 && r.stride < 1) fuzz::finding("a run of stride " + std::to_string(r.stride) + " in " + where(doc, i));
    for (int64_t k = 0; k < r.count; ++k) {
      const int64_t j = r.start + k * r.stride;
      if (j < 0 || j >= a.kv_len) fuzz::finding("column " + std::to_string(j) + " out of range in " + where(doc, i));
      if (got[static_cast<size_t>(j)]++) fuzz::finding("column " + std::to_string(j) + " twice in " + where(doc, i));
    }
  }
  return got;
}

FUZZ_ORACLE void compare(const splat::Problem& p, const Spec& spec, bool causal, int64_t off, const splat::Acsr& a, const json& doc) {
  int64_t nnz = 0, widest = 0, empty = 0;
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<char> got = stored_row(a, i, doc);
    std::vector<char> from_row(static_cast<size_t>(p.kv_len), 0);
    const auto runs = a.row(i);
    for (size_t r = 0; r < runs.size(); ++r) {
      if (runs[r].count < 1 || (runs[r].count == 1 && runs[r].stride != 1) || (r > 0 && runs[r - 1].start > runs[r].start))
        fuzz::finding("Acsr::row is not canonical at " + where(doc, i));
      for (int64_t k = 0; k < runs[r].count; ++k) from_row[static_cast<size_t>(runs[r].start + k * runs[r].stride)] = 1;
    }
    if (from_row != got) fuzz::finding("Acsr::row differs from the segment's runs at " + where(doc, i));
    int64_t n = 0;
    const std::vector<char> wanted = oracle_row(spec, p.kv_len, i + off, causal);
    for (int64_t j = 0; j < p.kv_len; ++j) {
      const bool want = wanted[static_cast<size_t>(j)] != 0;
      if (splat::kept(p, i, j) != want)
        fuzz::finding("kept() says " + std::to_string(!want) + " at column " + std::to_string(j) + ", the contract " +
                      std::to_string(want) + ", " + where(doc, i));
      if ((got[static_cast<size_t>(j)] != 0) != want)
        fuzz::finding("the ACSR " + std::string(want ? "misses" : "adds") + " column " + std::to_string(j) + " of " + where(doc, i));
      n += want;
    }
    nnz += n;
    widest = std::max(widest, n);
    empty += n == 0;
  }
  if (a.nnz() != nnz || a.max_row_nnz() != widest)
    fuzz::finding("nnz()/max_row_nnz() " + std::to_string(a.nnz()) + "/" + std::to_string(a.max_row_nnz()) + " against " +
                  std::to_string(nnz) + "/" + std::to_string(widest) + " in\n" + doc.dump());
  const splat::AnalysisStats st = splat::stats(p, a);
  if (st.nnz != nnz || st.empty_rows != empty || st.nnz_row_max != widest) fuzz::finding("stats() disagree with the mask in\n" + doc.dump());
  try {
    splat::validate(p, a);
  } catch (...) {
    fuzz::finding("validate() refuses a correct ACSR (" + fuzz::current_exception_text() + ") in\n" + doc.dump());
  }
}

// The column ACSR (analysis/columns.h) under the same options: every key's rows are the contract's
// rows that keep it, as canonical runs, and its structure holds as acsr.h states it.
FUZZ_ORACLE void compare_columns(const splat::Problem& p, const Spec& spec, bool causal, int64_t off, const splat::Acsr& a,
                                 const splat::AnalyzeOptions& o, const json& doc) {
  splat::Acsr c;
  try {
    c = splat::column_acsr(a, p.limits, "", o);
  } catch (...) {
    fuzz::finding("the column ACSR failed (" + fuzz::current_exception_text() + ") on\n" + doc.dump());
  }
  if (c.seq_len != p.kv_len || c.kv_len != p.seq_len) fuzz::finding("the column ACSR has other sizes than\n" + doc.dump());
  check_structure(c, o, doc);
  std::vector<std::vector<char>> mask;
  for (int64_t i = 0; i < p.seq_len; ++i) mask.push_back(oracle_row(spec, p.kv_len, i + off, causal));
  for (int64_t j = 0; j < p.kv_len; ++j) {
    const std::vector<char> got = stored_row(c, j, doc);
    for (int64_t i = 0; i < p.seq_len; ++i)
      if ((got[static_cast<size_t>(i)] != 0) != (mask[static_cast<size_t>(i)][static_cast<size_t>(j)] != 0))
        fuzz::finding("the column ACSR " + std::string(got[static_cast<size_t>(i)] ? "adds" : "misses") + " row " +
                      std::to_string(i) + " of key " + std::to_string(j) + " in\n" + doc.dump());
  }
}

// The plans the kernels walk (codegen/plan.h): the forward's row plan and the backward's (the row
// plan with split-KV chunks for `heads` blocks along grid.y, and the column ACSR's plan), through the
// CPU model's visits: every kept (row, key) of the ACSR (compared with the mask above) visited exactly
// once by the row plans, and every kept (key, row) once by the column plan.
FUZZ_ORACLE void compare_plans(splat::Problem p, const splat::Acsr& a, int64_t heads, const json& doc) {
  std::vector<std::vector<int64_t>> want(static_cast<size_t>(a.seq_len)), want_cols(static_cast<size_t>(a.kv_len));
  for (int64_t i = 0; i < a.seq_len; ++i)
    for (const splat::Run& r : a.row(i))
      for (int64_t c = 0; c < r.count; ++c) {
        want[static_cast<size_t>(i)].push_back(r.start + c * r.stride);
        want_cols[static_cast<size_t>(r.start + c * r.stride)].push_back(i);
      }
  for (auto& w : want) std::sort(w.begin(), w.end());
  p.heads = p.kv_heads = heads;
  splat::BackwardPlans b;
  splat::Plan forward;
  try {
    forward = splat::make_plan(a, splat::analyze_structure(a));
    b = splat::backward_plans(p, a);
  } catch (...) {
    fuzz::finding("planning failed (" + fuzz::current_exception_text() + ") on\n" + doc.dump());
  }
  auto same = [&](const splat::Plan& plan, const std::vector<std::vector<int64_t>>& expect, const char* what) {
    std::vector<std::vector<int64_t>> got = splat::cpu_model_visits(plan);
    for (size_t i = 0; i < expect.size(); ++i) {
      std::sort(got[i].begin(), got[i].end());
      if (got[i] != expect[i])
        fuzz::finding(std::string("the ") + what + " visits row " + std::to_string(i) + " other than once per kept key (" +
                      std::to_string(got[i].size()) + " visits, " + std::to_string(expect[i].size()) + " kept) in\n" +
                      doc.dump());
    }
  };
  same(forward, want, "forward plan");
  same(b.rows, want, "backward row plan");
  same(b.cols, want_cols, "backward column plan");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const int64_t seq_len = in.ConsumeIntegralInRange<int64_t>(1, in.ConsumeBool() ? 48 : kMaxLen);
  const int64_t kv_len = in.ConsumeBool() ? seq_len : in.ConsumeIntegralInRange<int64_t>(1, kMaxLen);
  const bool causal = in.ConsumeBool();
  // Queries at later positions (decode, chunked prefill) in a quarter of the inputs.
  const int64_t off = in.ConsumeIntegralInRange<int>(0, 3) == 0 ? in.ConsumeIntegralInRange<int64_t>(0, 2 * kMaxLen) : 0;
  splat::AnalyzeOptions o;
  o.phase_segments = in.ConsumeBool();
  o.allow_den = in.ConsumeBool();
  o.tabulate = in.ConsumeBool();
  Gen g{in, seq_len, kv_len, off};
  const Spec spec = g.term(0);
  json doc = {{"seq_len", seq_len}, {"head_dim", 16}, {"pattern", to_json(spec, in)}};
  if (kv_len != seq_len || in.ConsumeBool()) doc["kv_len"] = kv_len;
  if (causal || in.ConsumeBool()) doc["causal"] = causal;
  if (off != 0 || in.ConsumeBool()) doc["q_offset"] = off;
  if (std::getenv("FUZZ_SHOW")) std::fprintf(stderr, "%s\n", doc.dump().c_str());
  splat::Problem p;
  try {
    p = splat::parse_problem(doc, "fuzz");
  } catch (...) {
    fuzz::finding("the validator refuses a valid problem (" + fuzz::current_exception_text() + "):\n" + doc.dump());
  }
  splat::Acsr a;
  try {
    a = splat::analyze(p, o);
  } catch (...) {
    fuzz::finding("the analysis failed (" + fuzz::current_exception_text() + ") on\n" + doc.dump());
  }
  if (a.seq_len != seq_len || a.kv_len != kv_len) fuzz::finding("the ACSR has other sizes than\n" + doc.dump());
  check_structure(a, o, doc);
  compare(p, spec, causal, off, a, doc);
  compare_columns(p, spec, causal, off, a, o, doc);
  compare_plans(p, a, in.ConsumeIntegralInRange<int64_t>(1, 64), doc);
  return 0;
}
