// Front end, checker: the IR facts that later stages rely on (see ir.h), and located type errors.
#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <filesystem>
#include <functional>
#include <set>
#include <sstream>

#include "support.h"
#include "libtensorright/check/check.h"
#include "libtensorright/syntax/syntax.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;
namespace fs = std::filesystem;

namespace {

using trtest::check_error;
using trtest::one_rule;

const std::string kForms = std::string(TRSPLAT_SOURCE_DIR) + "/tests/tensorright/data/frontend/forms.tr";

const Rule& find_rule(const LoadedFile& f, const std::string& name) {
  for (const auto& r : f.rules)
    if (r.name == name) return r;
  throw std::runtime_error("no rule " + name);
}

const LoadedFile& forms() {
  static const LoadedFile f = load_rule_file(kForms);
  return f;
}

std::string sz(const Rule& r, const Node& n, const AxisKey& k) { return print_iexpr(r, *n.shape.at(k)); }
AxisKey key(const Rule& r, const std::string& rc, const std::string& label = "") {
  for (size_t i = 0; i < r.rclasses.size(); ++i)
    if (r.rclasses[i].name == rc) return AxisKey{static_cast<int>(i), label};
  throw std::runtime_error("no rclass " + rc);
}
int map_id(const Rule& r, const std::string& name) {
  for (size_t i = 0; i < r.maps.size(); ++i)
    if (r.maps[i].name == name) return static_cast<int>(i);
  throw std::runtime_error("no map " + name);
}

// Every Map reference in a precondition sits under exactly one All/Any naming the map's rclass.
bool well_quantified(const Rule& r, const IExpr& e, int quant_rclass) {
  if (e.kind == IK::All || e.kind == IK::Any) {
    if (quant_rclass != -1) return false;  // nested
    return well_quantified(r, *e.args.at(0), e.rclass);
  }
  if (e.kind == IK::Map) return quant_rclass != -1 && r.maps[static_cast<size_t>(e.id)].rclass == quant_rclass;
  for (const auto& a : e.args)
    if (!well_quantified(r, *a, quant_rclass)) return false;
  return true;
}

}  // namespace

TEST_CASE("check: the forms file loads; dtype sets expand") {
  const auto& f = forms();
  CHECK(f.rules.size() == 13);
  CHECK(find_rule(f, "decls").dtypes == std::vector<DType>{DType::Bool, DType::Int, DType::Real});
  CHECK(find_rule(f, "add_assoc").dtypes == std::vector<DType>{DType::Int, DType::Real});
  CHECK(find_rule(f, "arith").dtypes == std::vector<DType>{DType::Real});
  CHECK(find_rule(f, "add_assoc").title == "Add(Add(A, c1), c2) => Add(A, Add(c1, c2))");
  CHECK(find_rule(f, "add_assoc").expect == Verdict::Proved);
  CHECK(find_rule(f, "conditions").expect == Verdict::Vacuous);
  CHECK_FALSE(find_rule(f, "logic").expect.has_value());
}

TEST_CASE("check: scalars are empty-shape nodes; literals folded and exact") {
  const Rule& r = find_rule(forms(), "add_assoc");
  // rhs A + (c1 + c2)
  REQUIRE(r.rhs->op == Op::Add);
  const Node& inner = *r.rhs->args[1];
  CHECK(inner.op == Op::Add);
  CHECK(inner.shape.empty());
  CHECK(inner.args[0]->op == Op::ScalarRef);
  CHECK(inner.args[0]->shape.empty());
  CHECK(r.rhs->shape.size() == 1);
  const Rule& a = find_rule(forms(), "arith");
  // rhs A * -inf + inf - 1.25
  const Node& sub = *a.rhs;
  REQUIRE(sub.op == Op::Sub);
  CHECK(sub.args[1]->op == Op::Literal);
  CHECK(sub.args[1]->lit.kind == Literal::Kind::Real);
  CHECK(sub.args[1]->lit.num == 5);
  CHECK(sub.args[1]->lit.den == 4);
  CHECK(sub.args[0]->args[0]->args[1]->lit.kind == Literal::Kind::NegInf);
  CHECK(sub.args[0]->args[1]->lit.kind == Literal::Kind::PosInf);
  Rule neg = one_rule("rule r : int { rclass R map s : R tensor A : {R: s} lhs A + -3 rhs A }");
  CHECK(neg.lhs->args[1]->op == Op::Literal);
  CHECK(neg.lhs->args[1]->lit.num == -3);
  CHECK(neg.lhs->args[1]->etype.is_t);
}

