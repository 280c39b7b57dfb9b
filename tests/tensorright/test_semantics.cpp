// Concrete evaluator: hand-computed values for every operator and its validity conditions.
// Rules are built as IR directly (the builder below), so these tests do not depend on the parser.
#include <doctest/doctest.h>

#include <random>

#include "libtensorright/semantics/semantics.h"
#include "libtensorright/semantics/value_ops.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

// ---- a tiny IR builder --------------------------------------------------------------------------
IExprP ie(IK k, std::vector<IExprP> args = {}, int64_t v = 0, int id = -1, int rc = -1) {
  auto e = std::make_shared<IExpr>();
  e->kind = k;
  e->args = std::move(args);
  e->value = v;
  e->id = id;
  e->rclass = rc;
  return e;
}
IExprP lit(int64_t v) { return ie(IK::Int, {}, v); }
IExprP bigit(const BigInt& v) {
  auto e = std::make_shared<IExpr>();
  e->kind = IK::Int;
  e->value = v;
  return e;
}
IExprP mapref(int id) { return ie(IK::Map, {}, 0, id); }

struct B {
  Rule r;
  int rclass(const std::string& n, bool single = false) {
    r.rclasses.push_back({n, single, {}});
    return static_cast<int>(r.rclasses.size()) - 1;
  }
  int map(const std::string& n, int rc) {
    r.maps.push_back({n, rc, false, nullptr, {}});
    return static_cast<int>(r.maps.size()) - 1;
  }
  int tensor(const std::string& n, AxisMap shape, EType et = EType{true, DType::Int}) {
    r.tensors.push_back({n, et, std::move(shape), {}});
    return static_cast<int>(r.tensors.size()) - 1;
  }
  int scalar(const std::string& n) {
    r.scalars.push_back({n, EType{true, DType::Int}, {}});
    return static_cast<int>(r.scalars.size()) - 1;
  }
};

std::shared_ptr<Node> node(Op op, std::vector<NodeP> args = {}, EType et = EType{true, DType::Int}) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->args = std::move(args);
  n->etype = et;
  return n;
}
NodeP input(const Rule& r, int t) {
  auto n = std::make_shared<Node>();
  n->op = Op::Input;
  n->input = t;
  n->etype = r.tensors[t].etype;
  n->shape = r.tensors[t].shape;
  return n;
}
NodeP ilit(int64_t v) {
  auto n = node(Op::Literal);
  n->lit.kind = Literal::Kind::Int;
  n->lit.num = v;
  return n;
}
NodeP inflit(bool pos) {
  auto n = node(Op::Literal);
  n->lit.kind = pos ? Literal::Kind::PosInf : Literal::Kind::NegInf;
  return n;
}
NodeP with_attr(NodeP n, const std::string& name, AxisKey k, IExprP e) {
  auto m = std::const_pointer_cast<Node>(n);
  m->attrs[name][k] = std::move(e);
  return m;
}

Value I(int64_t v) { return Value::integer(v); }
Value Rq(int64_t n, int64_t d = 1) { return Value::real(Rational(n, d)); }

// Values of a one-key rank-1 tensor, in order; "U" for an undefined element.
std::vector<std::string> row(const Evaluated& e, AxisKey k) {
  std::vector<std::string> out;
  REQUIRE(e.defined);
  for (int64_t i = 0; i < e.shape.at(k)[0]; ++i) {
    Point p = e.at(Index{{k, {i}}});
    out.push_back(p.defined ? p.value->str() : "U");
  }
  return out;
}

// A rule with one rclass R (rank 1), one input X : {R: s} filled with `vals`, and map values.
struct Vec {
  B b;
  AxisKey R;
  int s = -1, X = -1;
  Instance inst;
  explicit Vec(std::vector<int64_t> vals, std::vector<std::string> extra_maps = {}) {
    R = AxisKey{b.rclass("R"), ""};
    s = b.map("s", R.rclass);
    for (const auto& m : extra_maps) b.map(m, R.rclass);
    X = b.tensor("X", {{R, mapref(s)}});
    inst.rank[R.rclass] = 1;
    inst.maps[s] = {static_cast<int64_t>(vals.size())};
    for (size_t i = 0; i < vals.size(); ++i)
      inst.inputs[X].elems[Index{{R, {static_cast<int64_t>(i)}}}] = I(vals[i]);
  }
  NodeP x() const { return input(b.r, X); }
  int map_id(const std::string& n) const {
    for (size_t i = 0; i < b.r.maps.size(); ++i)
      if (b.r.maps[i].name == n) return static_cast<int>(i);
    FAIL("no map " << n);
    return -1;
  }
};

}  // namespace

TEST_CASE("semantics: rational arithmetic is exact; size arithmetic is checked") {
  CHECK((Rational(1, 3) + Rational(1, 6)) == Rational(1, 2));
  CHECK(Rational(4, -6) == Rational(-2, 3));
  CHECK(Rational(-7, 2).str() == "-7/2");
  CHECK(Rational(1, 3) < Rational(1, 2));
  CHECK((Rational(INT64_MAX) + Rational(1)).str() == "9223372036854775808");
  CHECK(Rational::parse("-36893488147419103232/6").str() == "-18446744073709551616/3");
  CHECK(Rational::parse("-18446744073709551616/3") == Rational(-BigInt("18446744073709551616"), BigInt(3)));
  CHECK_THROWS_AS(Rational::parse("1/0"), std::invalid_argument);
  CHECK_THROWS_AS(Rational::parse("0x10"), std::invalid_argument);
  CHECK_THROWS_AS(Rational::parse(" 1"), std::invalid_argument);
  CHECK_THROWS_AS(checked_mul(INT64_MAX / 2, 3), EvalOverflow);  // sizes and indices stay int64
  CHECK(to_int64(BigInt(INT64_MIN)) == INT64_MIN);
  CHECK_FALSE(to_int64(BigInt(INT64_MAX) + 1).has_value());
  CHECK_THROWS_WITH_AS(to_int64(BigInt(INT64_MAX) + 1, "size", " at t.tr:1:2"),
                       "size 9223372036854775808 does not fit in 64 bits (sizes and indices are machine integers) at "
                       "t.tr:1:2",
                       EvalOverflow);
  CHECK(floor_div(-7, 2) == -4);
  CHECK(floor_mod(-7, 2) == 1);
  CHECK(Rational::approximate(0.5) == Rational(1, 2));
}

