#pragma once
// ACSR (affine compressed sparse row): the mask as a few affine run families per group of rows,
// the contract between the analysis (producer) and codegen / the CPU model (consumers).
//
// A row's kept columns are a union of disjoint runs {start + k*stride : 0 <= k < count}. Rows are
// partitioned into segments; in an affine segment every row i has the same number of runs and
// run r has start = start_slope*i + start_offset, count = count_slope*i + count_offset and a
// constant stride (count may be affine so that the ragged rows at the ends of a window are one
// segment, not one segment per row). A segment may take every row_stride-th row, so that strided
// and dilated patterns group rows by phase: rows of one phase share their key set. Rows with no
// closed form (random blocks, coo) live in tabulated segments with explicit per-row runs.
#include <cstdint>
#include <string>
#include <vector>

namespace splat {

struct Run {
  int64_t start = 0, stride = 1, count = 0;
  bool operator==(const Run&) const = default;
};

struct AffineRun {
  int64_t start_slope = 0, start_offset = 0;
  int64_t stride = 1;
  int64_t count_slope = 0, count_offset = 0;
  // Added by the analysis: start and count are (slope*row + offset) / den, the division exact on
  // every row of the segment. den > 1 only in phase segments (row_stride > 1, den == row_stride),
  // where a value grows by one per member row (e.g. the ragged edge of a dilated window);
  // AnalyzeOptions::allow_den = false never produces it. den == 1 is the plain affine form above.
  int64_t den = 1;
  Run at(int64_t row) const {
    return {(start_slope * row + start_offset) / den, stride, (count_slope * row + count_offset) / den};
  }
  bool operator==(const AffineRun&) const = default;
};

struct Segment {
  // Rows row_begin, row_begin + row_stride, ... (< row_end).
  int64_t row_begin = 0, row_end = 0, row_stride = 1;
  bool tabulated = false;
  std::vector<AffineRun> runs;      // affine segment: the same run families for every row
  std::vector<int64_t> row_ptr;     // tabulated: rows()+1 offsets into table
  std::vector<Run> table;           // tabulated: runs of every row, row after row
  int64_t rows() const { return row_end <= row_begin ? 0 : (row_end - row_begin + row_stride - 1) / row_stride; }
};

struct Acsr {
  int64_t seq_len = 0, kv_len = 0;
  std::vector<Segment> segments;    // every row of [0, seq_len) lies in exactly one segment
  // Added by the analysis: segment index of every row (int32), filled by index(); when empty,
  // row() scans the segments. The analysis returns an indexed Acsr.
  std::vector<int32_t> row_segment;
  void index();                     // (re)build row_segment after editing segments
  int64_t segment_of(int64_t i) const;  // -1 when no segment holds row i
  // Runs of row i, sorted by first column, disjoint, empty runs dropped. Runs of count 1 have
  // stride 1.
  std::vector<Run> row(int64_t i) const;
  int64_t nnz() const;
  int64_t max_row_nnz() const;      // W: the widest row
  int64_t metadata_bytes() const;   // bytes to store this ACSR (segments, run families, tables)
};

}  // namespace splat