TEST_CASE("check: let is inlined, bool inputs and select") {
  const Rule& r = find_rule(forms(), "decls");
  CHECK(r.lhs->op == Op::Select);
  CHECK(r.lhs->args[0]->etype == EType{false, DType::Bool});
  CHECK(r.lhs->etype.is_t);
  CHECK(r.tensors[static_cast<size_t>(3)].etype == EType{false, DType::Int});
  CHECK(r.scalars[1].etype == EType{false, DType::Int});
  CHECK(r.scalars[0].etype.is_t);
  // Shape with a labelled copy.
  CHECK(r.lhs->shape.count(key(r, "S", "b")) == 1);
}

TEST_CASE("check: declaration facts and preconditions are quantified per rclass") {
  const Rule& d = find_rule(forms(), "decls");
  REQUIRE(d.pre.size() == 2);
  CHECK(print_iexpr(d, *d.pre[0].cond) == "all(n >= 0)");
  CHECK(print_iexpr(d, *d.pre[1].cond) == "all(d == s + 2 * n - 1)");
  CHECK(d.maps[static_cast<size_t>(map_id(d, "n"))].nonneg);
  REQUIRE(d.maps[static_cast<size_t>(map_id(d, "d"))].derived);
  CHECK(print_iexpr(d, *d.maps[static_cast<size_t>(map_id(d, "d"))].derived) == "s + 2 * n - 1");
  const Rule& c = find_rule(forms(), "conditions");
  REQUIRE(c.pre.size() == 4);
  CHECK(print_iexpr(c, *c.pre[1].cond) == "all(a == 0) || all(x == 0)");
  CHECK(print_iexpr(c, *c.pre[2].cond) == "all(!(a < 0)) && all(x >= k)");  // split by rclass
  CHECK(print_iexpr(c, *c.pre[3].cond) == "k > 0");                           // no map: no quantifier
  CHECK(c.pre[1].cond->args[0]->kind == IK::All);
  CHECK(c.pre[1].cond->args[0]->rclass == key(c, "R").rclass);
  CHECK(c.pre[1].cond->args[1]->rclass == key(c, "S").rclass);
  const Rule& at = find_rule(forms(), "attributes");
  CHECK(print_iexpr(at, *at.pre[1].cond) == "all(st == 0) || any(en > lo + 1)");
  CHECK(at.pre[1].cond->args[1]->kind == IK::Any);
  for (const auto& r : forms().rules)
    for (const auto& p : r.pre) {
      CAPTURE(r.name);
      CHECK(well_quantified(r, *p.cond, -1));
    }
  CHECK(c.assume.size() == 1);
  CHECK(c.assume[0].cond->etype == EType{false, DType::Bool});
}

