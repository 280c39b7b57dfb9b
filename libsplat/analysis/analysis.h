#pragma once
// Geometric analysis: a validated Problem -> ACSR (libsplat/analysis/acsr.h), without ever
// materialising the seq_len x kv_len mask. Each row is evaluated as a union of disjoint runs
// (rows.h), then rows are grouped into segments in which every run is affine in the row index.
#include <cstdint>
#include <functional>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

struct AnalyzeOptions {
  // Check every row of the result against direct evaluation of the terms (kept()) over the row's
  // whole key range: O(seq_len * kv_len) time, no extra memory. Throws std::logic_error on a
  // mismatch (an analysis bug, not bad input).
  bool validate = false;
  // Allow segments over one phase class of rows (row_stride > 1), used for dilated/strided edges.
  bool phase_segments = true;
  // Allow AffineRun::den > 1 (only ever in phase segments). Consumers that do not support it set
  // this false; such segments are then split further.
  bool allow_den = true;
  // Fold runs of short affine segments into tabulated segments when that stores fewer bytes.
  bool tabulate = true;
  // Refuse (splat::Error) when the per-row runs would need more than this many bytes in total.
  int64_t max_metadata_bytes = int64_t{1} << 30;
};

Acsr analyze(const Problem&, const AnalyzeOptions& = {});

// The same grouping over rows given one at a time: row(i) returns row i's canonical runs (sorted,
// disjoint, stride 1 when count is 1), valid until the next call. Used for rows derived from an
// ACSR (codegen's plan factors out keys every row keeps).
using RowSource = std::function<const std::vector<Run>&(int64_t)>;
Acsr analyze_rows(int64_t seq_len, int64_t kv_len, const RowSource& row, const AnalyzeOptions& = {});

// Every row of acsr equals the direct evaluation of the problem's terms; throws std::logic_error
// naming the first differing row otherwise.
void validate(const Problem&, const Acsr&);

struct AnalysisStats {
  int64_t rows = 0, cols = 0;
  int64_t nnz = 0;
  double density = 0;                 // nnz / (rows*cols)
  int64_t runs_max = 0;               // runs in the fullest row
  double runs_mean = 0;
  int64_t nnz_row_max = 0;            // W, the widest row (padded-ELL width)
  int64_t empty_rows = 0;
  int64_t segments = 0, affine_segments = 0, tabulated_segments = 0, tabulated_rows = 0;
  // Metadata bytes of each format, int32 indices (formulas in docs/splatc-patterns.md):
  int64_t bytes_acsr = 0;             // Acsr::metadata_bytes()
  int64_t bytes_csr = 0;              // 4*(rows+1) + 4*nnz
  int64_t bytes_bsr64 = 0, bytes_bsr128 = 0;  // 4*(row_blocks+1) + 4*nonempty_blocks
  int64_t bytes_blockmask128 = 0;     // FlexAttention BlockMask: kv_num_blocks + kv_indices (int32,
                                      // row_blocks*(1+col_blocks)), full and partial both kept
  int64_t blocks64 = 0, blocks128 = 0;          // non-empty tiles
  double block_density64 = 0, block_density128 = 0;  // non-empty tiles / all tiles
};

AnalysisStats stats(const Problem&, const Acsr&);

}  // namespace splat
