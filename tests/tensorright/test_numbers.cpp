// Exact numbers of any size end to end: literals beyond int64 and beyond 18 decimal digits are
// exact in the checked IR and the evaluator, proved rules with such literals stay proved, and
// counterexamples whose values leave int64 are replayed and printed in full. Sizes and indices
// stay machine integers: one beyond int64 is a clean EvalOverflow / `unknown` with its reason.
#include <doctest/doctest.h>

#include <string>

#include "support.h"
#include "libtensorright/check/check.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/verify/verify.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

const std::string kDir = std::string(TRSPLAT_SOURCE_DIR) + "/tests/rules/";

RuleResult verify(const Rule& r, const std::string& file = "n.tr") {
  VerifyOptions o;
  o.timeout_s = 20;
  return verify_rule(r, file, o);
}

std::string value_of(const std::vector<std::pair<std::string, std::string>>& xs, const std::string& k) {
  for (const auto& [a, b] : xs)
    if (a == k) return b;
  return "<missing " + k + ">";
}

const Rule& find_rule(const LoadedFile& f, const std::string& name) {
  for (const auto& r : f.rules)
    if (r.name == name) return r;
  FAIL("no rule " << name);
  return f.rules.at(0);
}

}  // namespace

TEST_CASE("numbers: literals of any length are exact in the checked rule") {
  const std::string ten30 = "1000000000000000000000000000000";
  Rule r = trtest::one_rule(R"(
rule big : real {
  rclass R
  map s : R
  tensor A : {R: s}
  pre s <= 100000000000000000000
  lhs A * 1234567890123456789012345678901234567890.5 + -)" + ten30 + R"(
  rhs A
})");
  const Node& add = *r.lhs;
  REQUIRE(add.op == Op::Add);
  const Literal& dec = add.args[0]->args[1]->lit;
  CHECK(dec.kind == Literal::Kind::Real);
  CHECK(dec.num.get_str() == "2469135780246913578024691357802469135781");  // in lowest terms
  CHECK(dec.den == 2);
  const Literal& neg = add.args[1]->lit;  // `-10^30` folds into one exact literal
  CHECK(neg.kind == Literal::Kind::Int);
  CHECK(neg.num.get_str() == "-" + ten30);
  bool big_pre = false;  // the precondition keeps its literal beyond int64
  for (const auto& p : r.pre) big_pre = big_pre || print_iexpr(r, *p.cond).find("<= 100000000000000000000") != std::string::npos;
  CHECK(big_pre);

  // 10,000 digits is the documented limit: exactly that many load, one more is a located error.
  Rule longest = trtest::one_rule("rule r : int {\n  lhs 1 + " + std::string(10000, '7') + "\n  rhs 0\n}");
  CHECK(longest.lhs->args[1]->lit.num.get_str() == std::string(10000, '7'));
  CHECK(trtest::check_error("rule r : int {\n  lhs 0." + std::string(10000, '1') + "\n  rhs 0\n}")
            .rfind("t.tr:2:7: error: number literal has more than 10000 digits", 0) == 0);
}

TEST_CASE("numbers: the evaluator computes big literals and products exactly") {
  Rule r = trtest::one_rule(R"(
rule r : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A * 3037000500 * 3037000500 + 100000000000000000000000000000
  rhs A
})");
  Instance inst;
  inst.dtype = DType::Int;
  inst.rank[0] = 1;
  inst.maps[0] = {1};
  Index idx{{AxisKey{0, ""}, {0}}};
  inst.inputs[0].elems[idx] = Value::integer(-2);
  SideCheck sc = check_at(r, inst, idx);
  REQUIRE(sc.lhs.defined);
  // -2 * 3037000500^2 + 10^29
  CHECK(sc.lhs.value->str() == "99999999981553255925999500000");
  CHECK_FALSE(sc.holds);
}