TEST_CASE("check: slice and pad defaults and output sizes") {
  const Rule& r = find_rule(forms(), "attributes");
  const Node& sl = *r.lhs;
  REQUIRE(sl.op == Op::Slice);
  const Node& pd = *sl.args[0];
  REQUIRE(pd.op == Op::Pad);
  AxisKey R = key(r, "R"), S = key(r, "S");
  for (const char* a : {"start", "end", "stride"}) CHECK(sl.attrs.at(a).size() == 2);
  for (const char* a : {"low", "high", "interior"}) CHECK(pd.attrs.at(a).size() == 2);
  CHECK(print_iexpr(r, *sl.attrs.at("start").at(S)) == "0");
  CHECK(print_iexpr(r, *sl.attrs.at("stride").at(S)) == "1");
  CHECK(sl.attrs.at("end").at(S) == pd.shape.at(S));  // default end is the operand's size
  CHECK(print_iexpr(r, *pd.attrs.at("interior").at(S)) == "0");
  CHECK(sz(r, pd, R) == "lo + hi + s + max(0, s - 1) * in");
  CHECK(sz(r, pd, S) == "t");
  CHECK(sz(r, sl, R) == "(en + 1 - st + (sd - 1)) div sd");
  CHECK(sz(r, sl, S) == "t");
  CHECK(pd.args[1]->op == Op::ScalarRef);
  // dynslice / dynupdate
  const Node& du = *r.rhs;
  REQUIRE(du.op == Op::DynUpdate);
  CHECK(du.attrs.at("start").size() == 2);
  const Node& ds = *du.args[0];
  CHECK(ds.attrs.at("start").size() == 1);
  CHECK(sz(r, ds, R) == "s - lo");
  CHECK(sz(r, ds, S) == "t");
}

TEST_CASE("check: concat, iota and single inference") {
  const Rule& c = find_rule(forms(), "concat_rule");
  AxisKey K = key(c, "K");
  CHECK(c.rclasses[static_cast<size_t>(K.rclass)].single);
  CHECK_FALSE(c.rclasses[static_cast<size_t>(key(c, "R").rclass)].single);
  CHECK(c.lhs->args.size() == 3);
  CHECK(c.lhs->axes == std::vector<AxisKey>{K});
  CHECK(sz(c, *c.lhs, K) == "a + b + a");
  const Rule& i = find_rule(forms(), "constructors");
  CHECK(i.rclasses[static_cast<size_t>(key(i, "K").rclass)].single);
  CHECK_FALSE(i.rclasses[static_cast<size_t>(key(i, "R").rclass)].single);
  // const(3, ..) + iota(..): the literal takes iota's int type.
  const Node& add = *i.lhs->args[0];
  CHECK(add.args[1]->op == Op::Iota);
  CHECK(add.args[0]->op == Op::Const);
  CHECK(add.args[0]->etype == EType{false, DType::Int});
  CHECK(add.args[0]->args[0]->etype == EType{false, DType::Int});
  CHECK(i.rhs->etype.is_t);  // const(1, ..) alone is T
  const Node& bc = *i.lhs->args[1];
  CHECK(bc.op == Op::Broadcast);
  CHECK(bc.shape.size() == 2);
  CHECK(bc.args[0]->shape.size() == 1);
}

TEST_CASE("check: sum, relabel, reverse, match sides") {
  const Rule& r = find_rule(forms(), "shapes");
  AxisKey R = key(r, "R"), Rb = key(r, "R", "b"), Rc = key(r, "R", "c"), S = key(r, "S");
  REQUIRE(r.lhs->op == Op::Sum);
  CHECK(r.lhs->sum_index.at(Rc) == map_id(r, "i"));
  CHECK(r.lhs->shape.count(Rc) == 0);
  CHECK(sz(r, *r.lhs, R) == "s2");
  const Node& rl = *r.lhs->args[0]->args[0];
  REQUIRE(rl.op == Op::Relabel);
  CHECK(rl.relabel.at(R) == Rc);
  CHECK(rl.relabel.at(Rb) == R);
  CHECK(sz(r, rl, Rc) == "s");
  const Node& rv = *r.rhs->args[0]->args[0];
  CHECK(rv.op == Op::Reverse);
  CHECK(rv.axes == std::vector<AxisKey>{S});
  REQUIRE(r.match.size() == 1);
  CHECK(r.match[0].lhs_si == map_id(r, "i"));
  CHECK(r.match[0].rhs_si == map_id(r, "j"));
  // Written the other way round, the pair is still (lhs, rhs).
  Rule sw = one_rule(
      "rule r : num { rclass R, S map s, i, j : R map t : S tensor A : {R: s, S: t}\n"
      " lhs sum(A, {R: i}) rhs sum(A, {R: j}) match j == i }");
  CHECK(sw.match[0].lhs_si == map_id(sw, "i"));
  CHECK(sw.match[0].rhs_si == map_id(sw, "j"));
}