TEST_CASE("semantics: int division floors, remainder truncates, division by zero is total") {
  CHECK(vops::div(I(-7), I(2)).i == -4);
  CHECK(vops::div(I(7), I(-2)).i == -4);
  CHECK(vops::div(I(-7), I(-2)).i == 3);
  CHECK(vops::div(I(5), I(0)).i == 0);
  CHECK(vops::rem(I(-7), I(2)).i == -1);  // sign of the dividend
  CHECK(vops::rem(I(7), I(-2)).i == 1);
  CHECK(vops::rem(I(-7), I(-2)).i == -1);
  CHECK(vops::rem(I(5), I(0)).i == 5);  // x % 0 = x
  CHECK(vops::rem(I(INT64_MIN), I(-1)).i == 0);
  CHECK(vops::div(I(INT64_MIN), I(-1)).str() == "9223372036854775808");
  CHECK(vops::div(Rq(-7, 2), Rq(2)).r == Rational(-7, 4));
  CHECK(vops::div(Rq(3), Rq(0)).r == Rational(0));  // real x / 0 = 0
  CHECK(vops::rem(Rq(7, 2), Rq(1)).r == Rational(1, 2));
  CHECK(vops::add(I(INT64_MAX), I(1)).str() == "9223372036854775808");
}

TEST_CASE("semantics: element arithmetic is exact across 2^64") {
  const BigInt two64 = BigInt(1) << 64;  // 18446744073709551616
  Value big = Value::integer(two64 + 5), nbig = Value::integer(-(two64 + 5));
  // products beyond int64: 3037000500^2 is just above INT64_MAX
  CHECK(vops::mul(I(3037000500), I(3037000500)).str() == "9223372037000250000");
  CHECK(vops::mul(vops::mul(I(INT64_MAX), I(INT64_MAX)), I(-1)).str() ==
        "-85070591730234615847396907784232501249");
  CHECK(vops::neg(I(INT64_MIN)).str() == "9223372036854775808");
  CHECK(vops::abs(I(INT64_MIN)).str() == "9223372036854775808");
  CHECK(vops::sub(big, I(6)).str() == "18446744073709551615");
  // int division floors, remainder truncates (sign of the dividend), on both sides of 2^64
  CHECK(vops::div(big, I(2)).str() == "9223372036854775810");
  CHECK(vops::div(big, I(-2)).str() == "-9223372036854775811");
  CHECK(vops::div(nbig, I(2)).str() == "-9223372036854775811");
  CHECK(vops::div(nbig, I(-2)).str() == "9223372036854775810");
  CHECK(vops::div(big, Value::integer(two64)).str() == "1");
  CHECK(vops::div(nbig, Value::integer(two64)).str() == "-2");
  CHECK(vops::rem(big, I(2)).str() == "1");
  CHECK(vops::rem(nbig, I(2)).str() == "-1");
  CHECK(vops::rem(big, I(-2)).str() == "1");
  CHECK(vops::rem(nbig, Value::integer(two64)).str() == "-5");
  CHECK(vops::rem(big, I(0)).str() == "18446744073709551621");  // x % 0 = x
  CHECK(vops::div(big, I(0)).str() == "0");                      // x / 0 = 0
  // reals: exact quotients and x - y * trunc(x / y)
  Value x = Value::real(Rational(two64 * 64 + 1, BigInt(2)));  // 2^69 + 1/2
  CHECK(vops::rem(x, Value::integer(two64)).str() == "1/2");
  CHECK(vops::rem(vops::neg(x), Value::integer(two64)).str() == "-1/2");
  CHECK(vops::div(x, Value::integer(two64)).str() == "1180591620717411303425/36893488147419103232");
  // comparisons across 2^64, also against reals, infinities and the Int/Real boundary
  CHECK(*vops::compare(Value::integer(two64), Value::integer(two64 - 1)) == 1);
  CHECK(*vops::compare(Value::integer(-two64), I(INT64_MIN)) == -1);
  CHECK(*vops::compare(Value::integer(two64), Value::real(Rational(two64 * 3 + 1, BigInt(3)))) == -1);
  CHECK(*vops::compare(big, Value::pos_inf()) == -1);
  CHECK(*vops::compare(nbig, Value::neg_inf()) == 1);
  CHECK(values_equal(Value::integer(two64), Value::real(Rational(two64 * 7, BigInt(7)))));
  CHECK_FALSE(values_equal(Value::integer(two64), Value::integer(two64 + 1)));
  CHECK(vops::max(big, Value::integer(two64)).str() == big.str());
  CHECK(vops::min(nbig, I(INT64_MIN)).str() == nbig.str());
  CHECK(vops::mul(Value::pos_inf(), nbig).kind == Value::Kind::NegInf);
}

TEST_CASE("semantics: infinity arithmetic follows TensorNum, except neg flips the sign") {
  Value pi = Value::pos_inf(), ni = Value::neg_inf();
  CHECK(vops::add(pi, ni).kind == Value::Kind::Unknown);
  CHECK(vops::add(pi, I(3)).kind == Value::Kind::PosInf);
  CHECK(vops::add(pi, pi).kind == Value::Kind::PosInf);
  CHECK(vops::sub(pi, pi).kind == Value::Kind::Unknown);
  CHECK(vops::mul(pi, I(0)).kind == Value::Kind::Unknown);
  CHECK(vops::mul(pi, I(-2)).kind == Value::Kind::NegInf);
  CHECK(vops::mul(ni, ni).kind == Value::Kind::PosInf);
  CHECK(vops::abs(ni).kind == Value::Kind::PosInf);
  CHECK(vops::neg(pi).kind == Value::Kind::NegInf);  // TensorRight keeps +inf here (a bug)
  CHECK(vops::max(ni, I(3)).i == 3);
  CHECK(vops::min(ni, I(3)).kind == Value::Kind::NegInf);
  CHECK(vops::max(Value::unknown(), I(3)).kind == Value::Kind::Unknown);
  CHECK(vops::div(pi, I(2)).kind == Value::Kind::Unknown);
  CHECK(*vops::compare(ni, I(-100)) < 0);
  CHECK(*vops::compare(pi, pi) == 0);
  CHECK_FALSE(vops::compare(Value::unknown(), I(0)).has_value());
  CHECK_FALSE(values_equal(Value::unknown(), Value::unknown()));
  CHECK(values_equal(I(3), Rq(3)));
  CHECK_FALSE(values_equal(pi, ni));
  CHECK(vops::exp(ni).r == Rational(0));
  CHECK_FALSE(vops::exp(ni).inexact);
  Value e1 = vops::exp(Rq(1));
  CHECK(e1.inexact);
  CHECK(e1.r.to_double() == doctest::Approx(2.718281828).epsilon(1e-6));
  CHECK_THROWS_AS(vops::exp(I(1)), EvalError);
}

