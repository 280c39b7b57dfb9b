// Encoding: the division/remainder building blocks agree with the evaluator's arithmetic on
// every small pair (including 0 and negative divisors), and the encoder builds one n-ary
// uninterpreted function per tensor.
#include <doctest/doctest.h>

#include <cvc5/cvc5.h>

#include "libtensorright/check/check.h"
#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/rational.h"

using namespace tr;

namespace {

int64_t solve_int(cvc5::Solver& s, const cvc5::Term& t) {
  REQUIRE(s.checkSat().isSat());
  return s.getValue(t).getInt64Value();
}

}  // namespace

TEST_CASE("encode: floor division, truncated and Euclidean remainder match the evaluator") {
  cvc5::Solver s;
  s.setLogic("ALL");
  s.setOption("produce-models", "true");
  s.setOption("incremental", "true");
  enc::Builder b(s);
  cvc5::Term x = s.mkConst(b.Int, "x"), y = s.mkConst(b.Int, "y");
  cvc5::Term fd = b.floor_div(x, y), tr_ = b.trunc_rem(x, y), ed = b.ediv(x, y), em = b.emod(x, y);
  for (int64_t a = -7; a <= 7; ++a)
    for (int64_t d = -3; d <= 3; ++d) {
      s.push();
      s.assertFormula(b.eq(x, b.integer(a)));
      s.assertFormula(b.eq(y, b.integer(d)));
      CAPTURE(a);
      CAPTURE(d);
      CHECK(solve_int(s, fd) == (d == 0 ? 0 : floor_div(a, d)));
      CHECK(solve_int(s, tr_) == (d == 0 ? a : a % d));
      int64_t er = d == 0 ? a : ((a % d) + (d < 0 ? -d : d)) % (d < 0 ? -d : d);
      CHECK(solve_int(s, em) == er);
      if (d != 0) CHECK(solve_int(s, ed) * d + er == a);
      // The folded forms (literal operands) agree with the symbolic ones.
      CHECK(enc::Builder::int_value(b.floor_div(b.integer(a), b.integer(d))) == (d == 0 ? 0 : floor_div(a, d)));
      CHECK(enc::Builder::int_value(b.trunc_rem(b.integer(a), b.integer(d))) == (d == 0 ? a : a % d));
      CHECK(enc::Builder::int_value(b.emod(b.integer(a), b.integer(d))) == er);
      s.pop();
    }
}

TEST_CASE("encode: real division and remainder are total") {
  cvc5::Solver s;
  s.setLogic("ALL");
  s.setOption("produce-models", "true");
  enc::Builder b(s);
  cvc5::Term x = s.mkConst(b.Real, "x"), y = s.mkConst(b.Real, "y");
  s.assertFormula(b.eq(x, b.real(7, 2)));
  s.assertFormula(b.eq(y, b.real(0)));
  cvc5::Term q = b.real_div(x, y), r = b.real_rem(x, y);
  REQUIRE(s.checkSat().isSat());
  CHECK(s.getValue(q).getRealValue() == s.getValue(b.real(0)).getRealValue());
  CHECK(s.getValue(r).getRealValue() == s.getValue(b.real(7, 2)).getRealValue());
}

TEST_CASE("encode: one uninterpreted function per tensor with one Int argument per axis") {
  auto f = load_rule_source(R"(
rule r : real {
  rclass R, S
  map s : R
  map t : S
  tensor A : {R: s, S: t}
  tensor B : {S: t}
  lhs A + broadcast(B, {R: s})
  rhs A + broadcast(B, {R: s})
})",
                            "e.tr");
  const Rule& rule = f.rules.at(0);
  cvc5::Solver s;
  s.setLogic("ALL");
  enc::Encoder e(s, rule, DType::Real, {3, 2});
  enc::Query q = e.build();
  REQUIRE(e.tensor_fns.size() == 2);
  CHECK(e.tensor_fns[0].getSort().getFunctionArity() == 5);
  CHECK(e.tensor_fns[1].getSort().getFunctionArity() == 2);
  CHECK(e.tensor_fns[0].getSort().getFunctionCodomainSort().isReal());
  CHECK(e.index.at(AxisKey{0, ""}).size() == 3);
  // Identical sides: the element goal folds away entirely.
  CHECK(enc::Builder::is_true(q.eq_goal));
  s.assertFormula(q.query);
  CHECK(s.checkSat().isUnsat());
}

TEST_CASE("encode: forms outside the encoding are reported as unsupported") {
  auto f = load_rule_source(R"(
rule r : int {
  rclass R, S
  map s, i, j : R
  map t : S
  tensor X : {R: s, S: t}
  lhs sum(X, {R: i}) + 1
  rhs sum(X, {R: j}) + 1
  match i == j
})",
                            "e.tr");
  cvc5::Solver s;
  s.setLogic("ALL");
  enc::Encoder e(s, f.rules.at(0), DType::Int, {1, 1});
  CHECK_THROWS_AS(e.build(), enc::Unsupported);
}