TEST_CASE("check: dot and conv") {
  const Rule& d = find_rule(forms(), "dot_rule");
  const Node& dot = *d.lhs;
  REQUIRE(dot.op == Op::Dot);
  CHECK(dot.sum_index.size() == 1);
  CHECK(dot.sum_index.at(key(d, "C")) == map_id(d, "i"));
  CHECK(dot.axes == std::vector<AxisKey>{key(d, "B")});
  CHECK(dot.shape.size() == 3);
  CHECK(dot.shape.count(key(d, "G")) == 1);
  CHECK(dot.shape.count(key(d, "C")) == 0);
  const Rule& c = find_rule(forms(), "conv_rule");
  const Node& cv = *c.lhs;
  REQUIRE(cv.op == Op::Conv);
  REQUIRE(cv.conv.has_value());
  CHECK(cv.conv->batch == std::vector<AxisKey>{key(c, "N")});
  CHECK(cv.conv->feature == std::vector<AxisKey>{key(c, "F")});
  CHECK(cv.conv->output_feature == std::vector<AxisKey>{key(c, "O")});
  CHECK(cv.conv->spatial == std::vector<AxisKey>{key(c, "S")});
  CHECK(cv.sum_index.at(key(c, "F")) == map_id(c, "fi"));
  CHECK(cv.sum_index.at(key(c, "S")) == map_id(c, "si"));
  CHECK(sz(c, cv, key(c, "S")) == "(lo + hi + (s + max(0, s - 1) * (ld - 1)) - (w + max(0, w - 1) * (rd - 1)) + st) div st");
  CHECK(c.match.size() == 2);
}

TEST_CASE("check: conv defaults") {
  Rule r = one_rule(
      "rule r : num { rclass N, F, O, S map n : N map f, i, i2 : F map o : O map s, w, k, k2 : S\n"
      " tensor X : {N: n, F: f, S: s} tensor W : {F: f, O: o, S: w}\n"
      " lhs conv(X, W, feature={F: i}, spatial={S: k}) rhs conv(X, W, feature={F: i2}, spatial={S: k2})\n"
      " match i == i2, k == k2 }");
  AxisKey S = key(r, "S");
  CHECK(sz(r, *r.lhs, S) == "s - w + 1");
  CHECK(print_iexpr(r, *r.lhs->attrs.at("stride").at(S)) == "1");
  CHECK(print_iexpr(r, *r.lhs->attrs.at("lhs_dilation").at(S)) == "1");
  CHECK(print_iexpr(r, *r.lhs->attrs.at("rhs_dilation").at(S)) == "1");
  CHECK(print_iexpr(r, *r.lhs->attrs.at("low").at(S)) == "0");
  CHECK(print_iexpr(r, *r.lhs->attrs.at("high").at(S)) == "0");
}

TEST_CASE("check: degenerate, pow, T with a concrete type") {
  const Rule& r = find_rule(forms(), "degen");
  AxisKey S = key(r, "S"), K = key(r, "K");
  CHECK(r.lhs->axes == std::vector<AxisKey>{K});
  CHECK(print_iexpr(r, *r.lhs->attrs.at("add").at(S)) == "1");
  CHECK(r.lhs->shape.count(K) == 0);
  CHECK(sz(r, *r.lhs, S) == "1");
  const Rule& a = find_rule(forms(), "arith");
  // pow(A, 3) is A * A * A; pow(B, 0) is const(1, shape of B)
  const Node& top = *a.lhs;
  const Node& p0 = *top.args[1];
  CHECK(p0.op == Op::Const);
  CHECK(p0.args[0]->lit.num == 1);
  const Node& p3 = *top.args[0]->args[1];
  CHECK(p3.op == Op::Mul);
  CHECK(p3.args[0]->op == Op::Mul);
  // In an int-only rule T and int agree.
  Rule ti = one_rule("rule r : int { rclass K map k : K tensor A : {K: k} lhs A + iota({K: k}, K) rhs A }");
  CHECK(ti.lhs->op == Op::Add);
}