TEST_CASE("semantics: comparison with an unknown element makes the access undefined") {
  Vec v({1, 2});
  // ((X + inf) + -inf) < 1
  auto sum = node(Op::Add, {node(Op::Add, {v.x(), inflit(true)}), inflit(false)});
  auto lt = node(Op::Lt, {sum, ilit(1)}, EType{false, DType::Bool});
  Evaluated e = eval(v.b.r, sum, v.inst);
  CHECK(e.at({{v.R, {0}}}).value->kind == Value::Kind::Unknown);
  Point p = eval(v.b.r, lt, v.inst).at({{v.R, {0}}});
  CHECK_FALSE(p.defined);
  CHECK(p.why.find("unknown") != std::string::npos);
}

TEST_CASE("semantics: pad with negative low, interior and high") {
  Vec v({1, 2, 3}, {"lo", "in", "hi"});
  auto mk = [&](int64_t lo, int64_t in, int64_t hi) {
    v.inst.maps[v.map_id("lo")] = {lo};
    v.inst.maps[v.map_id("in")] = {in};
    v.inst.maps[v.map_id("hi")] = {hi};
    auto p = node(Op::Pad, {v.x(), ilit(9)});
    with_attr(p, "low", v.R, mapref(v.map_id("lo")));
    with_attr(p, "interior", v.R, mapref(v.map_id("in")));
    with_attr(p, "high", v.R, mapref(v.map_id("hi")));
    return eval(v.b.r, p, v.inst);
  };
  // [1 9 2 9 3], low -1 drops the first element, high 2 appends two pads: size -1+2+3+2 = 6.
  CHECK(row(mk(-1, 1, 2), v.R) == std::vector<std::string>{"9", "2", "9", "3", "9", "9"});
  CHECK(row(mk(2, 0, -1), v.R) == std::vector<std::string>{"9", "9", "1", "2"});
  CHECK(row(mk(0, 2, 0), v.R) == std::vector<std::string>{"1", "9", "9", "2", "9", "9", "3"});
  CHECK(row(mk(-3, 0, -0), v.R).empty());  // size 0 is fine
  CHECK_FALSE(mk(-4, 0, 0).defined);       // size -1
  Evaluated bad = mk(0, -1, 0);
  CHECK_FALSE(bad.defined);
  CHECK(bad.why.find("interior") != std::string::npos);
  // The index outside the output is undefined, not an error.
  CHECK_FALSE(mk(0, 0, 0).at({{v.R, {3}}}).defined);
}

TEST_CASE("semantics: slice sizes, strides and validity") {
  Vec v({0, 10, 20, 30, 40, 50, 60}, {"st", "en", "sd"});
  auto mk = [&](int64_t st, int64_t en, int64_t sd) {
    v.inst.maps[v.map_id("st")] = {st};
    v.inst.maps[v.map_id("en")] = {en};
    v.inst.maps[v.map_id("sd")] = {sd};
    auto p = node(Op::Slice, {v.x()});
    with_attr(p, "start", v.R, mapref(v.map_id("st")));
    with_attr(p, "end", v.R, mapref(v.map_id("en")));
    with_attr(p, "stride", v.R, mapref(v.map_id("sd")));
    return eval(v.b.r, p, v.inst);
  };
  CHECK(row(mk(1, 6, 2), v.R) == std::vector<std::string>{"10", "30", "50"});  // (5+1) div 2 = 3
  CHECK(row(mk(1, 7, 2), v.R) == std::vector<std::string>{"10", "30", "50"});  // (6+1) div 2 = 3
  CHECK(row(mk(0, 7, 3), v.R) == std::vector<std::string>{"0", "30", "60"});
  CHECK(row(mk(4, 4, 1), v.R).empty());
  CHECK(row(mk(7, 7, 5), v.R).empty());
  CHECK_FALSE(mk(0, 8, 1).defined);   // end > size
  CHECK_FALSE(mk(3, 2, 1).defined);   // start > end
  CHECK_FALSE(mk(-1, 2, 1).defined);  // start < 0
  CHECK_FALSE(mk(0, 2, 0).defined);   // stride 0
  CHECK(mk(0, 2, 0).why.find("stride") != std::string::npos);
}

TEST_CASE("semantics: dynslice and dynupdate validity, no clamping") {
  Vec v({5, 6, 7, 8}, {"st", "len"});
  auto ds = [&](int64_t st, int64_t len) {
    v.inst.maps[v.map_id("st")] = {st};
    v.inst.maps[v.map_id("len")] = {len};
    auto p = node(Op::DynSlice, {v.x()});
    with_attr(p, "start", v.R, mapref(v.map_id("st")));
    with_attr(p, "size", v.R, mapref(v.map_id("len")));
    return eval(v.b.r, p, v.inst);
  };
  CHECK(row(ds(1, 2), v.R) == std::vector<std::string>{"6", "7"});
  CHECK(row(ds(0, 4), v.R) == std::vector<std::string>{"5", "6", "7", "8"});
  CHECK_FALSE(ds(3, 2).defined);  // XLA would clamp the start to 2; we do not
  CHECK_FALSE(ds(-1, 1).defined);
  CHECK_FALSE(ds(0, 0).defined);  // size must be > 0

  // dynupdate(X, U, start): U : {R: u}
  int u = v.b.map("u", v.R.rclass);
  int U = v.b.tensor("U", {{v.R, mapref(u)}});
  v.inst.maps[u] = {2};
  v.inst.inputs[U].elems[{{v.R, {0}}}] = I(-1);
  v.inst.inputs[U].elems[{{v.R, {1}}}] = I(-2);
  auto dus = [&](int64_t st) {
    v.inst.maps[v.map_id("st")] = {st};
    auto p = node(Op::DynUpdate, {v.x(), input(v.b.r, U)});
    with_attr(p, "start", v.R, mapref(v.map_id("st")));
    return eval(v.b.r, p, v.inst);
  };
  CHECK(row(dus(1), v.R) == std::vector<std::string>{"5", "-1", "-2", "8"});
  CHECK(row(dus(2), v.R) == std::vector<std::string>{"5", "6", "-1", "-2"});
  CHECK_FALSE(dus(3).defined);
  CHECK_FALSE(dus(-1).defined);
  v.inst.maps[u] = {0};
  CHECK_FALSE(dus(0).defined);  // empty update
}

