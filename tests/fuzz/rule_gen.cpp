// A generator of small trverify rules from fuzz input (rule_gen.h).
#include "tests/fuzz/rule_gen.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace fuzz {
namespace {

// Element types of a subexpression: the rule's numeric type, bool, or the generic T of an `any`
// rule (which admits neither arithmetic nor logic).
enum class Ty { Num, Bool, Gen };

struct X {
  enum Kind { Leaf, Unary, Binary, Call } kind = Leaf;
  std::string text;  // leaf text, operator, or function name
  std::string attr;  // a call's trailing arguments, ", start={R: a}"
  std::vector<X> k;
  Ty ty = Ty::Num;
  int shape = 1;     // 0: a scalar, 1: {R}, 2: {R, S}
  int si = -1;       // sum, dot, reduce_max: the number of its summation index
};

// The declarations by rule dtype; `leaves[ty][shape]` are the names usable there.
struct Lang {
  std::string dtype;
  bool numeric = true;  // arithmetic exists (not in `any` rules)
  bool real = false;    // decimals and exp
  std::vector<std::string> leaves[3][3];
  std::string decls;
};

Lang make_lang(const std::string& dtype) {
  Lang l;
  l.dtype = dtype;
  const bool fixed = dtype[0] == 's' || dtype[0] == 'u', flt = dtype[0] == 'f' || dtype == "bf16";  // machine types
  l.real = dtype == "real" || flt;
  const int N = static_cast<int>(Ty::Num), B = static_cast<int>(Ty::Bool), G = static_cast<int>(Ty::Gen);
  l.decls = "  rclass R, S\n  map s, a, b : R\n  map e : R >= 0\n  map t : S\n  tensor A, B, C : {R: s}\n"
            "  tensor D, E : {R: s, S: t}\n  scalar c, d\n  scalar k : int\n";
  if (dtype == "bool") {
    l.decls += "  tensor I, J : int {R: s}\n  tensor M : int {R: s, S: t}\n  scalar m : int\n";
    l.leaves[B][0] = {"c", "d", "true", "false"};
    l.leaves[B][1] = {"A", "B", "C"};
    l.leaves[B][2] = {"D", "E"};
    l.leaves[N][0] = {"k", "m", "0", "1", "2", "-1"};
    l.leaves[N][1] = {"I", "J"};
    l.leaves[N][2] = {"M"};
    return l;
  }
  l.decls += "  tensor P, Q : bool {R: s}\n  tensor Z : bool {R: s, S: t}\n  scalar q : bool\n";
  l.leaves[B][0] = {"q", "true", "false"};
  l.leaves[B][1] = {"P", "Q"};
  l.leaves[B][2] = {"Z"};
  const int T = dtype == "any" ? G : N;
  l.leaves[T][0] = {"c", "d"};
  l.leaves[T][1] = {"A", "B", "C"};
  l.leaves[T][2] = {"D", "E"};
  if (dtype == "any") {
    l.numeric = false;
    return l;
  }
  for (const char* lit : {"0", "1", "2", "-1"}) l.leaves[N][0].push_back(lit);
  if (!fixed)
    for (const char* lit : {"inf", "-inf"}) l.leaves[N][0].push_back(lit);
  if (fixed) l.leaves[N][0].push_back(dtype[0] == 's' ? "-128" : "255");  // an extreme of s8 / u8
  if (l.real) l.leaves[N][0].push_back("0.5");
  if (flt)
    for (const char* lit : {"-0.0", "nan"}) l.leaves[N][0].push_back(lit);
  return l;
}

struct Gen {
  FuzzedDataProvider& in;
  const Lang& lang;
  int sums = 0;

  template <class T>
  const T& pick(const std::vector<T>& v) { return v[in.ConsumeIntegralInRange<size_t>(0, v.size() - 1)]; }

  X leaf(Ty ty, int shape) {
    X x;
    x.ty = ty;
    x.shape = shape;
    x.text = pick(lang.leaves[static_cast<int>(ty)][shape]);
    return x;
  }
  X call(const std::string& f, Ty ty, int shape, std::vector<X> args, std::string attr = "") {
    X x;
    x.kind = X::Call;
    x.text = f;
    x.ty = ty;
    x.shape = shape;
    x.k = std::move(args);
    x.attr = std::move(attr);
    return x;
  }
  X op(X::Kind kind, const std::string& o, Ty ty, std::vector<X> args) {
    X x;
    x.kind = kind;
    x.text = o;
    x.ty = ty;
    x.k = std::move(args);
    x.shape = 0;
    for (const X& a : x.k) x.shape = std::max(x.shape, a.shape);
    return x;
  }
  int sub_shape(int shape) { return shape > 0 && in.ConsumeIntegralInRange<int>(0, 3) == 0 ? 0 : shape; }

