// Encoding: the division/remainder building blocks agree with the evaluator's arithmetic on
// every small pair (including 0 and negative divisors), and the encoder builds one n-ary
// uninterpreted function per tensor.
#include <doctest/doctest.h>

#include <cvc5/cvc5.h>

#include "libtensorright/check/check.h"
#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/rational.h"

TEST_SUITE_BEGIN("unit");

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
  map s, i, j, k, l : R
  map t : S
  tensor X : {R: s, S: t}
  lhs sum(X, {R: i}) + sum(X, {R: k})
  rhs sum(X, {R: j}) + sum(X, {R: l})
  match i == j, k == l
})",
                            "e.tr");
  cvc5::Solver s;
  s.setLogic("ALL");
  enc::Encoder e(s, f.rules.at(0), DType::Int, {1, 1});
  CHECK_THROWS_AS(e.build(), enc::Unsupported);
}

namespace {

// Value of an Int term once its free constants are fixed by the solver's assertions.
int64_t value_at(cvc5::Solver& s, const cvc5::Term& t) {
  REQUIRE(s.checkSat().isSat());
  return s.getValue(t).getInt64Value();
}

int64_t euclid_mod_ref(int64_t a, int64_t d) {
  int64_t m = d < 0 ? -d : d;
  return ((a % m) + m) % m;
}

}  // namespace

TEST_CASE("encode: the polynomial normal form cancels index arithmetic") {
  cvc5::Solver s;
  s.setLogic("ALL");
  enc::Builder b(s);
  cvc5::Term a = s.mkConst(b.Int, "a"), p = s.mkConst(b.Int, "p"), q = s.mkConst(b.Int, "q");
  // (a + p) - a - p, (a + 1) * p - p * a - p and 2 * (a - q) + 2 * q - 2 * a all fold to 0.
  CHECK(enc::Builder::int_value(b.sub(b.sub(b.add(a, p), a), p)) == 0);
  CHECK(enc::Builder::int_value(b.sub(b.sub(b.mul(b.add(a, b.integer(1)), p), b.mul(p, a)), p)) == 0);
  CHECK(enc::Builder::int_value(
            b.sub(b.add(b.mul(b.integer(2), b.sub(a, q)), b.mul(b.integer(2), q)), b.mul(b.integer(2), a))) == 0);
  // Equal polynomials are the same term, so comparisons of them fold.
  CHECK(enc::Builder::is_true(b.eq(b.add(a, b.mul(p, q)), b.add(b.mul(q, p), a))));
  CHECK(enc::Builder::is_true(b.lt(b.add(a, p), b.add(b.add(p, a), b.integer(1)))));
  // Multiples of a symbolic divisor leave the division: p * ((a + p) div p) = p * (a div p) + p,
  // both with the zero-divisor guard (x div 0 = 0).
  cvc5::Term lhs = b.mul(p, b.ediv(b.add(a, p), p));
  cvc5::Term rhs = b.add(b.mul(p, b.ediv(a, p)), p);
  CHECK(enc::Builder::int_value(b.sub(lhs, rhs)) == 0);
  // mod drops the multiples too: (a + 3 p q) mod p = a mod p where p != 0.
  cvc5::Term m = b.emod(b.add(a, b.mul(b.integer(3), b.mul(p, q))), p);
  REQUIRE(m.getKind() == cvc5::Kind::ITE);
  CHECK(m[2] == s.mkTerm(cvc5::Kind::INTS_MODULUS, {a, p}));
}

TEST_CASE("encode: div/mod reductions and the normal form agree with the evaluator's arithmetic" * doctest::test_suite("solver")) {
  cvc5::Solver s;
  s.setLogic("ALL");
  s.setOption("produce-models", "true");
  s.setOption("incremental", "true");
  enc::Builder b(s);
  cvc5::Term a = s.mkConst(b.Int, "a"), p = s.mkConst(b.Int, "p"), q = s.mkConst(b.Int, "q");
  cvc5::Term pq_a = b.add(b.mul(p, q), a);  // dividend with a multiple of the divisor
  cvc5::Term ed = b.ediv(pq_a, p), em = b.emod(pq_a, p), fd = b.floor_div(pq_a, p), tr_ = b.trunc_rem(pq_a, p);
  cvc5::Term lit = b.ediv(b.add(b.mul(b.integer(6), q), a), b.integer(-3));  // literal divisor
  cvc5::Term guarded = b.mul(p, b.ediv(b.add(a, p), p));                     // x * ite(x = 0, 0, Y)
  for (int64_t av = -5; av <= 5; ++av)
    for (int64_t pv = -3; pv <= 3; ++pv)
      for (int64_t qv = -2; qv <= 2; ++qv) {
        CAPTURE(av);
        CAPTURE(pv);
        CAPTURE(qv);
        s.push();
        s.assertFormula(b.eq(a, b.integer(av)));
        s.assertFormula(b.eq(p, b.integer(pv)));
        s.assertFormula(b.eq(q, b.integer(qv)));
        int64_t x = pv * qv + av;
        int64_t e_mod = pv == 0 ? x : euclid_mod_ref(x, pv);
        CHECK(value_at(s, em) == e_mod);
        CHECK(value_at(s, ed) == (pv == 0 ? 0 : (x - e_mod) / pv));
        CHECK(value_at(s, fd) == (pv == 0 ? 0 : floor_div(x, pv)));
        CHECK(value_at(s, tr_) == (pv == 0 ? x : x % pv));
        int64_t y = 6 * qv + av, ym = euclid_mod_ref(y, -3);
        CHECK(value_at(s, lit) == (y - ym) / -3);
        int64_t g = av + pv;
        CHECK(value_at(s, guarded) == (pv == 0 ? 0 : pv * ((g - euclid_mod_ref(g, pv)) / pv)));
        s.pop();
      }
}