TEST_CASE("semantics: concat, reverse, iota and const") {
  B b;
  AxisKey K{b.rclass("K", true), ""};
  int sa = b.map("sa", K.rclass), sb = b.map("sb", K.rclass);
  int A = b.tensor("A", {{K, mapref(sa)}}), Bt = b.tensor("B", {{K, mapref(sb)}});
  Instance inst;
  inst.rank[K.rclass] = 1;
  inst.maps[sa] = {2};
  inst.maps[sb] = {3};
  for (int64_t i = 0; i < 2; ++i) inst.inputs[A].elems[{{K, {i}}}] = I(i + 1);
  for (int64_t i = 0; i < 3; ++i) inst.inputs[Bt].elems[{{K, {i}}}] = I(10 * (i + 1));
  auto cat = node(Op::Concat, {input(b.r, A), input(b.r, Bt)});
  std::const_pointer_cast<Node>(cat)->axes = {K};
  CHECK(row(eval(b.r, cat, inst), K) == std::vector<std::string>{"1", "2", "10", "20", "30"});
  auto rev = node(Op::Reverse, {cat});
  std::const_pointer_cast<Node>(rev)->axes = {K};
  CHECK(row(eval(b.r, rev, inst), K) == std::vector<std::string>{"30", "20", "10", "2", "1"});
  auto io = node(Op::Iota, {}, EType{false, DType::Int});
  std::const_pointer_cast<Node>(io)->shape = {{K, mapref(sb)}};
  std::const_pointer_cast<Node>(io)->axes = {K};
  CHECK(row(eval(b.r, io, inst), K) == std::vector<std::string>{"0", "1", "2"});
  auto cst = node(Op::Const, {ilit(7)});
  std::const_pointer_cast<Node>(cst)->shape = {{K, mapref(sa)}};
  CHECK(row(eval(b.r, cst, inst), K) == std::vector<std::string>{"7", "7"});
  // Elementwise operands must agree in size: A + B is undefined.
  Evaluated bad = eval(b.r, node(Op::Add, {input(b.r, A), input(b.r, Bt)}), inst);
  CHECK_FALSE(bad.defined);
  CHECK(bad.why.find("sizes differ") != std::string::npos);
}

TEST_CASE("semantics: relabel is a transposition, broadcast adds axes") {
  B b;
  int R = b.rclass("R");
  AxisKey Ra{R, "a"}, Rb{R, "b"};
  int m = b.map("m", R), n = b.map("n", R);
  int X = b.tensor("X", {{Ra, mapref(m)}, {Rb, mapref(n)}});
  Instance inst;
  inst.rank[R] = 1;
  inst.maps[m] = {2};
  inst.maps[n] = {3};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) inst.inputs[X].elems[{{Ra, {i}}, {Rb, {j}}}] = I(10 * i + j);
  auto rl = node(Op::Relabel, {input(b.r, X)});
  std::const_pointer_cast<Node>(rl)->relabel = {{Ra, Rb}, {Rb, Ra}};
  Evaluated e = eval(b.r, rl, inst);
  REQUIRE(e.defined);
  CHECK(e.shape.at(Ra) == std::vector<int64_t>{3});
  CHECK(e.shape.at(Rb) == std::vector<int64_t>{2});
  CHECK(e.at({{Ra, {2}}, {Rb, {1}}}).value->i == 12);  // X[a=1, b=2]

  int S = b.rclass("S");
  AxisKey SK{S, ""};
  int q = b.map("q", S);
  inst.rank[S] = 2;
  inst.maps[q] = {2, 1};
  auto bc = node(Op::Broadcast, {input(b.r, X)});
  std::const_pointer_cast<Node>(bc)->shape = {{Ra, mapref(m)}, {Rb, mapref(n)}, {SK, mapref(q)}};
  Evaluated be = eval(b.r, bc, inst);
  REQUIRE(be.defined);
  CHECK(be.shape.at(SK) == std::vector<int64_t>{2, 1});
  CHECK(be.at({{Ra, {1}}, {Rb, {2}}, {SK, {1, 0}}}).value->i == 12);
  CHECK(be.indices().size() == 2 * 3 * 2);
}

