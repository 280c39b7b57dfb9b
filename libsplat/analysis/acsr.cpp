#include "libsplat/analysis/acsr.h"

#include <algorithm>

namespace splat {

std::vector<Run> Acsr::row(int64_t i) const {
  std::vector<Run> out;
  for (const Segment& s : segments) {
    if (i < s.row_begin || i >= s.row_end || (i - s.row_begin) % s.row_stride != 0) continue;
    if (s.tabulated) {
      int64_t r = (i - s.row_begin) / s.row_stride;
      out.assign(s.table.begin() + s.row_ptr[r], s.table.begin() + s.row_ptr[r + 1]);
    } else {
      for (const AffineRun& a : s.runs) out.push_back(a.at(i));
    }
    break;
  }
  std::erase_if(out, [](const Run& r) { return r.count <= 0; });
  std::sort(out.begin(), out.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  return out;
}

int64_t Acsr::nnz() const {
  int64_t n = 0;
  for (int64_t i = 0; i < seq_len; ++i)
    for (const Run& r : row(i)) n += r.count;
  return n;
}

int64_t Acsr::metadata_bytes() const {
  int64_t b = 0;
  for (const Segment& s : segments) {
    b += 3 * sizeof(int64_t) + 1;
    b += static_cast<int64_t>(s.runs.size() * 5 * sizeof(int32_t));
    b += static_cast<int64_t>(s.row_ptr.size() * sizeof(int32_t) + s.table.size() * 3 * sizeof(int32_t));
  }
  return b;
}

}  // namespace splat
