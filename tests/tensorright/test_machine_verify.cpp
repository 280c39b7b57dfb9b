// Verification at machine types (docs/machine-types.md): verdicts and counterexamples, dtypes whose
// literals have no value, trverify --dtypes (CheckOptions::machine), and the solver calls that
// abort cvc5 1.0.3 (the process survives; the call is out of budget).
#include <doctest/doctest.h>

#include <string>

#include "support.h"
#include "libtensorright/check/check.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/verify/verify.h"

TEST_SUITE_BEGIN("solver");

using namespace tr;

namespace {

RuleResult verify(const Rule& r, std::int64_t budget = kDefaultBudget) {
  VerifyOptions o;
  o.timeout_s = 60;
  o.budget = budget;
  return verify_rule(r, "m.tr", o);
}

const DTypeResult& at(const RuleResult& r, DType t) {
  for (const auto& d : r.dtypes)
    if (d.dtype == t) return d;
  FAIL("no result for " << to_string(t));
  return r.dtypes.at(0);
}

const std::string kHeader = "  rclass R\n  map s : R\n  tensor A, B : {R: s}\n";

}  // namespace

TEST_CASE("machine verify: A + 0 => A is proved for integers and refuted at -0.0 for floats") {
  Rule r = trtest::one_rule("rule z : s8, u64, f32, f64 {\n" + kHeader + "  lhs A + 0\n  rhs A\n}\n");
  RuleResult res = verify(r);
  CHECK(at(res, DType::S8).verdict == Verdict::Proved);
  CHECK(at(res, DType::U64).verdict == Verdict::Proved);
  CHECK(at(res, DType::F64).verdict == Verdict::Counterexample);
  REQUIRE(res.cex);
  CHECK(res.cex->dtype == DType::F32);  // the first refuted dtype in the header's order
  REQUIRE(res.cex->inputs.size() == 1);
  CHECK(res.cex->inputs[0].second == "-0.0 (0x80000000)");
  CHECK(res.cex->lhs_value == "0.0 (0x00000000)");
  CHECK(res.cex->rhs_value == "-0.0 (0x80000000)");
}

TEST_CASE("machine verify: wraparound and XLA's integer division are what the verdicts see") {
  // A + 1 > A fails at the maximum only; its counterexample is that value (shrunk to MAX).
  Rule gt = trtest::one_rule("rule g : s16 {\n" + kHeader + "  lhs A + 1 > A\n  rhs const(true, {R: s})\n}\n");
  RuleResult g = verify(gt);
  REQUIRE(g.verdict == Verdict::Counterexample);
  CHECK(g.cex->inputs.at(0).second == "32767");
  // x / 0 is -1 for signed types and the maximum for unsigned ones.
  Rule d = trtest::one_rule("rule d : s8, s32 {\n" + kHeader + "  lhs A / 0\n  rhs const(-1, {R: s})\n}\n");
  CHECK(verify(d).verdict == Verdict::Proved);
  Rule u = trtest::one_rule("rule u : u16 {\n" + kHeader + "  lhs A / 0\n  rhs const(65535, {R: s})\n}\n");
  CHECK(verify(u).verdict == Verdict::Proved);
}

TEST_CASE("machine verify: a literal with no value at a dtype makes that dtype unsupported") {
  Rule r = trtest::one_rule("rule l : s8, s16 {\n" + kHeader + "  lhs A + 300\n  rhs A + 300\n}\n");
  RuleResult res = verify(r);
  CHECK(at(res, DType::S8).verdict == Verdict::Unsupported);
  CHECK(at(res, DType::S8).reason.find("literal 300") != std::string::npos);
  CHECK(at(res, DType::S16).verdict == Verdict::Proved);
  // nan, like a decimal, needs real or float types (a checker error otherwise); real has no NaN.
  Rule n = trtest::one_rule("rule n : real, f32 {\n" + kHeader + "  lhs A != nan\n  rhs const(true, {R: s})\n}\n");
  RuleResult rn = verify(n);
  CHECK(at(rn, DType::Real).verdict == Verdict::Unsupported);
  CHECK(at(rn, DType::F32).verdict == Verdict::Proved);
  CHECK(dtype_problem(n, DType::Real).value_or("").find("nan") != std::string::npos);
  CHECK(!dtype_problem(n, DType::F32));
  // inf exists for int (TensorRight's infinities) and the float types, not for s32.
  Rule i = trtest::one_rule("rule i : int, s32, f64 {\n" + kHeader + "  lhs max(A, -inf)\n  rhs A\n}\n");
  RuleResult ri = verify(i);
  CHECK(at(ri, DType::S32).verdict == Verdict::Unsupported);
  CHECK(at(ri, DType::S32).reason.find("literal -inf") != std::string::npos);
  CHECK(at(ri, DType::Int).verdict == Verdict::Proved);
  CHECK(at(ri, DType::F64).verdict == Verdict::Proved);  // a NaN A wins; nothing is below -inf
}

