#include "libsplat/analysis/acsr.h"

#include <algorithm>
#include <stdexcept>

namespace splat {

namespace {

bool holds(const Segment& s, int64_t i) {
  return i >= s.row_begin && i < s.row_end && (i - s.row_begin) % s.row_stride == 0;
}

void row_of(const Segment& s, int64_t i, std::vector<Run>& out) {
  if (s.tabulated) {
    int64_t r = (i - s.row_begin) / s.row_stride;
    out.assign(s.table.begin() + s.row_ptr[static_cast<size_t>(r)],
               s.table.begin() + s.row_ptr[static_cast<size_t>(r) + 1]);
  } else {
    for (const AffineRun& a : s.runs) out.push_back(a.at(i));
  }
}

}  // namespace

void Acsr::index() {
  if (seq_len > INT32_MAX || segments.size() > static_cast<size_t>(INT32_MAX))
    throw std::length_error("ACSR too large to index");
  row_segment.assign(static_cast<size_t>(seq_len), -1);
  for (size_t k = 0; k < segments.size(); ++k) {
    const Segment& s = segments[k];
    for (int64_t i = std::max<int64_t>(s.row_begin, 0); i < std::min(s.row_end, seq_len); i += s.row_stride)
      row_segment[static_cast<size_t>(i)] = static_cast<int32_t>(k);
  }
}

int64_t Acsr::segment_of(int64_t i) const {
  if (i < 0 || i >= seq_len) return -1;
  if (row_segment.size() == static_cast<size_t>(seq_len)) return row_segment[static_cast<size_t>(i)];
  for (size_t k = 0; k < segments.size(); ++k)
    if (holds(segments[k], i)) return static_cast<int64_t>(k);
  return -1;
}

std::vector<Run> Acsr::row(int64_t i) const {
  std::vector<Run> out;
  int64_t k = segment_of(i);
  if (k >= 0) row_of(segments[static_cast<size_t>(k)], i, out);
  std::erase_if(out, [](const Run& r) { return r.count <= 0; });
  for (Run& r : out)
    if (r.count == 1) r.stride = 1;
  if (!std::is_sorted(out.begin(), out.end(), [](const Run& a, const Run& b) { return a.start < b.start; }))
    std::sort(out.begin(), out.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  return out;
}

int64_t Acsr::nnz() const {
  int64_t n = 0;
  for (const Segment& s : segments) {
    if (s.tabulated) {
      for (const Run& r : s.table) n += std::max<int64_t>(r.count, 0);
      continue;
    }
    for (int64_t i = s.row_begin; i < s.row_end; i += s.row_stride)
      for (const AffineRun& a : s.runs) n += std::max<int64_t>(a.at(i).count, 0);
  }
  return n;
}

int64_t Acsr::max_row_nnz() const {
  int64_t w = 0;
  for (const Segment& s : segments) {
    for (int64_t r = 0; r < s.rows(); ++r) {
      int64_t n = 0;
      if (s.tabulated) {
        for (int64_t k = s.row_ptr[static_cast<size_t>(r)]; k < s.row_ptr[static_cast<size_t>(r) + 1]; ++k)
          n += std::max<int64_t>(s.table[static_cast<size_t>(k)].count, 0);
      } else {
        for (const AffineRun& a : s.runs) n += std::max<int64_t>(a.at(s.row_begin + r * s.row_stride).count, 0);
      }
      w = std::max(w, n);
    }
  }
  return w;
}

// Storage as int32 (docs/splatc-patterns.md): a segment header of 4 words (row_begin, row_end,
// row_stride, kind/number of runs); an affine run of 5 words (6 when den != 1); a tabulated
// segment rows()+1 row offsets and 3 words per run.
int64_t Acsr::metadata_bytes() const {
  int64_t b = 0;
  for (const Segment& s : segments) {
    b += 4 * 4;
    for (const AffineRun& a : s.runs) b += a.den == 1 ? 5 * 4 : 6 * 4;
    if (s.tabulated) b += static_cast<int64_t>(s.row_ptr.size()) * 4 + static_cast<int64_t>(s.table.size()) * 3 * 4;
  }
  return b;
}

}  // namespace splat