TEST_CASE("semantics: sum, including the empty sum, and dot") {
  B b;
  AxisKey I_{b.rclass("I"), ""}, K{b.rclass("K"), ""}, J{b.rclass("J"), ""};
  int si = b.map("si", I_.rclass), sk = b.map("sk", K.rclass), sj = b.map("sj", J.rclass);
  int ik = b.map("ik", K.rclass);  // a summation-index map (value irrelevant concretely)
  int A = b.tensor("A", {{I_, mapref(si)}, {K, mapref(sk)}});
  int Bt = b.tensor("B", {{K, mapref(sk)}, {J, mapref(sj)}});
  Instance inst;
  for (int rc : {I_.rclass, K.rclass, J.rclass}) inst.rank[rc] = 1;
  inst.maps[si] = {2};
  inst.maps[sk] = {3};
  inst.maps[sj] = {2};
  inst.maps[ik] = {0};
  // A = [[1 2 3], [4 5 6]], B = [[1 0], [0 1], [1 1]]
  int64_t a[2][3] = {{1, 2, 3}, {4, 5, 6}}, bm[3][2] = {{1, 0}, {0, 1}, {1, 1}};
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t k = 0; k < 3; ++k) inst.inputs[A].elems[{{I_, {i}}, {K, {k}}}] = I(a[i][k]);
  for (int64_t k = 0; k < 3; ++k)
    for (int64_t j = 0; j < 2; ++j) inst.inputs[Bt].elems[{{K, {k}}, {J, {j}}}] = I(bm[k][j]);

  auto dot = node(Op::Dot, {input(b.r, A), input(b.r, Bt)});
  std::const_pointer_cast<Node>(dot)->sum_index = {{K, ik}};
  Evaluated d = eval(b.r, dot, inst);
  REQUIRE(d.defined);
  CHECK(d.shape.size() == 2);
  CHECK(d.at({{I_, {0}}, {J, {0}}}).value->i == 4);   // 1 + 3
  CHECK(d.at({{I_, {0}}, {J, {1}}}).value->i == 5);   // 2 + 3
  CHECK(d.at({{I_, {1}}, {J, {0}}}).value->i == 10);  // 4 + 6
  CHECK(d.at({{I_, {1}}, {J, {1}}}).value->i == 11);  // 5 + 6

  auto sum = node(Op::Sum, {input(b.r, A)});
  std::const_pointer_cast<Node>(sum)->sum_index = {{K, ik}};
  Evaluated s = eval(b.r, sum, inst);
  CHECK(row(s, I_) == std::vector<std::string>{"6", "15"});
  inst.maps[sk] = {0};  // empty range: the sum is 0, not undefined
  Evaluated s0 = eval(b.r, sum, inst);
  CHECK(row(s0, I_) == std::vector<std::string>{"0", "0"});
  // rank 2 on K, sizes {3, 0}: still empty
  inst.rank[K.rclass] = 2;
  inst.maps[sk] = {3, 0};
  inst.maps[ik] = {0, 0};
  CHECK(row(eval(b.r, sum, inst), I_) == std::vector<std::string>{"0", "0"});
  // The dot's common axis sizes must match.
  inst.rank[K.rclass] = 1;
  inst.maps[sk] = {3};
  inst.maps[ik] = {0};
  int sk2 = b.map("sk2", K.rclass);
  int C = b.tensor("C", {{K, mapref(sk2)}, {J, mapref(sj)}});
  inst.maps[sk2] = {2};
  auto bad = node(Op::Dot, {input(b.r, A), input(b.r, C)});
  std::const_pointer_cast<Node>(bad)->sum_index = {{K, ik}};
  CHECK_FALSE(eval(b.r, bad, inst).defined);
}

TEST_CASE("semantics: conv on a tiny example (stride, dilation, padding)") {
  B b;
  AxisKey Bk{b.rclass("B"), ""}, F{b.rclass("F"), ""}, O{b.rclass("O"), ""}, S{b.rclass("S"), ""};
  int one = b.map("one", Bk.rclass), fone = b.map("fone", F.rclass), oone = b.map("oone", O.rclass);
  int sin = b.map("sin", S.rclass), sw = b.map("sw", S.rclass);
  int st = b.map("st", S.rclass), lo = b.map("lo", S.rclass), hi = b.map("hi", S.rclass);
  int ld = b.map("ld", S.rclass), rd = b.map("rd", S.rclass);
  int fi = b.map("fi", F.rclass), ki = b.map("ki", S.rclass);
  int IN = b.tensor("IN", {{Bk, mapref(one)}, {F, mapref(fone)}, {S, mapref(sin)}});
  int W = b.tensor("W", {{F, mapref(fone)}, {O, mapref(oone)}, {S, mapref(sw)}});
  Instance inst;
  for (int rc = 0; rc < 4; ++rc) inst.rank[rc] = 1;
  for (int m : {one, fone, oone}) inst.maps[m] = {1};
  inst.maps[sin] = {4};
  inst.maps[sw] = {2};
  inst.maps[fi] = {0};
  inst.maps[ki] = {0};
  for (int64_t i = 0; i < 4; ++i) inst.inputs[IN].elems[{{Bk, {0}}, {F, {0}}, {S, {i}}}] = I(i + 1);  // 1 2 3 4
  inst.inputs[W].elems[{{F, {0}}, {O, {0}}, {S, {0}}}] = I(1);
  inst.inputs[W].elems[{{F, {0}}, {O, {0}}, {S, {1}}}] = I(-1);
  auto cv = node(Op::Conv, {input(b.r, IN), input(b.r, W)});
  auto cm = std::const_pointer_cast<Node>(cv);
  cm->conv = ConvAttrs{{Bk}, {F}, {O}, {S}};
  cm->sum_index = {{F, fi}, {S, ki}};
  cm->attrs["stride"][S] = mapref(st);
  cm->attrs["low"][S] = mapref(lo);
  cm->attrs["high"][S] = mapref(hi);
  cm->attrs["lhs_dilation"][S] = mapref(ld);
  cm->attrs["rhs_dilation"][S] = mapref(rd);
  auto run = [&](int64_t s_, int64_t l, int64_t h, int64_t ldv, int64_t rdv) {
    inst.maps[st] = {s_};
    inst.maps[lo] = {l};
    inst.maps[hi] = {h};
    inst.maps[ld] = {ldv};
    inst.maps[rd] = {rdv};
    Evaluated e = eval(b.r, cv, inst);
    std::vector<std::string> out;
    if (!e.defined) return std::vector<std::string>{"invalid"};
    for (int64_t i = 0; i < e.shape.at(S)[0]; ++i) {
      Point p = e.at({{Bk, {0}}, {O, {0}}, {S, {i}}});
      out.push_back(p.defined ? p.value->str() : "U");
    }
    return out;
  };
  CHECK(run(1, 0, 0, 1, 1) == std::vector<std::string>{"-1", "-1", "-1"});
  CHECK(run(2, 0, 0, 1, 1) == std::vector<std::string>{"-1", "-1"});                        // (4-2+2) div 2
  CHECK(run(1, 1, 1, 1, 1) == std::vector<std::string>{"-1", "-1", "-1", "-1", "4"});       // [0 1 2 3 4 0]
  CHECK(run(1, 0, 0, 2, 1) == std::vector<std::string>{"1", "-2", "2", "-3", "3", "-4"});   // [1 0 2 0 3 0 4]
  CHECK(run(1, 0, 0, 1, 2) == std::vector<std::string>{"-2", "-2"});  // w = [1 0 -1]: 1 - 3, 2 - 4
  CHECK(run(1, -1, 0, 1, 1) == std::vector<std::string>{"-1", "-1"});                       // [2 3 4]
  CHECK(run(0, 0, 0, 1, 1) == std::vector<std::string>{"invalid"});
  CHECK(run(1, 0, 0, 0, 1) == std::vector<std::string>{"invalid"});
  CHECK(run(1, -4, 0, 1, 1) == std::vector<std::string>{"invalid"});  // window larger than the input
}