  std::string index_expr() { return pick(std::vector<std::string>{"a", "b", "0", "1", "a + 1", "s - a", "e", "b - a"}); }
  std::string attrs(const std::vector<std::string>& names) {
    std::string s;
    for (const auto& n : names)
      if (in.ConsumeBool()) s += ", " + n + "={R: " + (n == "stride" ? pick(std::vector<std::string>{"1", "2", "a"}) : n == "interior" ? pick(std::vector<std::string>{"0", "1", "e"}) : index_expr()) + "}";
    return s;
  }

  X expr(Ty ty, int shape, int depth);
  X shape_op(Ty ty, int shape, int depth);
  X elementwise(Ty ty, int shape, int depth);
};

X Gen::shape_op(Ty ty, int shape, int depth) {
  const bool num = ty == Ty::Num;
  if (shape == 2) return call("broadcast", ty, 2, {expr(ty, 1, depth + 1)}, ", {S: t}");
  switch (in.ConsumeIntegralInRange<int>(0, 7)) {
    case 0: return call("reverse", ty, 1, {expr(ty, 1, depth + 1)}, ", {R}");
    case 1: return call("slice", ty, 1, {expr(ty, 1, depth + 1)}, attrs({"start", "end", "stride"}));
    case 2: return call("pad", ty, 1, {expr(ty, 1, depth + 1), leaf(ty, 0)}, attrs({"low", "high", "interior"}));
    case 3: return call("dynslice", ty, 1, {expr(ty, 1, depth + 1)}, ", start={R: " + index_expr() + "}, size={R: " + index_expr() + "}");
    case 4: return call("const", ty, 1, {leaf(ty, 0)}, ", {R: " + pick(std::vector<std::string>{"s", "a", "e"}) + "}");
    case 5:
      if (num) {
        X x = call("sum", ty, 1, {expr(ty, 2, depth + 1)});
        x.si = sums++;
        return x;
      }
      [[fallthrough]];
    case 6:
      if (num) {
        X x = call("dot", ty, 1, {expr(ty, 2, depth + 1), expr(ty, 2, depth + 1)});
        x.si = sums++;
        return x;
      }
      [[fallthrough]];
    default:
      if (num) {
        X x = call(in.ConsumeBool() ? "reduce_max" : "reduce_min", ty, 1, {expr(ty, 2, depth + 1)});
        x.si = sums++;
        x.attr = pick(std::vector<std::string>{"inf", "-inf", "0"});
        return x;
      }
      return call("reverse", ty, 1, {expr(ty, 1, depth + 1)}, ", {R}");
  }
}

X Gen::elementwise(Ty ty, int shape, int depth) {
  const int d = depth + 1;
  if (ty == Ty::Bool) {
    switch (in.ConsumeIntegralInRange<int>(0, 4)) {
      case 0: return op(X::Unary, "!", ty, {expr(ty, shape, d)});
      case 1: return op(X::Binary, in.ConsumeBool() ? "&&" : "||", ty, {expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
      case 2: return call("select", ty, shape, {expr(ty, sub_shape(shape), d), expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
      case 3: return op(X::Binary, in.ConsumeBool() ? "==" : "!=", ty, {expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
      default:
        if (lang.numeric)
          return op(X::Binary, pick(std::vector<std::string>{"<", "<=", ">", ">=", "==", "!="}), ty,
                    {expr(Ty::Num, shape, d), expr(Ty::Num, sub_shape(shape), d)});
        return op(X::Unary, "!", ty, {expr(ty, shape, d)});
    }
  }
  if (ty == Ty::Gen) return call("select", ty, shape, {expr(Ty::Bool, sub_shape(shape), d), expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
  switch (in.ConsumeIntegralInRange<int>(0, 6)) {
    case 0: return op(X::Unary, "-", ty, {expr(ty, shape, d)});
    case 1: return call(lang.real && in.ConsumeBool() ? "exp" : "abs", ty, shape, {expr(ty, shape, d)});
    case 2: return call(in.ConsumeBool() ? "max" : "min", ty, shape, {expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
    case 3: return call("select", ty, shape, {expr(Ty::Bool, sub_shape(shape), d), expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
    case 4: return call("clamp", ty, shape, {expr(ty, sub_shape(shape), d), expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
    default:
      return op(X::Binary, pick(std::vector<std::string>{"+", "-", "*", "/", "%", "+", "*"}), ty,
                {expr(ty, shape, d), expr(ty, sub_shape(shape), d)});
  }
}

X Gen::expr(Ty ty, int shape, int depth) {
  const int max_depth = 4;
  const int c = in.ConsumeIntegralInRange<int>(0, 9);
  if (depth >= max_depth || c < 3) return leaf(ty, shape);
  if (shape > 0 && c < 5) return shape_op(ty, shape, depth);
  return elementwise(ty, shape, depth);
}

// ---- rewrites ------------------------------------------------------------------------------------

void collect(X& x, std::vector<X*>& out) {
  out.push_back(&x);
  for (X& c : x.k) collect(c, out);
}

bool same_class(const std::string& a, const std::string& b) {
  static const std::vector<std::vector<std::string>> classes = {
      {"+", "-", "*", "/", "%"}, {"<", "<=", ">", ">=", "==", "!="}, {"&&", "||"}, {"max", "min"}, {"reduce_max", "reduce_min"}};
  for (const auto& cl : classes)
    if (std::count(cl.begin(), cl.end(), a) && std::count(cl.begin(), cl.end(), b)) return true;
  return false;
}

// One rewrite of x in place; returns false when the chosen one does not apply there.
bool rewrite(Gen& g, X& x, int which) {
  auto bin = [&](const std::string& o, X a, X b) { return g.op(X::Binary, o, x.ty, {std::move(a), std::move(b)}); };
  switch (which) {
    case 0:  // commute (unsound for -, /, %, <, ...)
      if (x.k.size() != 2 || x.kind == X::Call) return false;
      std::swap(x.k[0], x.k[1]);
      return true;
    case 1: {  // another operator of the same class
      static const std::vector<std::string> ops = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=",
                                                   "&&", "||", "max", "min", "reduce_max", "reduce_min"};
      const std::string o = g.pick(ops);
      const bool bool_compare = x.kind == X::Binary && x.k[0].ty == Ty::Bool && (x.text == "==" || x.text == "!=");
      if (!same_class(x.text, o) || (bool_compare && o != "==" && o != "!=")) return false;
      x.text = o;
      return true;
    }
    case 2:  // an identity around x
      if (x.ty == Ty::Num) x = bin(g.pick(std::vector<std::string>{"+", "*"}), x, X{X::Leaf, g.in.ConsumeBool() ? "0" : "1", "", {}, Ty::Num, 0});
      else if (x.ty == Ty::Bool) x = g.op(X::Unary, "!", Ty::Bool, {g.op(X::Unary, "!", Ty::Bool, {x})});
      else if (x.shape == 1) x = g.call("reverse", x.ty, 1, {g.call("reverse", x.ty, 1, {x}, ", {R}")}, ", {R}");
      else return false;
      return true;
    case 3:  // drop x for one of its operands of the same type and shape
      for (X& c : x.k)
        if (c.ty == x.ty && c.shape == x.shape) {
          X keep = c;
          x = std::move(keep);
          return true;
        }
      return false;
    case 4:  // (a o b) o c => a o (b o c)
      if (x.kind != X::Binary || x.k[0].kind != X::Binary || x.k[0].text != x.text) return false;
      x = bin(x.text, x.k[0].k[0], bin(x.text, x.k[0].k[1], x.k[1]));
      return true;
    case 5:  // a * (b + c) => a * b + a * c
      if (x.kind != X::Binary || x.text != "*" || x.k[1].kind != X::Binary || (x.k[1].text != "+" && x.k[1].text != "-")) return false;
      x = bin(x.k[1].text, bin("*", x.k[0], x.k[1].k[0]), bin("*", x.k[0], x.k[1].k[1]));
      return true;
    case 6:  // max(a, b) => select(a >= b, a, b)
      if (x.kind != X::Call || (x.text != "max" && x.text != "min")) return false;
      x = g.call("select", x.ty, x.shape, {g.op(X::Binary, x.text == "max" ? ">=" : "<=", Ty::Bool, {x.k[0], x.k[1]}), x.k[0], x.k[1]});
      return true;
    case 7:  // select(p, a, b) => select(!p, b, a)
      if (x.text != "select") return false;
      x = g.call("select", x.ty, x.shape, {g.op(X::Unary, "!", Ty::Bool, {x.k[0]}), x.k[2], x.k[1]});
      return true;
    case 8:  // another leaf
      if (x.kind != X::Leaf) return false;
      x = g.leaf(x.ty, x.shape);
      return true;
    case 9:  // !(a && b) => !a || !b
      if (x.kind != X::Unary || x.text != "!" || x.k[0].kind != X::Binary || (x.k[0].text != "&&" && x.k[0].text != "||")) return false;
      x = bin(x.k[0].text == "&&" ? "||" : "&&", g.op(X::Unary, "!", Ty::Bool, {x.k[0].k[0]}), g.op(X::Unary, "!", Ty::Bool, {x.k[0].k[1]}));
      return true;
    case 10:  // a - b => a + -b
      if (x.kind != X::Binary || x.text != "-") return false;
      x = bin("+", x.k[0], g.op(X::Unary, "-", x.ty, {x.k[1]}));
      return true;
    case 11: {  // a < b => b > a
      static const std::vector<std::pair<std::string, std::string>> flip = {{"<", ">"}, {"<=", ">="}, {">", "<"}, {">=", "<="}};
      for (const auto& [from, to] : flip)
        if (x.kind == X::Binary && x.text == from) {
          x = bin(to, x.k[1], x.k[0]);
          return true;
        }
      return false;
    }
    default:  // clamp(lo, a, hi) => min(hi, max(a, lo))
      if (x.text != "clamp") return false;
      x = g.call("min", x.ty, x.shape, {x.k[2], g.call("max", x.ty, x.shape, {x.k[1], x.k[0]})});
      return true;
  }
}

std::string print(const X& x, char si_prefix) {
  switch (x.kind) {
    case X::Leaf: return x.text;
    case X::Unary: return x.text + "(" + print(x.k[0], si_prefix) + ")";
    case X::Binary: return "(" + print(x.k[0], si_prefix) + " " + x.text + " " + print(x.k[1], si_prefix) + ")";
    case X::Call: break;
  }
  std::string s = x.text + "(";
  for (size_t i = 0; i < x.k.size(); ++i) s += (i ? ", " : "") + print(x.k[i], si_prefix);
  const std::string si = std::string(1, si_prefix) + std::to_string(x.si);
  if (x.text == "sum") s += ", {S: " + si + "}";
  else if (x.text == "dot") s += ", contract={S: " + si + "}, batch={R}";
  else if (x.text == "reduce_max" || x.text == "reduce_min") s += ", {S: " + si + "}, init=" + x.attr;
  else s += x.attr;
  return s + ")";
}

void used_sums(const X& x, std::set<int>& out) {
  if (x.si >= 0) out.insert(x.si);
  for (const X& c : x.k) used_sums(c, out);
}

}  // namespace

std::string generate_rule(FuzzedDataProvider& in) {
  // Machine types (docs/machine-types.md): narrow ones, where wraparound is reached, the two float
  // formats cvc5 decides, and the two computed in binary32 terms.
  static const std::vector<std::string> dtypes = {"int", "real", "num", "bool", "any", "s8", "u8", "s32", "f32", "f64", "f16", "bf16"};
  const Lang lang = make_lang(dtypes[in.ConsumeIntegralInRange<size_t>(0, dtypes.size() - 1)]);
  Gen g{in, lang};
  const Ty root = lang.dtype == "bool" ? Ty::Bool : lang.dtype == "any" ? Ty::Gen : Ty::Num;
  const int shape = in.ConsumeIntegralInRange<int>(1, 2);
  X lhs = g.expr(root, shape, 0);
  for (int tries = 0; tries < 3 && lhs.kind == X::Leaf; ++tries) lhs = g.shape_op(root, shape, 0);
  X rhs = lhs;
  // One to three rewrites that apply (a few places and kinds are tried for each).
  for (int n = in.ConsumeIntegralInRange<int>(1, 3); n > 0; --n) {
    for (int tries = 0; tries < 8; ++tries) {
      std::vector<X*> nodes;
      collect(rhs, nodes);
      X* at = nodes[in.ConsumeIntegralInRange<size_t>(0, nodes.size() - 1)];
      if (rewrite(g, *at, in.ConsumeIntegralInRange<int>(0, 12))) break;
    }
  }
  std::string assume;
  if (lang.numeric && in.ConsumeIntegralInRange<int>(0, 5) == 0) assume = "  assume " + print(g.expr(Ty::Bool, 1, 3), 'i') + "\n";
  std::string r = "rule fz : " + lang.dtype + " {\n" + lang.decls;
  if (g.sums > 0) {
    r += "  map ";
    for (int i = 0; i < g.sums; ++i) r += "i" + std::to_string(i) + ", j" + std::to_string(i) + (i + 1 < g.sums ? ", " : "");
    r += " : S\n";
  }
  static const std::vector<std::string> pres = {"a >= 0", "b >= a", "a <= s", "s > 0", "k > 0", "t > 0", "b <= s"};
  for (const auto& p : pres)
    if (in.ConsumeIntegralInRange<int>(0, 3) == 0) r += "  pre " + p + "\n";
  r += assume;
  r += "  lhs " + print(lhs, 'i') + "\n  rhs " + print(rhs, 'j') + "\n";
  std::set<int> l, rr;
  used_sums(lhs, l);
  used_sums(rhs, rr);
  std::string match;
  for (int i : l)
    if (rr.count(i) && in.ConsumeIntegralInRange<int>(0, 7) != 0) match += (match.empty() ? "" : ", ") + ("i" + std::to_string(i) + " == j" + std::to_string(i));
  if (!match.empty()) r += "  match " + match + "\n";
  return r + "}\n";
}

}  // namespace fuzz
