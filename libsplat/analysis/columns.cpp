#include "libsplat/analysis/columns.h"

#include <vector>

namespace splat {
namespace {

// Sorted row indices as runs: maximal arithmetic progressions taken greedily from the smallest
// (canonical: sorted, disjoint, stride 1 for a run of one).
void progressions(const int32_t* rows, int64_t n, std::vector<Run>& out) {
  out.clear();
  for (int64_t a = 0; a < n;) {
    if (a + 1 == n) {
      out.push_back({rows[a], 1, 1});
      break;
    }
    const int64_t stride = int64_t{rows[a + 1]} - rows[a];
    int64_t b = a + 1;
    while (b + 1 < n && int64_t{rows[b + 1]} - rows[b] == stride) ++b;
    out.push_back({rows[a], stride, b - a + 1});
    a = b + 1;
  }
}

}  // namespace

Acsr column_acsr(const Acsr& a, const Limits& limits, const std::string& file, const AnalyzeOptions& opt) {
  const int64_t nnz = a.nnz();
  const int64_t bytes = 4 * nnz + 8 * (a.kv_len + 1);
  if (bytes > limits.max_memory / 2) throw_memory_limit(file, "the column ACSR (4 bytes a kept pair)", bytes, limits);
  WorkMeter work(limits, file, "transposing the pattern into its column ACSR");
  // Pass 1: kept pairs per key; pass 2: the rows of each key, in ascending order (rows go up).
  std::vector<int64_t> start(static_cast<size_t>(a.kv_len) + 1, 0);
  for (int64_t i = 0; i < a.seq_len; ++i)
    for (const Run& r : a.row(i)) {
      work.add(r.count);
      for (int64_t c = 0; c < r.count; ++c) ++start[static_cast<size_t>(r.start + c * r.stride) + 1];
    }
  for (size_t j = 1; j < start.size(); ++j) start[j] += start[j - 1];
  std::vector<int32_t> rows(static_cast<size_t>(nnz));
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < a.seq_len; ++i)
    for (const Run& r : a.row(i)) {
      work.add(r.count);
      for (int64_t c = 0; c < r.count; ++c) {
        int64_t& at = fill[static_cast<size_t>(r.start + c * r.stride)];
        rows[static_cast<size_t>(at++)] = static_cast<int32_t>(i);
      }
    }
  std::vector<Run> runs;
  const RowSource column = [&](int64_t j) -> const std::vector<Run>& {
    const int64_t b = start[static_cast<size_t>(j)];
    progressions(rows.data() + b, start[static_cast<size_t>(j) + 1] - b, runs);
    return runs;
  };
  AnalyzeOptions o = opt;
  o.validate = false;  // no terms to validate against: the tests compare with the rows instead
  return analyze_rows(a.kv_len, a.seq_len, column, o);
}

}  // namespace splat
