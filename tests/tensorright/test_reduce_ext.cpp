// The reduce_max / reduce_min / reduce_prod extension (ir.h, Reducer): syntax round trip, checker
// facts and errors, exact evaluator values (empty ranges, infinities, Unknown), the rule files
// rules/xla/reduce-init.tr and rules/xla-mutants/reduce-init.tr under random testing, and the
// verifier's verdicts on a few such rules (the encoding: test_reduce_encode.cpp).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "support.h"
#include "libtensorright/check/check.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/syntax/syntax.h"
#include "libtensorright/verify/verify.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

using trtest::check_error;
using trtest::one_rule;

int id_of(const std::vector<MapDecl>& v, const std::string& n) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i].name == n) return static_cast<int>(i);
  throw std::runtime_error("no map " + n);
}

// The rule used by the evaluator tests: X has one reduced rclass R0 and one kept rclass R1; the
// left side is the reduction under test (the right side is irrelevant here).
Rule eval_rule(const std::string& dtype, const std::string& lhs) {
  return one_rule("rule t : " + dtype + " {\n rclass R0, R1\n map s0, i : R0\n map s1 : R1\n"
                  " tensor X : {R0: s0, R1: s1}\n scalar c\n lhs " + lhs + "\n rhs const(0, {R1: s1})\n}\n");
}

// The left side at index R1 = (0) with R0 of rank 1 and the given elements along R0 (s1 = 1).
Point eval_at(const Rule& r, DType t, const std::vector<Value>& xs, Value c) {
  Instance in;
  in.dtype = t;
  in.rank = {{0, 1}, {1, 1}};
  in.maps[id_of(r.maps, "s0")] = {static_cast<int64_t>(xs.size())};
  in.maps[id_of(r.maps, "i")] = {0};
  in.maps[id_of(r.maps, "s1")] = {1};
  in.scalars[0] = c;
  for (size_t k = 0; k < xs.size(); ++k)
    in.inputs[0].elems[Index{{AxisKey{0, ""}, {static_cast<int64_t>(k)}}, {AxisKey{1, ""}, {0}}}] = xs[k];
  Evaluated e = eval(r, r.lhs, in);
  REQUIRE(e.defined);
  return e.at(Index{{AxisKey{1, ""}, {0}}});
}

Value I(int64_t v) { return Value::integer(v); }
Value Q(int64_t n, int64_t d) { return Value::real(Rational(n, d)); }

std::string value_at(const std::string& dtype, const std::string& lhs, const std::vector<Value>& xs,
                     Value c = Value::integer(0)) {
  Rule r = eval_rule(dtype, lhs);
  DType t = dtype == "real" ? DType::Real : DType::Int;
  if (t == DType::Real && c.kind == Value::Kind::Int) c = Value::real(Rational(c.i));
  Point p = eval_at(r, t, xs, c);
  if (!p.defined) return "undefined: " + p.why;
  return p.value->str();
}

}  // namespace

TEST_CASE("reduce ext: parse -> print -> parse is a fixpoint and checks to the same IR") {
  const std::string src =
      "rule r : num {\n"
      "  rclass R0, R1\n"
      "  map s0, i, j, k : R0\n"
      "  map s1 : R1\n"
      "  tensor X : {R0: s0, R1: s1}\n"
      "  scalar c\n"
      "  lhs max(reduce_max(X, {R0: i}, init=-inf), reduce_min(X, {R0: j}, init=inf))\n"
      "  rhs reduce_prod(X + 1, {R0: k}, init=c * 2)\n"
      "}\n";
  syntax::File f1 = syntax::parse(src, "a.tr");
  std::string p1 = syntax::print_file(f1);
  CHECK(p1.find("reduce_max(X, {R0: i}, init=-inf)") != std::string::npos);
  CHECK(p1.find("reduce_min(X, {R0: j}, init=inf)") != std::string::npos);
  CHECK(p1.find("reduce_prod(X + 1, {R0: k}, init=c * 2)") != std::string::npos);
  syntax::File f2 = syntax::parse(p1, "b.tr");
  CHECK(syntax::print_file(f2) == p1);
  LoadedFile c1 = check_file(f1), c2 = check_file(f2);
  REQUIRE(c1.rules.size() == 1);
  REQUIRE(c2.rules.size() == 1);
  CHECK(dump_rule(c1.rules[0]) == dump_rule(c2.rules[0]));
  // The IR printer writes the same notation.
  CHECK(print_node(c1.rules[0], *c1.rules[0].rhs) == "reduce_prod((X + 1), {R0: k}, init=(c * 2))");
}

