// Rank-bound inference (docs/rank-bound.md): values on known rules.
#include <doctest/doctest.h>

#include <cvc5/cvc5.h>

#include "libtensorright/bound/bound.h"
#include "libtensorright/check/check.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

std::map<std::string, int> bounds_of(const std::string& src, DType dt = DType::Int) {
  auto f = load_rule_source(src, "b.tr");
  REQUIRE(f.rules.size() == 1);
  const Rule& r = f.rules[0];
  cvc5::Solver s;
  s.setLogic("ALL");
  auto b = bound::infer(r, dt, s);
  std::map<std::string, int> out;
  for (size_t i = 0; i < r.rclasses.size(); ++i) out[r.rclasses[i].name] = b.k[i];
  return out;
}

}  // namespace

TEST_CASE("bound: elementwise rules need one axis") {
  auto k = bounds_of(R"(
rule r : int {
  rclass R, S
  map s : R
  map t : S
  tensor A, B : {R: s, S: t}
  lhs (A + B) * A
  rhs A * A + B * A
})");
  CHECK(k.at("R") == 1);
  CHECK(k.at("S") == 1);
}

TEST_CASE("bound: two reads of one tensor at different indices need a witness pair") {
  // reverse(reverse(A)) reads A once; A + reverse(A) reads it at two indices: C(2,2) = 1 pair,
  // plus nothing else, so the bound stays 1 (one axis can tell the two reads apart).
  auto k = bounds_of(R"(
rule r : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + reverse(A, {R})
  rhs reverse(A, {R}) + A
})");
  CHECK(k.at("R") == 1);
}

TEST_CASE("bound: pad conditions give k > 1") {
  // The rhs pad's "in the padding" (an exists over axes, both polarities in the value) and the
  // reads of A at two indices.
  auto k = bounds_of(R"(
rule r : int {
  rclass R
  map s, lo : R
  tensor A : {R: s}
  pre lo >= 0
  lhs pad(A, 0, low={R: lo})
  rhs pad(pad(A, 0, low={R: lo}), 0)
})");
  // The outer pad's range test (an exists in an if-then-else) and the inner one coincide on both
  // sides: a single read of A, two conditions.
  CHECK(k.at("R") == 2);
  auto k2 = bounds_of(R"(
rule r : int {
  rclass R
  map s, lo, hi : R
  tensor A : {R: s}
  pre lo >= 0
  pre hi >= 0
  lhs pad(A, 0, low={R: lo}, high={R: hi})
  rhs pad(pad(A, 0, low={R: lo}), 0, high={R: hi})
})");
  CHECK(k2.at("R") >= 2);
}

TEST_CASE("bound: an any() precondition counts its witness axis") {
  auto base = R"(
rule r : int {
  rclass R, S
  map s, i : R
  map t : S
  tensor X : {R: s, S: t}
  lhs sum(X, {R: i})
  rhs const(0, {S: t})
)";
  auto k_all = bounds_of(std::string(base) + "  pre s == 0\n}");
  auto k_any = bounds_of(std::string(base) + "  pre any(s == 0)\n}");
  CHECK(k_any.at("R") == k_all.at("R") + 1);
  CHECK(k_any.at("S") == 1);
}

TEST_CASE("bound: single rclasses are fixed to one axis") {
  auto k = bounds_of(R"(
rule r : int {
  rclass K single
  rclass R
  map a, b : K
  map s : R
  tensor A : {K: a, R: s}
  tensor B : {K: b, R: s}
  lhs concat(A, B, axis=K)
  rhs concat(A, B, axis=K)
})");
  CHECK(k.at("K") == 1);
  CHECK(k.at("R") == 1);
}

TEST_CASE("bound: dynamic-update-slice window conditions") {
  // Two windows (foralls used as if-then-else guards: both polarities), each tensor read once.
  auto k = bounds_of(R"(
rule r : any {
  rclass R
  map s, u, v, a, c : R
  tensor A : {R: s}
  tensor U : {R: u}
  tensor V : {R: v}
  lhs dynupdate(dynupdate(A, U, start={R: a}), V, start={R: c})
  rhs dynupdate(dynupdate(A, V, start={R: c}), U, start={R: a})
})", DType::Bool);
  CHECK(k.at("R") == 2);
}


TEST_CASE("bound: what an uninterpreted exp (float types) holds is counted like any operand") {
  // exp at a float type is an uninterpreted function: the pad's conditions and reads inside its
  // argument count as they do outside it (a walk that stopped at every function application, as
  // at tensor reads, would miss them and give a bound of 1).
  const std::string body = R"(
  rclass R
  map s, lo : R
  tensor A : {R: s}
  pre lo >= 0
  lhs OP(pad(A, 0, low={R: lo}))
  rhs OP(pad(pad(A, 0, low={R: lo}), 0))
})";
  auto rule = [&](const std::string& op) {
    std::string b = body;
    for (size_t p; (p = b.find("OP")) != std::string::npos;) b.replace(p, 2, op);
    return "rule r : f32 {" + b;
  };
  CHECK(bounds_of(rule("-"), DType::F32).at("R") == 2);
  CHECK(bounds_of(rule("exp"), DType::F32).at("R") == 2);
}

TEST_SUITE_END();