TEST_CASE("semantics: degenerate removes and adds size-1 axes") {
  B b;
  AxisKey R{b.rclass("R"), ""}, S{b.rclass("S"), ""};
  int s = b.map("s", R.rclass), one = b.map("one", S.rclass);
  int X = b.tensor("X", {{R, mapref(s)}, {S, mapref(one)}});
  Instance inst;
  inst.rank[R.rclass] = 1;
  inst.rank[S.rclass] = 2;
  inst.maps[s] = {2};
  inst.maps[one] = {1, 1};
  inst.inputs[X].elems[{{R, {1}}, {S, {0, 0}}}] = I(42);
  auto dg = node(Op::Degenerate, {input(b.r, X)});
  std::const_pointer_cast<Node>(dg)->axes = {S};
  Evaluated e = eval(b.r, dg, inst);
  REQUIRE(e.defined);
  CHECK(e.shape.size() == 1);
  CHECK(e.at({{R, {1}}}).value->i == 42);
  inst.maps[one] = {1, 2};
  CHECK_FALSE(eval(b.r, dg, inst).defined);
}

TEST_CASE("semantics: select accesses only the chosen branch; clamp") {
  Vec v({-5, 0, 5});
  auto gt = node(Op::Gt, {v.x(), ilit(0)}, EType{false, DType::Bool});
  auto sel = node(Op::Select, {gt, v.x(), node(Op::Neg, {v.x()})});
  CHECK(row(eval(v.b.r, sel, v.inst), v.R) == std::vector<std::string>{"5", "0", "5"});
  auto cl = node(Op::Clamp, {ilit(-1), v.x(), ilit(2)});
  CHECK(row(eval(v.b.r, cl, v.inst), v.R) == std::vector<std::string>{"-1", "0", "2"});
  auto rem = node(Op::Rem, {v.x(), ilit(-3)});
  CHECK(row(eval(v.b.r, rem, v.inst), v.R) == std::vector<std::string>{"-2", "0", "2"});
  auto dv = node(Op::Div, {v.x(), ilit(0)});
  CHECK(row(eval(v.b.r, dv, v.inst), v.R) == std::vector<std::string>{"0", "0", "0"});
}

TEST_CASE("semantics: preconditions with all/any and total div/mod in conditions") {
  Vec v({1, 2}, {"a"});
  v.inst.rank[v.R.rclass] = 2;
  v.inst.maps[v.s] = {2, 0};
  v.inst.maps[v.map_id("a")] = {-7, 3};
  auto ge0 = ie(IK::Ge, {mapref(v.s), lit(1)});
  auto all = ie(IK::All, {ge0}, 0, -1, v.R.rclass);
  auto any = ie(IK::Any, {ge0}, 0, -1, v.R.rclass);
  v.b.r.pre = {{all, {}}};
  CHECK_FALSE(preconditions_hold(v.b.r, v.inst));
  v.b.r.pre = {{any, {}}};
  CHECK(preconditions_hold(v.b.r, v.inst));
  // floor div / mod: -7 div 2 = -4, -7 mod 2 = 1, 3 div 0 = 0, 3 mod 0 = 3; mod by -2 is in [0, 2)
  auto a = mapref(v.map_id("a"));
  CHECK(eval_iexpr(*ie(IK::Div, {a, lit(2)}), v.inst, 0).i == -4);
  CHECK(eval_iexpr(*ie(IK::Mod, {a, lit(2)}), v.inst, 0).i == 1);
  CHECK(eval_iexpr(*ie(IK::Mod, {a, lit(-2)}), v.inst, 0).i == 1);
  CHECK(eval_iexpr(*ie(IK::Div, {a, lit(-2)}), v.inst, 0).i == 4);
  CHECK(eval_iexpr(*ie(IK::Div, {a, lit(0)}), v.inst, 1).i == 0);
  CHECK(eval_iexpr(*ie(IK::Mod, {a, lit(0)}), v.inst, 1).i == 3);
  // and exact beyond int64: (-2^64 - 1) div 2^63 = -3, mod 2^63 = 2^63 - 1, mod -2^63 likewise
  const BigInt two63 = BigInt(1) << 63, two64 = BigInt(1) << 64;
  auto nb = bigit(-two64 - 1);
  CHECK(eval_iexpr(*ie(IK::Div, {nb, bigit(two63)}), v.inst, 0).str() == "-3");
  CHECK(eval_iexpr(*ie(IK::Mod, {nb, bigit(two63)}), v.inst, 0).str() == "9223372036854775807");
  CHECK(eval_iexpr(*ie(IK::Mod, {nb, bigit(-two63)}), v.inst, 0).str() == "9223372036854775807");
  CHECK(eval_iexpr(*ie(IK::Div, {nb, bigit(-two63)}), v.inst, 0).str() == "3");
  CHECK(eval_iexpr(*ie(IK::Mul, {bigit(two63), lit(2)}), v.inst, 0).str() == "18446744073709551616");
  CHECK(eval_iexpr(*ie(IK::Gt, {bigit(two64), lit(INT64_MAX)}), v.inst, 0).b);
  // all() over zero axes is true, any() false
  v.inst.rank[v.R.rclass] = 0;
  v.inst.maps[v.s] = {};
  v.b.r.pre = {{any, {}}};
  CHECK_FALSE(preconditions_hold(v.b.r, v.inst));
  v.b.r.pre = {{all, {}}};
  CHECK(preconditions_hold(v.b.r, v.inst));
}