TEST_CASE("check: catalogue of type errors with exact locations") {
  const std::string H = "rule r : num {\n  rclass R, S\n  map s, i, j : R\n  map t : S\n  tensor A, B : {R: s}\n  tensor C : {S: t}\n";
  struct Case {
    std::string body, first_line;  // body starts at line 7
  };
  const Case cases[] = {
      {"  lhs A + X\n  rhs A\n}", "t.tr:7:11: error: undeclared name 'X'"},
      {"  tensor A : {R: s}\n  lhs A\n  rhs A\n}", "t.tr:7:10: error: 'A' is already declared (as tensor at 5:10)"},
      {"  lhs A + C\n  rhs A\n}", "t.tr:7:9: error: '+': operands have different axes: {R} and {S}"},
      {"  lhs A\n  rhs C\n}", "t.tr:8:3: error: sides have different axes: lhs {R}, rhs {S}"},
      {"  lhs A && B\n  rhs A\n}", "t.tr:7:9: error: '&&' needs a bool element type, got T (T stands for int, real)"},
      {"  lhs exp(A)\n  rhs A\n}", "t.tr:7:7: error: 'exp' needs element type real or a float type, got T (T stands for int, real)"},
      {"  lhs A + iota({R: s}, R)\n  rhs A\n}", "t.tr:7:9: error: '+': element types T and int differ (T stands for each of int, real)"},
      {"  lhs slice(A, start={S: t})\n  rhs A\n}", "t.tr:7:23: error: 'slice': attribute 'start' names axis S, which the operand does not have (its axes: {R})"},
      {"  lhs slice(A, start={R: t})\n  rhs A\n}", "t.tr:7:26: error: map 't' is on rclass S, but attribute 'start' of axis R is on rclass R"},
      {"  lhs slice(A, begin={R: 0})\n  rhs A\n}", "t.tr:7:16: error: unknown attribute 'begin' of 'slice' (expected start, end, stride)"},
      {"  lhs broadcast(A, {R@b: s, R: s})\n  rhs A\n}", "t.tr:7:29: error: broadcast adds axis R, which the operand already has"},
      {"  lhs relabel(A, {R -> S})\n  rhs A\n}", "t.tr:7:24: error: 'relabel' can only rename an axis to another copy of the same rclass (R -> S)"},
      {"  tensor D : {R: s, R: s @b}\n  lhs relabel(D, {R -> R@b})\n  rhs D\n}", "t.tr:8:18: error: 'relabel' is not injective: two axes become R@b"},
      {"  lhs A\n  rhs A\n  expect proven\n}", "t.tr:9:10: error: unknown verdict 'proven' (expected proved, counterexample, vacuous, timeout, unknown or unsupported)"},
      {"  lhs A\n}", "t.tr:1:6: error: rule 'r' has no rhs"},
      {"  pre s > 0 || t > 0\n  lhs A\n  rhs A\n}", "t.tr:7:13: error: condition mentions maps of rclasses R and S; say how it ranges over their axes with all(...) or any(...)"},
      {"  pre all(s > 0 && t > 0)\n  lhs A\n  rhs A\n}", "t.tr:7:7: error: 'all(...)' mentions maps of rclasses R and S; quantify each rclass separately"},
      {"  pre all(all(s > 0))\n  lhs A\n  rhs A\n}", "t.tr:7:11: error: 'all(...)' may only be combined with &&, || and ! (it cannot be nested or compared)"},
      {"  tensor D : {R: s, R: t}\n  lhs A\n  rhs A\n}", "t.tr:7:21: error: tensor shape: rclass R appears more than once; give each copy a distinct @label"},
      {"  lhs sum(A, {R: i})\n  rhs sum(A, {R: j})\n  match i == A\n}", "t.tr:9:14: error: 'A' is a tensor, not a map"},
      {"  lhs sum(A, {R: i})\n  rhs sum(A, {R: i})\n}", "t.tr:8:7: error: summation-index map 'i' is used on both sides; use one map per side and relate them with 'match'"},
      {"  pre i > 0\n  lhs sum(A, {R: i})\n  rhs sum(A, {R: j})\n}", "t.tr:7:7: error: map 'i' is a summation index (at 8:18) and cannot also be used in a size, attribute or condition"},
      {"  lhs sum(A, {R: i})\n  rhs sum(A, {R: j})\n  match i == j, i == j\n}", "t.tr:9:17: error: 'i' is already matched"},
      {"  lhs dot(A, B, contract={R: i})\n  rhs dot(A, B, batch={R})\n}", "t.tr:8:3: error: sides have different axes: lhs {}, rhs {R}"},
      {"  lhs dot(A, B)\n  rhs A\n}", "t.tr:7:7: error: 'dot': common axis R must be listed in 'contract' or 'batch'"},
      {"  lhs A / s\n  rhs A\n}", "t.tr:7:11: error: map 's' is not a tensor; maps are used in sizes, attributes and conditions"},
      {"  lhs A * 0.5\n  rhs A\n}", "t.tr:7:11: error: a decimal literal or 'nan' needs element type real or a float type, but here it is T (T stands for int, real)"},
      {"  lhs degenerate(A, add={S: 2})\n  rhs A\n}", "t.tr:7:29: error: 'degenerate' adds axes of size 1 only ('{S: 1}')"},
      {"  lhs concat(A, B, axis=S)\n  rhs A\n}", "t.tr:7:25: error: the axis of 'concat' (S) is not an axis of its operands {R}"},
      {"  lhs pad(A, B)\n  rhs A\n}", "t.tr:7:14: error: the padding value of 'pad' must be a scalar, but it has axes {R}"},
      {"  lhs select(A, A, B)\n  rhs A\n}", "t.tr:7:14: error: the predicate of 'select' needs a bool element type, got T (T stands for int, real)"},
      {"  lhs A\n  rhs A\n  lhs B\n}", "t.tr:9:3: error: rule has more than one 'lhs'"},
      {"  pre s / 2 > 0\n  lhs A\n  rhs A\n}", "t.tr:7:9: error: '/' is for tensors; in a precondition use 'div'"},
      {"  lhs A % 2 div 3\n  rhs A\n}", "t.tr:7:13: error: 'div' is for conditions; on tensors use '/'"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.body);
    std::string src = H + c.body;
    std::string err = check_error(src);
    REQUIRE(!err.empty());
    CHECK(err.substr(0, err.find('\n')) == c.first_line);
    trtest::check_diagnostic_layout(err, src);
  }
}