TEST_CASE("encode: real inverses are pushed through products, inverses and exp soundly") {
  cvc5::Solver s;
  s.setLogic("ALL");
  s.setOption("produce-models", "true");
  s.setOption("incremental", "true");
  enc::Builder b(s);
  cvc5::Term x = s.mkConst(b.Real, "x"), y = s.mkConst(b.Real, "y"), z = s.mkConst(b.Real, "z");
  // The total inverse written out, without any rewriting.
  auto inv = [&](const cvc5::Term& t) {
    return s.mkTerm(cvc5::Kind::ITE, {s.mkTerm(cvc5::Kind::EQUAL, {t, b.real(0)}), b.real(0),
                                      s.mkTerm(cvc5::Kind::DIVISION, {b.real(1), t})});
  };
  auto mul = [&](const cvc5::Term& u, const cvc5::Term& v) { return s.mkTerm(cvc5::Kind::MULT, {u, v}); };
  // x / (y / z), (x / y) / z and -(x*y) inverted, each rewritten vs. literally.
  std::vector<std::pair<cvc5::Term, cvc5::Term>> cases = {
      {b.real_div(x, b.real_div(y, z)), mul(x, inv(mul(y, inv(z))))},
      {b.real_div(b.real_div(x, y), z), mul(mul(x, inv(y)), inv(z))},
      {b.inverse(b.neg(b.mul(x, y))), inv(s.mkTerm(cvc5::Kind::NEG, {mul(x, y)}))},
      {b.inverse(b.inverse(y)), inv(inv(y))},
  };
  const int64_t vals[] = {-2, 0, 1, 3};
  for (int64_t xv : vals)
    for (int64_t yv : vals)
      for (int64_t zv : vals) {
        s.push();
        s.assertFormula(b.eq(x, b.real(xv)));
        s.assertFormula(b.eq(y, b.real(yv)));
        s.assertFormula(b.eq(z, b.real(zv, 2)));
        for (const auto& [rewritten, literal] : cases) {
          s.push();
          s.assertFormula(s.mkTerm(cvc5::Kind::DISTINCT, {rewritten, literal}));
          CAPTURE(xv);
          CAPTURE(yv);
          CAPTURE(zv);
          CHECK(s.checkSat().isUnsat());
          s.pop();
        }
        s.pop();
      }
  // Quotients written differently become products of the same factors (equal for cvc5's
  // rewriter, no nonlinear reasoning); exp splits over sums.
  CHECK(s.simplify(b.real_div(x, b.real_div(y, z))) == s.simplify(b.real_div(b.mul(x, z), y)));
  CHECK(b.exp(b.sub(x, y)) == b.mul(b.exp(x), b.exp(b.neg(y))));
  CHECK(b.inverse(b.exp(y)) == b.exp(b.neg(y)));
  CHECK(b.exp(b.real(0)) == b.real(1));
}

TEST_CASE("encode: a derived map is replaced by its definition") {
  auto f = load_rule_source(R"(
rule r : int {
  rclass R
  map s, st : R
  map n : R = s - st
  tensor A : {R: s}
  lhs slice(A, start={R: st})
  rhs slice(A, start={R: st})
  expect proved
})",
                            "e.tr");
  const Rule& rule = f.rules.at(0);
  cvc5::Solver s;
  s.setLogic("ALL");
  enc::Encoder e(s, rule, DType::Int, {2});
  REQUIRE(e.map_consts.size() == 3);
  for (int j = 0; j < 2; ++j) {
    CHECK(e.map_consts[0][j].getKind() == cvc5::Kind::CONSTANT);
    // n_j = s_j - st_j: the same term as building the difference.
    CHECK(e.map_consts[2][j] == e.b.sub(e.map_consts[0][j], e.map_consts[1][j]));
  }
  // Its precondition n == s - st is then trivially true: only s, st and the index are declared.
  enc::Query q = e.build();
  for (const auto& p : rule.pre) CHECK(enc::Builder::is_true(e.iexpr(*p.cond, -1)));
  CHECK(q.query.toString().find("n_0") == std::string::npos);
}

TEST_SUITE_END();