TEST_CASE("reduce ext: the checked IR (reducer, init in args[1], shape, types)") {
  Rule r = one_rule(
      "rule r : int {\n rclass R0, R1\n map s0, i : R0\n map s1 : R1\n tensor X : {R0: s0, R1: s1}\n"
      " lhs reduce_max(X, {R0: i}, init=-inf)\n rhs reduce_prod(X, {R0: i'}, init=1)\n map i' : R0\n}\n");
  const Node& l = *r.lhs;
  CHECK(l.op == Op::Sum);
  CHECK(l.reducer == Reducer::Max);
  REQUIRE(l.args.size() == 2);
  CHECK(l.args[1]->op == Op::Literal);
  CHECK(l.args[1]->lit.kind == Literal::Kind::NegInf);
  CHECK(l.args[1]->shape.empty());
  CHECK(l.shape.size() == 1);
  CHECK(l.shape.count(AxisKey{1, ""}) == 1);
  CHECK(l.etype == EType{true, DType::Int});  // X is a T tensor
  CHECK(l.sum_index.size() == 1);
  CHECK(r.rhs->reducer == Reducer::Prod);
  CHECK(l.args[1]->etype == EType{true, DType::Int});  // -inf takes X's type
  CHECK(r.rhs->args[1]->etype == EType{true, DType::Int});
  Rule ri = one_rule("rule r : real {\n rclass R\n map n, i, j : R\n tensor Y : int {R: n}\n"
                     " lhs reduce_prod(Y, {R: i}, init=2)\n rhs reduce_prod(Y, {R: j}, init=2)\n match i == j\n}\n");
  CHECK(ri.lhs->etype == EType{false, DType::Int});
  CHECK(ri.lhs->args[1]->etype == EType{false, DType::Int});  // the literal takes Y's concrete type
  CHECK(dump_rule(r).find("reducer=reduce_max") != std::string::npos);
  // A plain sum keeps one argument and Reducer::Sum.
  Rule s = one_rule("rule s : num {\n rclass R\n map n, i, j : R\n tensor X : {R: n}\n lhs sum(X, {R: i})\n"
                    " rhs sum(X, {R: j})\n match i == j\n}\n");
  CHECK(s.lhs->reducer == Reducer::Sum);
  CHECK(s.lhs->args.size() == 1);
  // Summation indices of the new reductions take part in `match` like those of sum.
  Rule m = one_rule("rule m : num {\n rclass R\n map n, i, j : R\n tensor X : {R: n}\n"
                    " lhs reduce_min(X, {R: i}, init=inf)\n rhs reduce_min(X, {R: j}, init=inf)\n match j == i\n}\n");
  REQUIRE(m.match.size() == 1);
  CHECK(m.maps[m.match[0].lhs_si].name == "i");
  CHECK(m.maps[m.match[0].rhs_si].name == "j");
}

