#pragma once
// Rank bounds (docs/rank-bound.md): per rclass, the number of axes k_R such that checking every
// rank vector in [1, k_R] covers every rank. Computed on the rank-1 query of the encoder.
#include <cvc5/cvc5.h>

#include <string>
#include <vector>

#include "libtensorright/check/ir.h"

namespace tr::bound {

struct Bounds {
  std::vector<int> k;             // per rclass (single rclasses: 1)
  std::vector<int> conditions;    // per rclass: witness axes for conditions (worst cause)
  std::vector<int> access_pairs;  // per rclass: pairs of reads of one tensor
};

// Builds the rank-1 query in `solver` and counts witnesses. Throws enc::Unsupported.
Bounds infer(const Rule& rule, DType dtype, cvc5::Solver& solver);

}  // namespace tr::bound
