#pragma once
// Per-row evaluation of a pattern: the kept columns of one row as a canonical list of runs
// (sorted by start, pairwise disjoint sets, count >= 1, stride 1 when count == 1), computed from
// the term parameters in O(runs) per term, never by scanning the row.
#include <cstdint>
#include <memory>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

// Work steps (pattern.h, WorkMeter) charged for every row evaluated, besides its terms and runs:
// what grouping it into segments, indexing and counting its tiles cost (about 80 ns).
inline constexpr int64_t kRowSteps = 8;

// Evaluates rows of one problem, reusing its buffers from row to row (not thread-safe). Counts its
// work against the problem's Limits::max_work and the memory of one row's run lists against half
// of Limits::max_memory, and throws splat::Error past either.
class RowEvaluator {
 public:
  explicit RowEvaluator(const Problem& p);
  ~RowEvaluator();
  RowEvaluator(const RowEvaluator&) = delete;
  RowEvaluator& operator=(const RowEvaluator&) = delete;
  // Runs of query row i (the terms evaluated at position i + q_offset, causal applied); the
  // reference stays valid until the next call.
  const std::vector<Run>& row(int64_t i);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Set operations on canonical run lists over columns [0, kv_len). Progressions of different
// strides are combined exactly (residues modulo the lcm of the strides, or enumeration of the
// points of the span when the lcm is large); results are canonical.
void runs_union(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out);
void runs_intersect(const std::vector<Run>& a, const std::vector<Run>& b, std::vector<Run>& out);
// Disjoint runs made canonical the way the set operations leave them: sorted by start, and runs
// that continue each other (a run's next column is another's first, at its stride) joined.
void runs_join(std::vector<Run>& runs);
// Canonical runs for a sorted list of distinct columns (greedy: equal gaps form one run).
void runs_from_points(const std::vector<int64_t>& cols, std::vector<Run>& out);

}  // namespace splat