TEST_CASE("reduce ext: checker errors are located") {
  // The right side is the left side with its own summation index j.
  auto rule = [](const std::string& dt, const std::string& decl, const std::string& lhs) {
    std::string rhs = lhs;
    if (auto p = rhs.find("{R: i}"); p != std::string::npos) rhs.replace(p, 6, "{R: j}");
    return "rule r : " + dt + " {\n rclass R, S\n map n, i, j : R\n map m : S\n tensor X : {R: n}\n" + decl +
           " lhs " + lhs + "\n rhs " + rhs + "\n match i == j\n}\n";
  };
  // Bad init types: bool against a numeric tensor, a decimal in an int rule, real against int.
  std::string e = check_error(rule("num", "", "reduce_max(X, {R: i}, init=true)"));
  CHECK(e.find("t.tr:6:33: error: the init value of 'reduce_max': element types") != std::string::npos);
  e = check_error(rule("int", "", "reduce_min(X, {R: i}, init=0.5)"));
  CHECK(e.find("t.tr:6:33: error: a decimal literal or 'nan' needs element type real") != std::string::npos);
  e = check_error(rule("int", " scalar r : real\n", "reduce_prod(X, {R: i}, init=r)"));
  CHECK(e.find("t.tr:7:34: error: the init value of 'reduce_prod': element types") != std::string::npos);
  // The init is a scalar, not a tensor.
  e = check_error(rule("num", " tensor Y : {S: m}\n", "reduce_max(X, {R: i}, init=Y)"));
  CHECK(e.find("t.tr:7:33: error: the init value of 'reduce_max' must be a scalar") != std::string::npos);
  // The init is required; other attributes are not accepted.
  e = check_error(rule("num", "", "reduce_max(X, {R: i})"));
  CHECK(e.find("t.tr:6:6: error: 'reduce_max' needs an init value") != std::string::npos);
  e = check_error(rule("num", "", "reduce_max(X, {R: i}, init=0, start=1)"));
  CHECK(e.find("unknown attribute 'start' of 'reduce_max'") != std::string::npos);
  // Bool tensors have no max/min/product; nor does T when the rule includes bool.
  e = check_error(rule("bool", " tensor P : bool {R: n}\n", "reduce_max(P, {R: i}, init=false)"));
  CHECK(e.find("t.tr:7:6: error: 'reduce_max' needs a numeric element type, got bool") != std::string::npos);
  e = check_error(rule("any", " scalar c\n", "reduce_min(X, {R: i}, init=c)"));
  CHECK(e.find("'reduce_min' needs a numeric element type, but T is also bool") != std::string::npos);
  // Axes: at least one, and each an axis of the operand.
  e = check_error(rule("num", "", "reduce_prod(X, {}, init=1)"));
  CHECK(e.find("'reduce_prod' needs at least one axis") != std::string::npos);
  e = check_error(rule("num", " map k : S\n", "reduce_prod(X, {S: k}, init=1)"));
  CHECK(e.find("t.tr:7:") != std::string::npos);
  CHECK_FALSE(e.empty());
  // Positional arguments.
  e = check_error(rule("num", "", "reduce_max(X, init=0)"));
  CHECK(e.find("'reduce_max' takes 2 positional arguments, got 1") != std::string::npos);
  // The names are reserved.
  e = check_error("rule r : num {\n rclass R\n map n : R\n tensor reduce_max : {R: n}\n lhs reduce_max\n rhs reduce_max\n}\n");
  CHECK(e.find("t.tr:4:9: error: 'reduce_max' is a keyword") != std::string::npos);
  // Valid forms: ±inf init on int and real, a named scalar, scalar arithmetic.
  CHECK(check_error(rule("num", "", "reduce_max(X, {R: i}, init=-inf)")).empty());
  CHECK(check_error(rule("int", "", "reduce_min(X, {R: i}, init=inf)")).empty());
  CHECK(check_error(rule("real", " scalar c\n", "reduce_prod(X, {R: i}, init=c + 0.5)")).empty());
}

