// Uses one symbol of each installed library, so that linking proves the exported package is complete.
#include <cstdio>

#include "libsplat/analysis/acsr.h"
#include "libtensorright/check/ir.h"
#include "trsplat/version.h"

int main() {
  splat::Acsr a;
  a.seq_len = a.kv_len = 4;
  splat::Segment s;
  s.row_end = 4;
  s.runs.push_back({1, 0, 1, 0, 1});  // the diagonal
  a.segments.push_back(s);
  std::printf("trsplat %s: nnz %lld, verdict %s\n", TRSPLAT_VERSION, static_cast<long long>(a.nnz()),
              tr::to_string(tr::Verdict::Proved));
  return a.nnz() == 4 ? 0 : 1;
}
