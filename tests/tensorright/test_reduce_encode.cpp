// The CVC5 encoding of reduce_max / reduce_min / reduce_prod (encode/reduce.cpp,
// docs/verifier.md "Max, min and product reductions"): true rules are proved, wrong ones refuted
// with counterexamples that replay in the evaluator, empty ranges give the init, and forms without a
// sound encoding stay `unsupported`, never proved.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "libtensorright/check/check.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/verify/verify.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

const Rule& by_name(const LoadedFile& f, const std::string& name) {
  for (const Rule& r : f.rules)
    if (r.name == name) return r;
  FAIL("no rule " << name);
  return f.rules.front();
}

const LoadedFile& corpus() {
  static LoadedFile f = load_rule_file(std::string(TRSPLAT_SOURCE_DIR) + "/rules/xla/reduce-init.tr");
  return f;
}
const LoadedFile& mutants() {
  static LoadedFile f = load_rule_file(std::string(TRSPLAT_SOURCE_DIR) + "/rules/xla-mutants/reduce-init.tr");
  return f;
}

RuleResult run(const Rule& r) {
  VerifyOptions o;
  o.timeout_s = 10;
  return verify_rule(r, "t.tr", o);
}

RuleResult run_src(const std::string& src) {
  auto f = load_rule_source(src, "t.tr");
  REQUIRE(f.rules.size() == 1);
  return run(f.rules[0]);
}

// Every dtype proved.
void check_proved(const RuleResult& r) {
  CAPTURE(r.name);
  CAPTURE(r.note);
  CHECK(r.verdict == Verdict::Proved);
  for (const auto& d : r.dtypes) {
    CAPTURE(to_string(d.dtype));
    CAPTURE(d.reason);
    CHECK(d.verdict == Verdict::Proved);
  }
}

// A counterexample the verifier replayed: the left side is defined and differs from the right.
void check_refuted(const RuleResult& r) {
  CAPTURE(r.name);
  CAPTURE(r.note);
  REQUIRE(r.verdict == Verdict::Counterexample);
  REQUIRE(r.cex.has_value());
  CHECK(r.cex->lhs_value != "undefined");
  CHECK(r.cex->lhs_value != r.cex->rhs_value);
  for (const auto& d : r.dtypes) CHECK(d.verdict != Verdict::Proved);
}

}  // namespace

TEST_CASE("reduce encode: rules of rules/xla/reduce-init.tr are proved" * doctest::test_suite("corpus")) {
  for (const char* name :
       {"reduce_max_empty", "reduce_min_empty", "reduce_prod_empty", "reduce_max_degenerate", "reduce_min_degenerate",
        "reduce_prod_degenerate", "reduce_max_degenerate_init", "reduce_max_transpose", "reduce_prod_transpose",
        "reduce_max_reduce", "reduce_min_reduce", "reduce_prod_reduce", "reduce_max_of_reshape_reduced",
        "reduce_prod_of_reshape_kept", "reduce_max_bcast_scalar", "reduce_min_bcast_scalar",
        "reduce_max_bcast_commute", "max_of_reduce_max", "min_of_reduce_min", "mul_of_reduce_prod"}) {
    check_proved(run(by_name(corpus(), name)));
  }
}

TEST_CASE("reduce encode: mutants are refuted with replayed counterexamples" * doctest::test_suite("corpus")) {
  for (const char* name : {"reduce_max_degenerate_init0", "reduce_prod_reduce_init_c", "reduce_max_bcast_scalar_empty",
                           "reduce_min_empty_neg_inf", "reduce_max_transpose_wrong_axis"})
    check_refuted(run(by_name(mutants(), name)));
}

TEST_CASE("reduce encode: an independent replay of a counterexample") {
  // reduce_max(X, init=0) over a size-1 axis against X itself: the verifier's X value, put into an
  // instance by hand, must show the same two values in the evaluator.
  const Rule& rule = by_name(mutants(), "reduce_max_degenerate_init0");
  RuleResult r = run(rule);
  REQUIRE(r.verdict == Verdict::Counterexample);
  REQUIRE(r.cex->inputs.size() == 1);
  int64_t x = std::stoll(r.cex->inputs[0].second);
  CHECK(x < 0);  // only a negative element makes max(0, x) differ from x
  if (r.cex->dtype != DType::Int) return;
  Instance inst;
  inst.dtype = DType::Int;
  for (size_t i = 0; i < rule.rclasses.size(); ++i) inst.rank[static_cast<int>(i)] = 1;
  for (size_t m = 0; m < rule.maps.size(); ++m) inst.maps[static_cast<int>(m)] = {1};
  Index at;
  Index elem;
  for (const auto& [k, sz] : rule.tensors[0].shape) {
    elem[k] = {0};
    if (rule.rclasses[k.rclass].name == "R1") at[k] = {0};
  }
  inst.inputs[0].elems[elem] = Value::integer(x);
  SideCheck sc = check_at(rule, inst, at);
  CHECK_FALSE(sc.holds);
  REQUIRE(sc.lhs.defined);
  CHECK(sc.lhs.value->str() == r.cex->lhs_value);
  CHECK(sc.rhs.value->str() == r.cex->rhs_value);
}