TEST_CASE("machine verify: --dtypes maps int to the integer types and real to the float types") {
  CheckOptions o;
  o.machine = std::vector<DType>{DType::S8, DType::U32, DType::F32};
  LoadedFile f = load_rule_source("rule a : num {\n" + kHeader + "  lhs A\n  rhs A\n}\n"
                                  "rule b : real {\n" + kHeader + "  lhs A * 0.5\n  rhs A / 2\n}\n"
                                  "rule c : bool {\n" + kHeader + "  lhs A\n  rhs A\n}\n"
                                  "rule d : num {\n  rclass K single\n  map n : K\n  tensor A : {K: n}\n"
                                  "  lhs A + iota({K: n}, K)\n  rhs A + iota({K: n}, K)\n}\n",
                                  "d.tr", o);
  REQUIRE(f.rules.size() == 3);
  CHECK(f.rules[0].dtypes == std::vector<DType>{DType::S8, DType::U32, DType::F32});
  CHECK(f.rules[1].dtypes == std::vector<DType>{DType::F32});
  CHECK(f.rules[2].dtypes == std::vector<DType>{DType::Bool});
  REQUIRE(f.skipped.size() == 1);  // iota is int, T is s8, u32 or f32
  CHECK(f.skipped[0].name == "d");
  CHECK(f.skipped[0].reason.find("element types") != std::string::npos);
  // With integer types only, the rule's int (iota, declared `int` tensors) is T; iota wraps.
  o.machine = std::vector<DType>{DType::S8};
  Rule w = trtest::one_rule("rule w : int {\n  rclass K single\n  map n : K\n  tensor I : int {K: n}\n"
                            "  pre n == 200\n  lhs iota({K: n}, K) >= 0\n  rhs const(true, {K: n})\n}\n");
  CHECK(verify(w).verdict == Verdict::Proved);  // mathematically
  LoadedFile fw = load_rule_source("rule w : int {\n  rclass K single\n  map n : K\n  tensor I : int {K: n}\n"
                                   "  pre n == 200\n  lhs iota({K: n}, K) >= 0\n  rhs const(true, {K: n})\n}\n",
                                   "w.tr", o);
  REQUIRE(fw.rules.size() == 1);
  RuleResult rw = verify(fw.rules[0]);
  REQUIRE(rw.verdict == Verdict::Counterexample);  // at s8, iota(200) reaches 128, which is -128
  CHECK(rw.cex->lhs_value == "false");
  o.machine = std::vector<DType>{DType::F64};
  LoadedFile g = load_rule_source("rule e : int {\n" + kHeader + "  lhs A\n  rhs A\n}\n", "e.tr", o);
  CHECK(g.rules.empty());
  REQUIRE(g.skipped.size() == 1);
  CHECK(g.skipped[0].reason.find("no type of --dtypes") != std::string::npos);
}

TEST_CASE("machine verify: a solver call that would abort cvc5 is out of budget, and the process survives") {
  // cvc5 1.0.3 aborts when a resource limit interrupts CaDiCaL while bit-blasting; this rule's
  // s32 task does so at a budget of 20,000 units (docs/machine-types.md). The call is made in a
  // forked copy first, whose death is the verdict `timeout`.
  CheckOptions o;
  o.machine = std::vector<DType>{DType::S32};
  LoadedFile f = load_rule_file(std::string(TRSPLAT_SOURCE_DIR) + "/rules/xla/conv.tr", o);
  const Rule* rule = nullptr;
  for (const auto& r : f.rules)
    if (r.name == "conv_fold_input_pad") rule = &r;
  REQUIRE(rule);
  RuleResult res = verify(*rule, 20000);
  CHECK(res.verdict == Verdict::Timeout);
  CHECK(at(res, DType::S32).reason.find("cvc5 stopped in its bit-blaster") != std::string::npos);
}

TEST_CASE("machine verify: float sums are compared element by element, and only so") {
  const std::string sums = "  rclass R\n  map r, i, i2 : R\n  tensor A, B : {R: r}\n";
  Rule same = trtest::one_rule("rule s : f32, s32 {\n" + sums +
                               "  lhs sum(A + B, {R: i})\n  rhs sum(B + A, {R: i2})\n  match i == i2\n}\n");
  RuleResult rs = verify(same);
  CHECK(rs.verdict == Verdict::Proved);
  CHECK(at(rs, DType::F32).reason.find("element by element") != std::string::npos);
  Rule scale = trtest::one_rule("rule c : f32, s32 {\n" + sums + "  scalar c\n"
                                "  lhs sum(A * c, {R: i})\n  rhs sum(A, {R: i2}) * c\n  match i == i2\n}\n");
  RuleResult rc = verify(scale);
  CHECK(at(rc, DType::S32).verdict == Verdict::Proved);  // distributivity holds modulo 2^32
  CHECK(at(rc, DType::F32).verdict == Verdict::Unsupported);
}