TEST_CASE("semantics: assumptions hold where defined; check_instance finds a failing index") {
  // max(c1, min(A, c2)) => clamp(c1, A, c2) needs c1 <= c2 everywhere.
  B b;
  AxisKey R{b.rclass("R"), ""};
  int s = b.map("s", R.rclass);
  int A = b.tensor("A", {{R, mapref(s)}}), C1 = b.tensor("c1", {{R, mapref(s)}}), C2 = b.tensor("c2", {{R, mapref(s)}});
  b.r.lhs = node(Op::Max, {input(b.r, C1), node(Op::Min, {input(b.r, A), input(b.r, C2)})});
  b.r.rhs = node(Op::Clamp, {input(b.r, C1), input(b.r, A), input(b.r, C2)});
  Instance inst;
  inst.rank[R.rclass] = 1;
  inst.maps[s] = {2};
  auto set = [&](int t, int64_t x0, int64_t x1) {
    inst.inputs[t].elems[{{R, {0}}}] = I(x0);
    inst.inputs[t].elems[{{R, {1}}}] = I(x1);
  };
  set(A, 0, 5);
  set(C1, 1, 4);
  set(C2, 3, 2);  // c1 > c2 at index 1
  InstanceCheck c = check_instance(b.r, inst);
  CHECK(c.pre);
  CHECK_FALSE(c.holds);
  REQUIRE(c.failing);
  CHECK(c.failing->at(R) == std::vector<int64_t>{1});
  CHECK(c.at.reason.find("values differ") != std::string::npos);
  CHECK(to_string(*c.failing, b.r) == "{R: [1]}");
  b.r.assume = {{node(Op::Lt, {input(b.r, C1), input(b.r, C2)}, EType{false, DType::Bool}), {}}};
  CHECK_FALSE(check_instance(b.r, inst).pre);
  set(C2, 3, 5);
  InstanceCheck ok = check_instance(b.r, inst);
  CHECK(ok.pre);
  CHECK(ok.holds);
}

TEST_CASE("semantics: right side invalid or shaped differently is a failure") {
  Vec v({1, 2, 3}, {"st"});
  v.inst.maps[v.map_id("st")] = {5};
  auto ds = node(Op::DynSlice, {v.x()});
  with_attr(ds, "start", v.R, mapref(v.map_id("st")));
  with_attr(ds, "size", v.R, mapref(v.s));
  v.b.r.lhs = v.x();
  v.b.r.rhs = ds;
  InstanceCheck c = check_instance(v.b.r, v.inst);
  CHECK_FALSE(c.holds);
  CHECK(c.at.tensor_level);
  CHECK(c.at.reason.find("right side invalid") != std::string::npos);
  // The other way round nothing is required: the left side is undefined.
  v.b.r.lhs = ds;
  v.b.r.rhs = v.x();
  CHECK(check_instance(v.b.r, v.inst).holds);
  CHECK_FALSE(check_instance(v.b.r, v.inst).lhs_defined);
}

TEST_CASE("semantics: random instances satisfy preconditions and find wrong rules") {
  std::mt19937_64 rng(7);
  Vec v({});
  v.b.r.dtypes = {DType::Int, DType::Real};
  v.b.r.lhs = node(Op::Add, {v.x(), ilit(0)});
  v.b.r.rhs = v.x();
  // a precondition s >= 2 on every axis
  v.b.r.pre = {{ie(IK::All, {ie(IK::Ge, {mapref(v.s), lit(2)})}, 0, -1, v.R.rclass), {}}};
  int found = 0;
  for (DType t : {DType::Int, DType::Real})
    for (int i = 0; i < 30; ++i) {
      auto inst = random_instance(v.b.r, t, rng);
      REQUIRE(inst);
      for (int64_t x : inst->maps.at(v.s)) CHECK(x >= 2);
      check_instance_complete(v.b.r, *inst);
      InstanceCheck c = check_instance(v.b.r, *inst);
      CHECK(c.holds);
      found += c.lhs_defined;
    }
  CHECK(found == 60);
  // A + 1 => A is wrong, and random testing says so at once.
  v.b.r.lhs = node(Op::Add, {v.x(), ilit(1)});
  auto inst = random_instance(v.b.r, DType::Int, rng);
  REQUIRE(inst);
  CHECK_FALSE(check_instance(v.b.r, *inst).holds);
  CHECK(describe(v.b.r, *inst).find("map s = [") != std::string::npos);
}

// ---- rules written in the rule language ---------------------------------------------------------
#include <filesystem>

#include "libtensorright/check/check.h"

namespace {
const char* kRules = R"RULES(
rule add_zero "A + 0 => A" : num {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 0
  rhs A
}
rule add_one "A + 1 => A (wrong)" : num {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 1
  rhs A
}
rule slice_stride2 "Slice(A, stride 2) => A (wrong)" : any {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs slice(A, stride={R: 2})
  rhs A
}
rule maxmin_noassume "Max(c1, Min(A, c2)) => Clamp(c1, A, c2) (wrong)" : num {
  rclass R
  map s : R
  tensor A, c1, c2 : {R: s}
  lhs max(c1, min(A, c2))
  rhs clamp(c1, A, c2)
}
rule maxmin "Max(c1, Min(A, c2)) => Clamp(c1, A, c2)" : num {
  rclass R
  map s : R
  tensor A, c1, c2 : {R: s}
  assume c1 < c2
  lhs max(c1, min(A, c2))
  rhs clamp(c1, A, c2)
}
rule slice_of_pad "Slice(Pad(A)) => A" : any {
  rclass R
  map st, en, sd : R
  map sz, lo, hi, it : R >= 0
  tensor A : {R: sz}
  scalar v
  pre st == lo && sd == it + 1 && en == sz + lo + (sz - 1) * it
  lhs slice(pad(A, v, low={R: lo}, interior={R: it}, high={R: hi}), start={R: st}, end={R: en}, stride={R: sd})
  rhs A
}
rule dot_as_sum "Dot(x, y) => Sum(Mul(x, Broadcast(y)))" : num {
  rclass F, C, Bt
  map fs : F
  map cs, i, j : C
  map bs : Bt
  tensor x : {F: fs, C: cs, Bt: bs}
  tensor y : {C: cs, Bt: bs}
  lhs dot(x, y, contract={C: i}, batch={Bt})
  rhs sum(x * broadcast(y, {F: fs}), {C: j})
  match i == j
}
rule concat_slices "Concat(Slice(A), Slice(A)) => Slice(A)" : any {
  rclass K single
  map s, a, m, e : K
  tensor A : {K: s}
  lhs concat(slice(A, start={K: a}, end={K: m}), slice(A, start={K: m}, end={K: e}), axis=K)
  rhs slice(A, start={K: a}, end={K: e})
}
)RULES";