TEST_CASE("reduce encode: empty ranges give the init") {
  // The init on an empty range, also for product and min with an arbitrary init.
  check_proved(run_src(R"(
rule prod_empty_c : num {
  rclass R0, R1
  map s0, i : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  scalar c
  pre any(s0 == 0)
  lhs reduce_prod(X, {R0: i}, init=c)
  rhs const(c, {R1: s1})
})"));
  check_proved(run_src(R"(
rule prod_inf_empty : num {
  rclass R0, R1
  map s0, i : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  pre any(s0 == 0)
  lhs reduce_prod(X, {R0: i}, init=inf)
  rhs const(inf, {R1: s1})
})"));
  // Matched folds where one operand axis may be empty: equal whatever the sizes.
  check_proved(run_src(R"(
rule min_matched_any_size : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  scalar c
  lhs min(reduce_min(X, {R0: i}, init=inf), c)
  rhs reduce_min(X, {R0: j}, init=c)
  match i == j
})"));
  // Without "non-empty", the max of a broadcast scalar is not max(init, scalar): s0 = 0 gives the init.
  check_refuted(run_src(R"(
rule max_bcast_maybe_empty : num {
  rclass R0
  map s0, i : R0
  scalar x, d
  lhs reduce_max(broadcast(x, {R0: s0}), {R0: i}, init=d)
  rhs max(d, x)
})"));
  // -inf is the max of an empty range, so it is not the (finite) element of a one-element range.
  check_refuted(run_src(R"(
rule max_neg_inf_not_element : num {
  rclass R0, R1
  map s0, i : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  pre s0 <= 1
  lhs reduce_max(X, {R0: i}, init=-inf)
  rhs degenerate(slice(X, end={R0: 1}), remove={R0})
})"));
}

TEST_CASE("reduce encode: mismatched inits are refuted") {
  // Same reduction, same match, different inits: an empty range tells them apart.
  check_refuted(run_src(R"(
rule max_inits_differ : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  scalar c, d
  lhs reduce_max(X, {R0: i}, init=c)
  rhs reduce_max(X, {R0: j}, init=d)
  match i == j
})"));
  // A product with init 2 is twice the product with init 1 (the init is applied once).
  check_refuted(run_src(R"(
rule prod_init_dropped : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  lhs reduce_prod(X, {R0: i}, init=2)
  rhs reduce_prod(X, {R0: j}, init=1)
  match i == j
})"));
  check_proved(run_src(R"(
rule prod_init_factored : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  lhs reduce_prod(X, {R0: i}, init=2)
  rhs 2 * reduce_prod(X, {R0: j}, init=1)
  match i == j
})"));
}

TEST_CASE("reduce encode: nested folds flatten only where exact") {
  // max of max with different inits: the inner init only counts when the outer range is non-empty.
  check_refuted(run_src(R"(
rule nested_inits_false : num {
  rclass R0, R1, R2
  map s0, i, k : R0
  map s1, j, l : R1
  map s2 : R2
  tensor X : {R0: s0, R1: s1, R2: s2}
  scalar c, d
  lhs reduce_max(reduce_max(X, {R0: i}, init=c), {R1: j}, init=d)
  rhs reduce_max(X, {R0: k, R1: l}, init=max(c, d))
  match i == k, j == l
})"));
  check_proved(run_src(R"(
rule nested_inits_true : num {
  rclass R0, R1, R2
  map s0, i, k : R0
  map s1, j, l : R1
  map s2 : R2
  tensor X : {R0: s0, R1: s1, R2: s2}
  scalar c, d
  pre s1 >= 1
  lhs reduce_max(reduce_max(X, {R0: i}, init=c), {R1: j}, init=d)
  rhs reduce_max(X, {R0: k, R1: l}, init=max(c, d))
  match i == k, j == l
})"));
  // A product's inner init is applied once per outer element: exact for a single outer point.
  check_proved(run_src(R"(
rule prod_nested_unit_outer : num {
  rclass R0, R1, R2
  map s0, i, k : R0
  map s1, j, l : R1
  map s2 : R2
  tensor X : {R0: s0, R1: s1, R2: s2}
  scalar c
  pre s1 == 1
  lhs reduce_prod(reduce_prod(X, {R0: i}, init=c), {R1: j}, init=c)
  rhs reduce_prod(X, {R0: k, R1: l}, init=c * c)
  match i == k, j == l
})"));
}

TEST_CASE("reduce encode: infinities in products follow *") {
  // inf * 0 is unknown, which equals nothing: a size-1 range holding 0 refutes this.
  check_refuted(run_src(R"(
rule prod_inf_one : num {
  rclass R0
  map s0, i : R0
  tensor X : {R0: s0}
  pre s0 == 1
  lhs reduce_prod(X, {R0: i}, init=inf)
  rhs inf
})"));
}

TEST_CASE("reduce encode: forms without a sound encoding are unsupported, never proved") {
  auto unsupported = [](const std::string& src, const std::string& why) {
    RuleResult r = run_src(src);
    CAPTURE(src);
    CHECK(r.verdict == Verdict::Unsupported);
    CHECK(r.note.find(why) != std::string::npos);
  };
  // min of a max-fold distributes over the elements: min(max(-inf, X), c) is max(-inf, min(X, c)),
  // not max(c, X); the wrong rule is refuted, the distributed form proved.
  {
    const std::string a = R"(
rule a : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  scalar c
  lhs min(reduce_max(X, {R0: i}, init=-inf), c)
  rhs RHS
  match i == j
})";
    auto with = [&](const std::string& rhs) {
      std::string r = a;
      r.replace(r.find("RHS"), 3, rhs);
      return run_src(r);
    };
    CHECK(with("reduce_max(X, {R0: j}, init=c)").verdict == Verdict::Counterexample);
    CHECK(with("reduce_max(min(X, c), {R0: j}, init=-inf)").verdict == Verdict::Proved);
  }
  unsupported(R"(
rule b : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  lhs reduce_max(X, {R0: i}, init=-inf) + 1
  rhs reduce_max(X + 1, {R0: j}, init=-inf)
  match i == j
})",
              "applied to a reduce_max");
  // Sums and folds do not mix.
  unsupported(R"(
rule c : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  lhs sum(X, {R0: i})
  rhs reduce_prod(X, {R0: j}, init=1)
  match i == j
})",
              "sum compared with");
  unsupported(R"(
rule d : num {
  rclass R0, R1, R2
  map s0, i : R0
  map s1, j : R1
  map s2 : R2
  tensor X : {R0: s0, R1: s1, R2: s2}
  lhs sum(reduce_max(X, {R0: i}, init=0), {R1: j})
  rhs const(0, {R2: s2})
})",
              "sum of max/min/prod");
  // Different reductions nested.
  unsupported(R"(
rule e : num {
  rclass R0, R1, R2
  map s0, i, k : R0
  map s1, j, l : R1
  map s2 : R2
  tensor X : {R0: s0, R1: s1, R2: s2}
  lhs reduce_max(reduce_min(X, {R0: i}, init=inf), {R1: j}, init=-inf)
  rhs reduce_max(reduce_min(X, {R0: k}, init=inf), {R1: l}, init=-inf)
  match i == k, j == l
})",
              "reduce_max of a reduce_min");
  // A product under match with possibly infinite elements: inf * 0 would be lost pointwise.
  unsupported(R"(
rule f : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  lhs reduce_prod(max(X, -inf), {R0: i}, init=1)
  rhs reduce_prod(X, {R0: j}, init=1)
  match i == j
})",
              "possibly infinite");
  // In an assumption.
  unsupported(R"(
rule g : num {
  rclass R0, R1
  map s0, i, j : R0
  map s1 : R1
  tensor X : {R0: s0, R1: s1}
  tensor Y : {R1: s1}
  assume reduce_max(X, {R0: i}, init=0) <= Y
  lhs reduce_max(X, {R0: j}, init=0)
  rhs reduce_max(X, {R0: i}, init=0)
  match j == i
})",
              "in an assumption");
}

TEST_SUITE_END();