TEST_CASE("check: file-level errors") {
  CHECK(check_error("rule a : num { rclass R map s : R tensor A : {R: s} lhs A rhs A }\n"
                    "rule a : num { rclass R map s : R tensor A : {R: s} lhs A rhs A }")
            .rfind("t.tr:2:6: error: rule 'a' is already defined at line 1", 0) == 0);
  CHECK(check_error("rule a : int, int { lhs 1 rhs 1 }").rfind("t.tr:1:15: error: dtype 'int' listed twice", 0) == 0);
  CHECK(check_error("rule a : float { lhs 1 rhs 1 }").rfind("t.tr:1:10: error: unknown dtype 'float'", 0) == 0);
  CHECK(check_error("rule a : num { scalar c : float lhs c rhs c }").rfind("t.tr:1:27: error: unknown element type 'float'", 0) == 0);
  CHECK(check_error("rule a : any { rclass R map s : R tensor A : {R: s} lhs A + 1 rhs A }")
            .rfind("t.tr:1:61: error: a numeric literal is used as T, but T is also bool in this rule", 0) == 0);
  CHECK(check_error("rule a : any { rclass R map s : R tensor A : {R: s} lhs A + A rhs A }")
            .rfind("t.tr:1:59: error: '+' needs a numeric element type, but T is also bool in this rule", 0) == 0);
}