const Rule& find_rule(const LoadedFile& f, const std::string& name) {
  for (const auto& r : f.rules)
    if (r.name == name) return r;
  FAIL("no rule " << name);
  return f.rules.front();
}
}  // namespace

TEST_CASE("semantics: random testing of rules written in the language") {
  LoadedFile f = load_rule_source(kRules, "semantics.tr");
  for (std::string good : {"add_zero", "maxmin", "slice_of_pad", "dot_as_sum", "concat_slices"}) {
    CAPTURE(good);
    RandomTestResult r = random_test(find_rule(f, good), 60, 1);
    CHECK(r.instances > 20);
    CHECK(r.lhs_defined > 5);
    if (r.failing) FAIL(describe(find_rule(f, good), *r.failing) << r.check.at.reason);
  }
  for (std::string bad : {"add_one", "slice_stride2", "maxmin_noassume"}) {
    CAPTURE(bad);
    RandomTestResult r = random_test(find_rule(f, bad), 200, 1);
    CHECK(r.failing.has_value());
  }
  RandomTestResult r = random_test(find_rule(f, "slice_stride2"), 200, 1);
  REQUIRE(r.failing);
  CHECK(r.check.at.reason.find("shapes differ") != std::string::npos);
}

// Every rule of the suite that is expected to be proved must survive random testing: this checks
// the rules and the evaluator against each other, independently of the verifier.
TEST_CASE("semantics: random testing agrees with the rule suite's `expect proved`" * doctest::test_suite("corpus")) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(TRSPLAT_SOURCE_DIR) / "rules";
  if (!fs::exists(dir)) return;
  int checked = 0, wrong = 0, found = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().extension() != ".tr") continue;
    LoadedFile f;
    try {
      f = load_rule_file(e.path().string());
    } catch (const std::exception& ex) {
      continue;  // parse errors are the front end's tests' business (some files are meant to fail)
    }
    for (const Rule& rule : f.rules) {
      if (rule.expect == Verdict::Counterexample) {  // informational: how often random testing agrees
        ++wrong;
        found += random_test(rule, 25, 3).failing.has_value();
        continue;
      }
      if (rule.expect != Verdict::Proved) continue;
      CAPTURE(e.path().string());
      CAPTURE(rule.name);
      RandomTestResult r = random_test(rule, 25, 3);
      if (r.failing) FAIL_CHECK(describe(rule, *r.failing) << "index " << to_string(*r.check.failing, rule) << ": " << r.check.at.reason);
      ++checked;
    }
  }
  MESSAGE("random-tested " << checked << " proved rules; random testing also refutes " << found << " of " << wrong
                            << " rules expected to have a counterexample");
}

TEST_CASE("semantics: an empty left side still fixes the shape; an index outside it requires nothing") {
  Vec v({}, {"n"});
  v.inst.maps[v.map_id("n")] = {1};
  // const(0, {R: n}) has one element where X has none: the shapes differ at the tensor level.
  auto c = node(Op::Const, {ilit(0)});
  c->shape[v.R] = mapref(v.map_id("n"));
  v.b.r.lhs = v.x();
  v.b.r.rhs = c;
  InstanceCheck ic = check_instance(v.b.r, v.inst);
  CHECK(ic.lhs_defined);
  CHECK_FALSE(ic.holds);
  CHECK(ic.at.tensor_level);
  CHECK(ic.at.refutes());
  CHECK(ic.at.reason.find("shapes differ") != std::string::npos);
  // The same sizes: nothing to check at any index, and an index outside the shape is no failure.
  v.inst.maps[v.map_id("n")] = {0};
  CHECK(check_instance(v.b.r, v.inst).holds);
  SideCheck sc = check_at(v.b.r, v.inst, Index{{v.R, {3}}});
  CHECK(sc.holds);
  CHECK_FALSE(sc.refutes());
}

TEST_CASE("semantics: a const that keeps an operand (pow(A, 0)) is valid and defined only where it is") {
  Vec v({1, 2, 3}, {"st"});
  v.inst.maps[v.map_id("st")] = {5};
  // dynslice starting at 5 of a size-3 tensor is invalid; the const that keeps it is invalid too.
  auto ds = node(Op::DynSlice, {v.x()});
  with_attr(ds, "start", v.R, mapref(v.map_id("st")));
  with_attr(ds, "size", v.R, mapref(v.s));
  auto kept = node(Op::Const, {ilit(1), ds});
  kept->shape[v.R] = mapref(v.s);
  Evaluated e = eval(v.b.r, kept, v.inst);
  CHECK_FALSE(e.defined);
  // With a valid operand it is 1 everywhere.
  v.inst.maps[v.map_id("st")] = {0};
  Evaluated ok = eval(v.b.r, kept, v.inst);
  REQUIRE(ok.defined);
  CHECK(row(ok, v.R) == std::vector<std::string>{"1", "1", "1"});
  // An undefined element of the operand (a comparison with unknown) makes that element undefined.
  auto plus_inf = node(Op::Add, {v.x(), inflit(true)});
  plus_inf->shape[v.R] = mapref(v.s);
  auto unk = node(Op::Add, {plus_inf, inflit(false)});  // inf + -inf: unknown
  unk->shape[v.R] = mapref(v.s);
  auto lt = node(Op::Lt, {unk, ilit(0)}, EType{false, DType::Bool});
  lt->shape[v.R] = mapref(v.s);
  auto kept2 = node(Op::Const, {ilit(1), lt});
  kept2->shape[v.R] = mapref(v.s);
  Evaluated u = eval(v.b.r, kept2, v.inst);
  REQUIRE(u.defined);
  CHECK_FALSE(u.at(Index{{v.R, {0}}}).defined);
}

TEST_SUITE_END();