TEST_CASE("reduce ext: evaluator values, empty ranges and infinities") {
  const std::vector<Value> x = {I(3), I(-1), I(2)};
  // Finite folds with an identity init and with a non-identity init.
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=-inf)", x) == "3");
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=5)", x) == "5");
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=c)", x, I(-7)) == "3");
  CHECK(value_at("int", "reduce_min(X, {R0: i}, init=inf)", x) == "-1");
  CHECK(value_at("int", "reduce_min(X, {R0: i}, init=c)", x, I(-4)) == "-4");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=1)", x) == "-6");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=c)", x, I(2)) == "-12");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=c)", x, I(0)) == "0");
  // The empty range gives the init.
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=-inf)", {}) == "-inf");
  CHECK(value_at("int", "reduce_min(X, {R0: i}, init=inf)", {}) == "inf");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=c)", {}, I(7)) == "7");
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=c)", {}, I(-2)) == "-2");
  CHECK(value_at("int", "sum(X, {R0: i})", {}) == "0");  // the core sum is unchanged
  // Infinite inits.
  CHECK(value_at("int", "reduce_max(X, {R0: i}, init=inf)", x) == "inf");
  CHECK(value_at("int", "reduce_min(X, {R0: i}, init=-inf)", x) == "-inf");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=inf)", {I(2), I(5)}) == "inf");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=inf)", {I(2), I(-5)}) == "-inf");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=-inf)", x) == "inf");  // -inf * 3 * -1 * 2
  // inf * 0 is Unknown, as for `*`, wherever the 0 is.
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=inf)", {I(0), I(2)}) == "unknown");
  CHECK(value_at("int", "reduce_prod(X, {R0: i}, init=-inf)", {I(2), I(0)}) == "unknown");
  // Infinite elements (made by a select; inputs are finite).
  CHECK(value_at("int", "reduce_min(select(X > 0, X, -inf), {R0: i}, init=inf)", x) == "-inf");
  CHECK(value_at("int", "reduce_max(select(X > 0, X, -inf), {R0: i}, init=-inf)", x) == "3");
  CHECK(value_at("int", "reduce_max(select(X > 0, inf, X), {R0: i}, init=-inf)", x) == "inf");
  CHECK(value_at("int", "reduce_min(select(X > 0, inf, X), {R0: i}, init=inf)", {I(1), I(2)}) == "inf");
  CHECK(value_at("int", "reduce_prod(select(X > 0, inf, X), {R0: i}, init=1)", {I(0), I(2)}) == "unknown");
  CHECK(value_at("int", "reduce_prod(select(X > 0, inf, X), {R0: i}, init=1)", {I(-1), I(2)}) == "-inf");
  // Reals are exact.
  const std::vector<Value> q = {Q(1, 2), Q(-3, 2), Q(2, 3)};
  CHECK(value_at("real", "reduce_prod(X, {R0: i}, init=1)", q) == "-1/2");
  CHECK(value_at("real", "reduce_max(X, {R0: i}, init=0.5)", q) == "2/3");
  CHECK(value_at("real", "reduce_min(X, {R0: i}, init=c)", q, Q(-2, 1)) == "-2");
}

TEST_CASE("reduce ext: evaluator over several axes and ranks") {
  // R0 of rank 2 with sizes (2, 2): the fold covers all four elements; R1 is kept.
  Rule r = eval_rule("int", "reduce_max(X, {R0: i}, init=-inf)");
  Rule p = eval_rule("int", "reduce_prod(X, {R0: i}, init=1)");
  Instance in;
  in.dtype = DType::Int;
  in.rank = {{0, 2}, {1, 1}};
  in.maps[id_of(r.maps, "s0")] = {2, 2};
  in.maps[id_of(r.maps, "i")] = {0, 0};
  in.maps[id_of(r.maps, "s1")] = {2};
  in.scalars[0] = I(0);
  int64_t v = 1;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t k = 0; k < 2; ++k)
        in.inputs[0].elems[Index{{AxisKey{0, ""}, {a, b}}, {AxisKey{1, ""}, {k}}}] = I(k == 0 ? v++ : -(v++));
  // column k = 0: 1, 3, 5, 7; column k = 1: -2, -4, -6, -8
  Evaluated e = eval(r, r.lhs, in);
  REQUIRE(e.defined);
  CHECK(e.at(Index{{AxisKey{1, ""}, {0}}}).value->str() == "7");
  CHECK(e.at(Index{{AxisKey{1, ""}, {1}}}).value->str() == "-2");
  Evaluated f = eval(p, p.lhs, in);
  CHECK(f.at(Index{{AxisKey{1, ""}, {0}}}).value->str() == "105");
  CHECK(f.at(Index{{AxisKey{1, ""}, {1}}}).value->str() == "384");
  // Outside the shape: undefined.
  CHECK_FALSE(e.at(Index{{AxisKey{1, ""}, {2}}}).defined);
}