TEST_CASE("numbers: a size beyond int64 is a clean EvalOverflow or unknown, never a crash") {
  Rule r = trtest::one_rule(R"(
rule r : int {
  rclass R
  lhs const(1, {R: 100000000000000000000})
  rhs const(2, {R: 100000000000000000000})
})");
  Instance inst;
  inst.dtype = DType::Int;
  inst.rank[0] = 1;
  CHECK_THROWS_WITH_AS(eval(r, r.lhs, inst),
                       doctest::Contains("100000000000000000000 does not fit in 64 bits"), EvalOverflow);
  RuleResult v = verify(r);
  CHECK(v.verdict == Verdict::Unknown);
  CHECK(v.note.find("does not fit in 64 bits") != std::string::npos);

  // A counterexample exists only where the map s exceeds 10^20: the model cannot become an
  // instance (maps are sizes), which is said, not crashed on.
  RuleResult m = verify(trtest::one_rule(R"(
rule r : any {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs slice(A, start={R: 0}, end={R: min(s, 100000000000000000000)})
  rhs A
})"));
  CHECK(m.verdict == Verdict::Unknown);
  CHECK(m.note.find("map s = ") != std::string::npos);
  CHECK(m.note.find("does not fit in 64 bits") != std::string::npos);
}

TEST_CASE("numbers: tests/rules/proved/numbers.tr is proved" * doctest::test_suite("corpus")) {
  LoadedFile f = load_rule_file(kDir + "proved/numbers.tr");
  REQUIRE(f.rules.size() >= 4);
  for (const auto& r : f.rules) {
    CAPTURE(r.name);
    RuleResult v = verify(r, f.path);
    CHECK(v.verdict == Verdict::Proved);
    CHECK(r.expect == Verdict::Proved);
  }
}

TEST_CASE("numbers: counterexamples beyond int64 are replayed and printed in full" * doctest::test_suite("corpus")) {
  LoadedFile f = load_rule_file(kDir + "counterexample/numbers.tr");
  REQUIRE(f.rules.size() >= 4);
  for (const auto& r : f.rules) {
    CAPTURE(r.name);
    RuleResult v = verify(r, f.path);
    CHECK(r.expect == Verdict::Counterexample);
    REQUIRE(v.verdict == Verdict::Counterexample);
    REQUIRE(v.cex.has_value());
    CHECK(v.cex->text.find("lhs = " + v.cex->lhs_value) != std::string::npos);
  }

  // The product leaves int64 only on the way: A = +-1 gives lhs +-9223372037000250000.
  RuleResult p = verify(find_rule(f, "product_beyond_int64"), f.path);
  REQUIRE(p.cex.has_value());
  BigInt a(value_of(p.cex->inputs, "A[R=(0)]"));
  CHECK(BigInt(p.cex->lhs_value) == a * BigInt("9223372037000250000"));
  CHECK(BigInt(p.cex->rhs_value) == a * BigInt("9223372037000249999"));

  // The element itself is beyond int64; replay it independently through the evaluator.
  const Rule& er = find_rule(f, "element_beyond_int64");
  RuleResult e = verify(er, f.path);
  REQUIRE(e.cex.has_value());
  BigInt x(value_of(e.cex->inputs, "A[R=(0)]"));
  CHECK(x > BigInt("100000000000000000000"));
  CHECK(e.cex->lhs_value == x.get_str());
  Instance inst;
  inst.dtype = DType::Int;
  inst.rank[0] = 1;
  inst.maps[0] = {1};
  Index idx{{AxisKey{0, ""}, {0}}};
  inst.inputs[0].elems[idx] = Value::integer(x);
  SideCheck sc = check_at(er, inst, idx);
  CHECK_FALSE(sc.holds);
  CHECK(sc.lhs.value->str() == e.cex->lhs_value);

  // A scalar beyond int64 through a precondition; a 22-digit decimal.
  RuleResult s = verify(find_rule(f, "scalar_beyond_int64"), f.path);
  REQUIRE(s.cex.has_value());
  CHECK(BigInt(value_of(s.cex->scalars, "n")) >= BigInt("100000000000000000000"));
  RuleResult d = verify(find_rule(f, "decimal_22_digits"), f.path);
  REQUIRE(d.cex.has_value());
  BigInt da(value_of(d.cex->inputs, "A[R=(0)]"));
  CHECK(Rational::parse(d.cex->lhs_value) ==
        Rational(da) * Rational(BigInt("1000000000000000000001"), BigInt("10000000000000000000000")));
}

TEST_SUITE_END();
