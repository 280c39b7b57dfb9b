#pragma once
// The per-axis profile abstraction (docs/rank-bound.md, "Profiles"): one abstract query at the
// rank bound decides a query for every rank vector at once.
//
// The encoder's query depends on the axes of a non-single rclass R only through per-axis
// condition bodies (agg) and per-axis read arguments. What one axis contributes is its profile:
// the truth value of each body and which read arguments of one tensor are equal on it. The
// profiles an axis can have are enumerated once, on axis 0, by the solver (they do not depend on
// the other axes); the abstract query replaces each body and argument by a fresh variable and
// requires every axis to have one of the enumerated profiles. Every model of the query gives a
// model of the abstract query, so an unsatisfiable abstract query proves the query at the rank
// bound, and with it (docs/rank-bound.md) at every rank.
#include <cvc5/cvc5.h>

#include <functional>
#include <string>

#include "libtensorright/encode/encode.h"
#include "libtensorright/verify/answer.h"

namespace tr::profile {

// One metered check-sat of the solver that holds e's terms (the caller's budget per call). It may
// throw Stop to end the attempt, e.g. when the calls so far have used the caller's limit.
using Check = std::function<Answer(const char* what)>;
struct Stop {};

struct Outcome {
  bool proved = false;
  std::string detail;  // proved: the profile counts; otherwise why the abstraction did not decide
};

// e and q: the encoding at the rank bound (every non-single rclass at its bound), built in s.
// Proves q.query and, when present, q.shape_query unsatisfiable, or says why not. Never claims
// anything from an answer other than unsat.
Outcome prove(cvc5::Solver& s, const enc::Encoder& e, const enc::Query& q, const Check& check,
              int max_profiles = 64);

}  // namespace tr::profile