TEST_CASE("check: loading is fast") {
  // ~130 rules must load well under a second; forms.tr has 14 rules of every kind.
  std::string text;
  {
    std::ifstream in(kForms);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::string big;
  for (int i = 0; i < 10; ++i) {
    // Rename every rule so the copies do not clash.
    std::string suffix(1, '_');
    suffix += std::to_string(i);
    size_t pos = 0;
    for (size_t p = text.find("\nrule "); p != std::string::npos; p = text.find("\nrule ", p + 1)) {
      size_t e = text.find_first_of(" :", p + 6);
      big.append(text, pos, e - pos);
      big += suffix;
      pos = e;
    }
    big.append(text, pos, std::string::npos);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto f = load_rule_source(big, "big.tr");
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CHECK(f.rules.size() == 130);
  CHECK(s < 0.5);
}

TEST_CASE("check: dot and conv attribute domains") {
  const std::string H = "rule r : num {\n  rclass R, S\n  map s, i : R\n  map t, k : S\n  tensor A : {R: s, S: t}\n  tensor B : {R: s}\n";
  CHECK(check_error(H + "  lhs dot(A, B, contract={S: k})\n  rhs A\n}")
            .rfind("t.tr:7:27: error: 'dot' contract names axis S, which is not an axis of both operands (the common axes: {R})", 0) == 0);
  CHECK(check_error(H + "  lhs dot(A, B, contract={R: i}, batch={R})\n  rhs A\n}")
            .rfind("t.tr:7:40: error: 'dot': axis R is both contracted and batch", 0) == 0);
  CHECK(check_error(H + "  lhs conv(A, B, spatial={R: i})\n  rhs A\n}")
            .rfind("t.tr:7:7: error: 'conv' needs 'feature={F: i}'", 0) == 0);
  CHECK(check_error(H + "  lhs conv(A, B, feature={R: i}, batch={R})\n  rhs A\n}")
            .rfind("t.tr:7:40: error: 'conv': 'batch' must be exactly the axes {S} (the input axes not in the weight)", 0) == 0);
  CHECK(check_error(H + "  lhs conv(A, B, feature={R: i}, stride={R: 2})\n  rhs A\n}")
            .rfind("t.tr:7:42: error: 'conv' (spatial axes only): attribute 'stride' names axis R", 0) == 0);
}

// ---- lets are shared; checked trees are bounded ---------------------------------------------------

namespace {
const std::string kHead = "rule r : int {\n  rclass R\n  map s : R\n  tensor A : {R: s}\n";

// The number of distinct nodes under n.
size_t dag_size(const NodeP& n) {
  std::set<const Node*> seen;
  std::vector<const Node*> work{n.get()};
  while (!work.empty()) {
    const Node* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second) continue;
    for (const auto& a : x->args) work.push_back(a.get());
  }
  return seen.size();
}
}  // namespace

TEST_CASE("check: a let is one node however often it is used (doubling chains stay small)") {
  for (const std::string base : {"A", "1"}) {  // a tensor, and a literal (retyped when it meets A)
    std::string src = kHead + "  let x0 = " + base + "\n";
    for (int k = 1; k <= 60; ++k) src += "  let x" + std::to_string(k) + " = x" + std::to_string(k - 1) + " + x" + std::to_string(k - 1) + "\n";
    src += "  lhs A + x60\n  rhs A\n}\n";
    CAPTURE(base);
    Rule r = one_rule(src);
    // As a tree this is 2^61 nodes; as a DAG, one node per let plus the root and A.
    CHECK(dag_size(r.lhs) == 63);
    CHECK(r.lhs->args[1]->args[0] == r.lhs->args[1]->args[1]);
  }
}

TEST_CASE("check: lets are checked dependencies first, without recursion, and cycles are found") {
  // Each let uses the one written after it: checked in writing order this recursed once per let.
  const int n = 20000;
  std::string src = kHead;
  for (int k = 0; k < n; ++k) src += "  let x" + std::to_string(k) + " = x" + std::to_string(k + 1) + "\n";
  src += "  let x" + std::to_string(n) + " = A\n  lhs x0\n  rhs A\n}\n";
  Rule r = one_rule(src);
  CHECK(r.lhs->op == Op::Input);
  CHECK(check_error(kHead + "  let a = b + A\n  let b = c + A\n  let c = a + A\n  lhs a\n  rhs A\n}\n")
            .rfind("t.tr:5:7: error: 'a' is defined in terms of itself", 0) == 0);
  CHECK(check_error(kHead + "  let a = a\n  lhs a\n  rhs A\n}\n").rfind("t.tr:5:7: error: 'a' is defined in terms of itself", 0) == 0);
}

TEST_CASE("check: the checked tree's height counts the lets it uses, and is bounded") {
  const std::string limit = "expression nesting deeper than " + std::to_string(syntax::kMaxNesting) + " levels, counting the lets it uses";
  // 2000 lets, each one level deeper than the one before: every let is shallow, their chain is not.
  std::string src = kHead + "  let x0 = A\n";
  for (int k = 1; k <= 2000; ++k) src += "  let x" + std::to_string(k) + " = x" + std::to_string(k - 1) + " + A\n";
  src += "  lhs x2000\n  rhs A\n}\n";
  std::string err = check_error(src);
  CHECK(err.find(limit) != std::string::npos);
  CHECK(err.rfind("t.tr:" + std::to_string(5 + syntax::kMaxNesting) + ":", 0) == 0);  // the let that crosses it
  // pow desugars into a chain of multiplications, which counts too.
  CHECK(check_error(kHead + "  lhs pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(pow(A, 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2), 2)\n  rhs A\n}\n").find("degree") !=
        std::string::npos);
}

TEST_CASE("check: the degree of a product is bounded (the solver expands x^n)") {
  Rule ok = one_rule(kHead + "  lhs pow(pow(A, 64), 64)\n  rhs A\n}\n");  // degree 4096: accepted
  CHECK(dag_size(ok.lhs) == 1 + 63 + 63);
  std::string err = check_error(kHead + "  lhs pow(pow(pow(A, 64), 64), 2)\n  rhs A\n}\n");
  CHECK(err.rfind("t.tr:5:7: error: the degree of this product exceeds 4096", 0) == 0);
  // Sums of high-degree terms are not products: A * A + A * A has degree 2.
  CHECK(check_error(kHead + "  lhs pow(pow(A, 64), 64) + pow(pow(A, 64), 64)\n  rhs A\n}\n").empty());
}

TEST_CASE("check: the width of a rule is bounded: concat operands, and operands in all") {
  auto concat = [](int n) {
    std::string args;
    for (int i = 0; i < n; ++i) args += "A, ";
    return "rule r : int {\n  rclass K single\n  map s : K\n  tensor A : {K: s}\n  lhs concat(" + args + "axis=K)\n  rhs A\n}\n";
  };
  CHECK(check_error(concat(1000)).empty());
  CHECK(check_error(concat(1001)).rfind("t.tr:5:7: error: 'concat' takes at most 1000 operands, got 1001", 0) == 0);
  // 100 lets of 200 additions each: 20,000 distinct nodes with two operands each.
  std::string src = kHead;
  for (int k = 0; k < 100; ++k) {
    src += "  let x" + std::to_string(k) + " = A";
    for (int i = 0; i < 200; ++i) src += " + (A * " + std::to_string(i + 2) + ")";
    src += "\n";
  }
  src += "  lhs x0\n  rhs A\n}\n";
  CHECK(check_error(src).find("error: the rule is too large: its expressions have more than 40000 operands (a let counts once)") !=
        std::string::npos);
  // The same let used 100 times counts once.
  std::string shared = kHead + "  let x = A";
  for (int i = 0; i < 200; ++i) shared += " + (A * " + std::to_string(i + 2) + ")";
  shared += "\n  lhs x";
  for (int k = 0; k < 99; ++k) shared += " + x";
  shared += "\n  rhs A\n}\n";
  CHECK(check_error(shared).empty());
}

TEST_SUITE_END();