// The rule files: every `expect proved` rule survives random testing, every mutant is refuted by it.
TEST_CASE("reduce ext: rules/xla/reduce-init.tr and its mutants under random testing" * doctest::test_suite("corpus")) {
  const std::string dir = std::string(TRSPLAT_SOURCE_DIR) + "/rules/";
  LoadedFile good = load_rule_file(dir + "xla/reduce-init.tr");
  LoadedFile bad = load_rule_file(dir + "xla-mutants/reduce-init.tr");
  CHECK(good.rules.size() >= 20);
  CHECK(bad.rules.size() >= 3);
  for (const Rule& rule : good.rules) {
    CAPTURE(rule.name);
    // The corpus's true rules: proved, or true but beyond the encoder (unsupported). A vacuous rule
    // has no defined left side to test.
    if (rule.expect == Verdict::Vacuous) continue;
    REQUIRE((rule.expect == Verdict::Proved || rule.expect == Verdict::Unsupported));
    RandomTestResult r = random_test(rule, 150, 11);
    CHECK(r.lhs_defined >= 100);  // the rules are not vacuous for the tester
    if (r.failing)
      FAIL_CHECK(describe(rule, *r.failing) << "index " << to_string(*r.check.failing, rule) << ": "
                                            << r.check.at.reason);
  }
  for (const Rule& rule : bad.rules) {
    CAPTURE(rule.name);
    // Every mutant is wrong; those beyond the encoder expect `unsupported` but must still fail here.
    REQUIRE((rule.expect == Verdict::Counterexample || rule.expect == Verdict::Unsupported));
    RandomTestResult r = random_test(rule, 400, 11);
    CHECK(r.failing.has_value());
  }
}

// The encoder encodes these reductions (encode/reduce.cpp; more in test_reduce_encode.cpp): a true
// rule is proved, a false one refuted, and a form without a sound encoding stays `unsupported`.
TEST_CASE("reduce ext: the verifier proves, refutes, or reports unsupported") {
  LoadedFile good = load_rule_source(
      "rule a : num {\n rclass R0, R1\n map s0, i, j : R0\n map s1 : R1\n tensor X : {R0: s0, R1: s1}\n"
      " lhs reduce_max(X, {R0: i}, init=-inf)\n rhs reduce_max(X, {R0: j}, init=-inf)\n match i == j\n}\n"
      "rule b : int {\n rclass R\n map n, i : R\n tensor X : {R: n}\n"
      " lhs X\n rhs X + 0 * broadcast(reduce_prod(X, {R: i}, init=1), {R: n})\n}\n"
      // false: the empty range gives inf
      "rule c : num {\n rclass R0, R1\n map s0, i : R0\n map s1 : R1\n tensor X : {R0: s0, R1: s1}\n"
      " lhs const(0, {R1: s1})\n rhs reduce_min(X, {R0: i}, init=inf)\n}\n",
      "g.tr");
  VerifyOptions opts;
  opts.timeout_s = 5;
  const Verdict want[] = {Verdict::Proved, Verdict::Unsupported, Verdict::Counterexample};
  REQUIRE(good.rules.size() == 3);
  for (size_t i = 0; i < good.rules.size(); ++i) {
    const Rule& rule = good.rules[i];
    CAPTURE(rule.name);
    RuleResult res = verify_rule(rule, "g.tr", opts);
    CHECK(res.verdict == want[i]);
    REQUIRE_FALSE(res.dtypes.empty());
    for (const auto& d : res.dtypes)
      if (want[i] != Verdict::Proved) CHECK(d.verdict != Verdict::Proved);
  }
}

TEST_SUITE_END();
