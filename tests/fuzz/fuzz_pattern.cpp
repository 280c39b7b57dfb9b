// Target 2: the pattern front end (JSON parser + validator, libsplat/pattern) on arbitrary bytes.
//
// Any input may be refused with a splat::Error (bad input: a JSON path and what was expected);
// nothing else may happen. An accepted problem must satisfy what the validator promises
// (pattern.h, docs/splatc-patterns.md): sizes in range, parameters in range, tokens and points
// sorted, unique and in bounds. When it is small (at most kMaxCells positions), the analysis runs
// on it with validation on, which compares every row of the ACSR with kept(); when it is larger,
// kept() is evaluated at the extreme rows and columns (where parameters times positions are
// largest), so that the sanitizers see its arithmetic at full size.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "libsplat/analysis/analysis.h"
#include "libsplat/pattern/pattern.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

constexpr int64_t kMaxCells = int64_t{1} << 16;
constexpr int64_t kMaxParam = int64_t{1} << 40;  // docs/splatc-patterns.md: parameters are bounded by 2^40

void require(bool ok, const splat::Term& t, const std::string& what) {
  if (!ok) fuzz::finding("accepted problem breaks the validator's promise at " + t.path + ": " + what);
}

bool in(int64_t v, int64_t lo, int64_t hi) { return lo <= v && v <= hi; }

void check_term(const splat::Problem& p, const splat::Term& t) {
  using K = splat::TermKind;
  switch (t.kind) {
    case K::Window:
    case K::Dilated:
      require(in(t.left, 0, kMaxParam) && in(t.right, 0, kMaxParam), t, "left/right");
      require(in(t.dilation, 1, kMaxParam), t, "dilation");
      break;
    case K::Strided: require(in(t.stride, 1, kMaxParam) && in(t.offset, 0, t.stride - 1), t, "stride/offset"); break;
    case K::Fixed: require(in(t.block, 1, kMaxParam) && in(t.summary, 0, t.block), t, "block/summary"); break;
    case K::Blocked: require(in(t.block, 1, kMaxParam), t, "block"); break;
    case K::BlockWindow:
      require(in(t.block, 1, kMaxParam) && in(t.left, 0, kMaxParam) && in(t.right, 0, kMaxParam), t, "block/left/right");
      break;
    case K::Global:
      require(!t.tokens.empty() && std::is_sorted(t.tokens.begin(), t.tokens.end()) &&
                  std::adjacent_find(t.tokens.begin(), t.tokens.end()) == t.tokens.end(),
              t, "tokens sorted and unique");
      require(t.tokens.front() >= 0 && t.tokens.back() < std::max(p.q_offset + p.seq_len, p.kv_len), t, "tokens in range");
      break;
    case K::RandomBlocks:
      require(in(t.block, 1, kMaxParam) && in(t.per_row, 1, (p.kv_len + t.block - 1) / t.block), t, "block/per_row");
      break;
    case K::Affine:
      require(in(t.slope, -kMaxParam, kMaxParam) && in(t.offset, -kMaxParam, kMaxParam), t, "slope/offset");
      require(in(t.stride, 1, kMaxParam) && in(t.count, 1, kMaxParam), t, "stride/count");
      break;
    case K::Coo:
      require(!t.points.empty() && std::is_sorted(t.points.begin(), t.points.end()) &&
                  std::adjacent_find(t.points.begin(), t.points.end()) == t.points.end(),
              t, "points sorted and unique");
      // Rows are positions: query row r sits at r + q_offset.
      for (auto [i, j] : t.points)
        require(in(i, p.q_offset, p.q_offset + p.seq_len - 1) && in(j, 0, p.kv_len - 1), t, "point in range");
      break;
    case K::Union:
    case K::Intersect:
      require(!t.children.empty(), t, "children");
      for (const auto& c : t.children) check_term(p, c);
      break;
  }
}

// Random blocks draw per_row distinct blocks per row block by rejection: kept() is slow for large
// per_row by design, so such problems are not sampled.
bool cheap_to_sample(const splat::Term& t) {
  if (t.kind == splat::TermKind::RandomBlocks && t.per_row > 4096) return false;
  for (const auto& c : t.children)
    if (!cheap_to_sample(c)) return false;
  return true;
}

void sample_kept(const splat::Problem& p) {
  const int64_t rows[] = {0, 1, p.seq_len / 2, p.seq_len - 2, p.seq_len - 1};
  const int64_t cols[] = {0, 1, p.kv_len / 2, p.kv_len - 2, p.kv_len - 1};
  for (int64_t i : rows)
    for (int64_t j : cols) (void)splat::kept(p, i, j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  splat::Problem p;
  try {
    p = splat::parse_problem_text(text, "fuzz");
  } catch (const splat::Error&) {
    return 0;  // bad input: fine
  } catch (...) {
    fuzz::finding("the pattern parser threw something other than splat::Error: " + fuzz::current_exception_text());
  }
  if (!in(p.seq_len, 1, splat::Limits{}.max_len) || !in(p.kv_len, 1, splat::Limits{}.max_len) ||
      !in(p.head_dim, 1, 65536) || !(p.scale > 0) || !in(p.kv_heads, 1, p.heads) || p.heads % p.kv_heads != 0 ||
      !in(p.q_offset, 0, splat::Limits{}.max_len))
    fuzz::finding("accepted problem with sizes out of range");
  // Per-head patterns: between 2 and kMaxHeadGroups distinct groups whose heads partition [0, heads).
  if (!p.head_groups.empty()) {
    if (p.head_groups.size() < 2 || static_cast<int64_t>(p.head_groups.size()) > splat::kMaxHeadGroups)
      fuzz::finding("accepted per-head patterns with a number of groups out of range");
    std::vector<int> seen(static_cast<size_t>(p.heads), 0);
    for (const splat::HeadGroup& g : p.head_groups)
      for (size_t k = 0; k < g.heads.size(); ++k) {
        if (!in(g.heads[k], 0, p.heads - 1) || (k > 0 && g.heads[k] <= g.heads[k - 1]))
          fuzz::finding("a head group's heads are not ascending heads of the problem");
        ++seen[static_cast<size_t>(g.heads[k])];
      }
    for (int n : seen)
      if (n != 1) fuzz::finding("the head groups do not partition the heads");
  }
  for (const splat::Problem& g : splat::head_group_problems(p)) {
    check_term(g, g.pattern);
    if (g.seq_len * g.kv_len > kMaxCells) {
      if (cheap_to_sample(g.pattern)) sample_kept(g);
      continue;
    }
    try {
      splat::AnalyzeOptions o;
      o.validate = true;
      splat::Acsr a = splat::analyze(g, o);
      if (a.seq_len != g.seq_len || a.kv_len != g.kv_len) fuzz::finding("the ACSR has other sizes than the problem");
    } catch (...) {
      fuzz::finding("the analysis of a small accepted problem failed: " + fuzz::current_exception_text());
    }
  }
  return 0;
}
