// The concrete evaluator (reference §2.2): shapes and tensor-level validity per node, memoised,
// and elements on demand. Operator conditions follow the contract exactly; where TensorRight's code
// differs (dynslice clamping, neg of inf) the contract wins.
#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/semantics/value_ops.h"

namespace tr {

namespace {

std::string at_loc(const SourceLoc& loc) { return loc.file.empty() && loc.line == 0 ? "" : " at " + loc.str(); }

std::string key_str(const AxisKey& k, const Rule& rule) {
  std::string s = k.rclass >= 0 && k.rclass < static_cast<int>(rule.rclasses.size())
                      ? rule.rclasses[k.rclass].name
                      : "#" + std::to_string(k.rclass);
  return k.label.empty() ? s : s + "@" + k.label;
}

std::string vec_str(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t j = 0; j < v.size(); ++j) s += (j ? ", " : "") + std::to_string(v[j]);
  return s + "]";
}

// A size, index or attribute value: a machine integer (EvalOverflow when it does not fit).
int64_t as_int(const Value& v, const SourceLoc& loc) {
  if (v.kind != Value::Kind::Int) throw EvalError("expected an integer, got " + v.str() + at_loc(loc));
  if (auto r = to_int64(v.i)) return *r;
  return to_int64(v.i, "a size, index or attribute value", at_loc(loc));  // throws
}

bool as_bool(const Value& v, const SourceLoc& loc) {
  if (v.kind != Value::Kind::Bool) throw EvalError("expected a bool, got " + v.str() + at_loc(loc));
  return v.b;
}

// Calls fn on every multi-index of `shape` in row-major order over (key, axis); fn returns false
// to stop. Returns false if stopped.
bool for_each_index(const Shape& shape, const std::function<bool(const Index&)>& fn) {
  Index idx;
  std::vector<std::pair<AxisKey, size_t>> pos;
  for (const auto& [k, sizes] : shape) {
    idx[k] = std::vector<int64_t>(sizes.size(), 0);
    for (size_t j = 0; j < sizes.size(); ++j) {
      if (sizes[j] <= 0) return true;  // an empty shape has no indices
      pos.emplace_back(k, j);
    }
  }
  while (true) {
    if (!fn(idx)) return false;
    size_t p = pos.size();
    while (p > 0) {
      auto& [k, j] = pos[p - 1];
      if (++idx[k][j] < shape.at(k)[j]) break;
      idx[k][j] = 0;
      --p;
    }
    if (p == 0) return true;
  }
}

Index restrict(const Index& idx, const Shape& to) {
  Index r;
  for (const auto& [k, v] : to) {
    auto it = idx.find(k);
    if (it == idx.end()) throw EvalError("internal: index lacks an axis");
    r[k] = it->second;
  }
  return r;
}

bool is_scalar_shape(const Shape& s) { return s.empty(); }

}  // namespace

// ---- index expressions ------------------------------------------------------------------------

Value eval_iexpr(const IExpr& e, const Instance& inst, std::optional<int> axis) {
  auto arg = [&](size_t i) -> Value {
    if (i >= e.args.size() || !e.args[i]) throw EvalError("malformed index expression" + at_loc(e.loc));
    return eval_iexpr(*e.args[i], inst, axis);
  };
  auto cmp = [&](auto pred) {
    auto c = vops::compare(arg(0), arg(1));
    if (!c) throw EvalError("comparison with an unknown value in a condition" + at_loc(e.loc));
    return Value::boolean(pred(*c));
  };
  switch (e.kind) {
    case IK::Int: return Value::integer(e.value);
    case IK::Bool: return Value::boolean(e.value != 0);
    case IK::Map: {
      auto it = inst.maps.find(e.id);
      if (it == inst.maps.end()) throw EvalError("no value for map #" + std::to_string(e.id) + at_loc(e.loc));
      if (!axis) throw EvalError("map reference outside a per-axis context" + at_loc(e.loc));
      if (*axis < 0 || *axis >= static_cast<int>(it->second.size()))
        throw EvalError("map #" + std::to_string(e.id) + " has no value on axis " + std::to_string(*axis) +
                        at_loc(e.loc));
      return Value::integer(it->second[*axis]);
    }
    case IK::Scalar: {
      auto it = inst.scalars.find(e.id);
      if (it == inst.scalars.end())
        throw EvalError("no value for scalar #" + std::to_string(e.id) + at_loc(e.loc));
      if (it->second.kind == Value::Kind::Machine) {  // a fixed-width integer stands for its value
        if (!is_fixed(it->second.mt)) throw EvalError("a float scalar in a condition (dtype_problem)" + at_loc(e.loc));
        return Value::integer(mach::int_value(it->second.mt, it->second.bits));
      }
      return it->second;
    }
    case IK::Add: return vops::add(arg(0), arg(1));
    case IK::Sub: return vops::sub(arg(0), arg(1));
    case IK::Mul: return vops::mul(arg(0), arg(1));
    case IK::Div:
    case IK::Mod: {
      Value a = arg(0), b = arg(1);
      if (a.kind == Value::Kind::Int && b.kind == Value::Kind::Int) {
        if (b.i == 0) return e.kind == IK::Div ? Value::integer(0) : a;  // total: x div 0 = 0, x mod 0 = x
        // "floor modulus" per ir.h: x mod m lies in [0, |m|) (Euclidean for negative m).
        if (e.kind == IK::Div) {
          BigInt q = floor_div(a.i, b.i);
          if (b.i < 0 && floor_mod(a.i, b.i) != 0) q += 1;
          return Value::integer(std::move(q));
        }
        BigInt m = floor_mod(a.i, b.i);
        if (m < 0) m -= b.i;
        return Value::integer(std::move(m));
      }
      if (e.kind == IK::Div) return vops::div(a, b);
      throw EvalError("mod on a non-integer value" + at_loc(e.loc));
    }
    case IK::Neg: return vops::neg(arg(0));
    case IK::Abs: return vops::abs(arg(0));
    case IK::Min: return vops::min(arg(0), arg(1));
    case IK::Max: return vops::max(arg(0), arg(1));
    case IK::Ite: return as_bool(arg(0), e.loc) ? arg(1) : arg(2);
    case IK::Eq: return cmp([](int c) { return c == 0; });
    case IK::Ne: return cmp([](int c) { return c != 0; });
    case IK::Lt: return cmp([](int c) { return c < 0; });
    case IK::Le: return cmp([](int c) { return c <= 0; });
    case IK::Gt: return cmp([](int c) { return c > 0; });
    case IK::Ge: return cmp([](int c) { return c >= 0; });
    case IK::And: return Value::boolean(as_bool(arg(0), e.loc) && as_bool(arg(1), e.loc));
    case IK::Or: return Value::boolean(as_bool(arg(0), e.loc) || as_bool(arg(1), e.loc));
    case IK::Not: return Value::boolean(!as_bool(arg(0), e.loc));
    case IK::All:
    case IK::Any: {
      auto it = inst.rank.find(e.rclass);
      if (it == inst.rank.end()) throw EvalError("no rank for rclass #" + std::to_string(e.rclass) + at_loc(e.loc));
      bool all = e.kind == IK::All;
      if (e.args.empty() || !e.args[0]) throw EvalError("malformed quantifier" + at_loc(e.loc));
      for (int j = 0; j < it->second; ++j) {
        bool v = as_bool(eval_iexpr(*e.args[0], inst, j), e.loc);
        if (v != all) return Value::boolean(v);
      }
      return Value::boolean(all);
    }
  }
  throw EvalError("unknown index expression kind" + at_loc(e.loc));
}

// ---- tensor expressions -----------------------------------------------------------------------

class Evaluator {
 public:
  Evaluator(const Rule& r, const Instance& i) : rule_(r), inst_(i) {}

  struct Info {
    bool defined = false;
    std::string why;
    Shape shape;
  };

  const Info& info(const Node& n) {
    auto it = memo_.find(&n);
    if (it != memo_.end()) return it->second;
    Info inf = compute_info(n);
    return memo_.emplace(&n, std::move(inf)).first->second;
  }

  Point at(const Node& n, const Index& idx) {
    const Info& inf = info(n);
    if (!inf.defined) return undefined(inf.why);
    if (idx.size() != inf.shape.size())
      throw EvalError(std::string("internal: index does not match the shape of ") + to_string(n.op) + at_loc(n.loc));
    for (const auto& [k, sizes] : inf.shape) {
      auto ik = idx.find(k);
      if (ik == idx.end() || ik->second.size() != sizes.size())
        throw EvalError("internal: index lacks axis " + key_str(k, rule_) + " of " + to_string(n.op) + at_loc(n.loc));
      for (size_t j = 0; j < sizes.size(); ++j)
        if (ik->second[j] < 0 || ik->second[j] >= sizes[j])
          return undefined("index " + key_str(k, rule_) + "." + std::to_string(j) + " = " +
                           std::to_string(ik->second[j]) + " out of range [0, " + std::to_string(sizes[j]) +
                           ") of " + to_string(n.op) + at_loc(n.loc));
    }
    // Elements are memoised per node and index: a let used twice is one node (the rule is a DAG),
    // and a chain of lets that each use the previous one twice must not be evaluated as a tree.
    auto& memo = elem_memo_[&n];
    if (auto it = memo.find(idx); it != memo.end()) return it->second;
    Point p = access(n, idx);
    return memo.emplace(idx, std::move(p)).first->second;
  }

  const Rule& rule() const { return rule_; }

 private:
  static Point undefined(std::string why) { return Point{false, std::nullopt, std::move(why)}; }
  static Point value(Value v) { return Point{true, std::move(v), {}}; }

  DType dtype(const Node& n) const { return n.etype.resolve(inst_.dtype); }

  int rank(int rclass) const {
    auto it = inst_.rank.find(rclass);
    if (it == inst_.rank.end()) throw EvalError("no rank for rclass #" + std::to_string(rclass));
    return it->second;
  }

  std::vector<int64_t> per_axis(const IExprP& e, int rclass, const SourceLoc& loc) const {
    if (!e) throw EvalError("missing index expression" + at_loc(loc));
    int n = rank(rclass);
    std::vector<int64_t> v(n);
    for (int j = 0; j < n; ++j) v[j] = as_int(eval_iexpr(*e, inst_, j), e->loc.line ? e->loc : loc);
    return v;
  }

  Shape eval_shape(const AxisMap& m, const SourceLoc& loc) const {
    Shape s;
    for (const auto& [k, e] : m) s[k] = per_axis(e, k.rclass, loc);
    return s;
  }

  // Attribute `name` on key k, or `def` (a per-axis vector) when absent.
  // Attribute values are evaluated once per node: element accesses (sums, convs) ask many times.
  std::vector<int64_t> attr(const Node& n, const std::string& name, const AxisKey& k,
                            std::vector<int64_t> def) {
    auto a = n.attrs.find(name);
    if (a == n.attrs.end() || !a->second.count(k)) return def;
    auto [it, fresh] = attr_memo_.try_emplace(&n);
    if (fresh)
      for (const auto& [nm, m] : n.attrs)
        for (const auto& [key, e] : m) it->second[nm][key] = per_axis(e, key.rclass, n.loc);
    return it->second.at(name).at(k);
  }
  bool has_attr(const Node& n, const std::string& name, const AxisKey& k) const {
    auto a = n.attrs.find(name);
    return a != n.attrs.end() && a->second.count(k);
  }

  std::string ctx(const Node& n, const AxisKey& k, size_t j) const {
    return to_string(n.op) + std::string(" on ") + key_str(k, rule_) + "." + std::to_string(j) + at_loc(n.loc);
  }

  const Node& arg(const Node& n, size_t i) const {
    if (i >= n.args.size() || !n.args[i])
      throw EvalError(std::string("malformed ") + to_string(n.op) + ": missing operand" + at_loc(n.loc));
    return *n.args[i];
  }

  static Info bad(std::string why) { return Info{false, std::move(why), {}}; }
  static Info good(Shape s) { return Info{true, {}, std::move(s)}; }
  static Info nonneg(Shape s, const std::string& what) {
    for (const auto& [k, v] : s)
      for (size_t j = 0; j < v.size(); ++j)
        if (v[j] < 0) return bad(what + ": size " + std::to_string(v[j]) + " < 0");
    return good(std::move(s));
  }

  // The shape and tensor-level validity of n (a: its operands' infos, all defined).
  Info compute_info(const Node& n);
  Info elementwise_info(const Node& n, const std::vector<const Info*>& a);
  Info slice_info(const Node& n, const Shape& x);
  Info pad_info(const Node& n, const Shape& x, const Shape& pad_value);
  Info dynslice_info(const Node& n, const Shape& x);
  Info dynupdate_info(const Node& n, const Shape& xs, const Shape& us);
  Info concat_info(const Node& n, const std::vector<const Info*>& a);
  Info conv_info(const Node& n, const Shape& in, const Shape& w);
  Info degenerate_info(const Node& n, const Shape& x);

  // The element of n at idx (within n's shape, which at() has checked).
  Point access(const Node& n, const Index& idx);
  Point operand(const Node& n, size_t i, const Index& idx);
  Point unary(const Node& n, const Index& idx, Value (*f)(const Value&));
  Point binary(const Node& n, const Index& idx, Value (*f)(const Value&, const Value&));
  Point comparison(const Node& n, const Index& idx, bool (*pred)(int));
  Point logical(const Node& n, const Index& idx, bool (*f)(bool, bool));
  Point literal_element(const Node& n);
  Point reduce_element(const Node& n, const Index& idx);
  Point pad_element(const Node& n, const Index& idx);
  Point dynupdate_element(const Node& n, const Index& idx);
  Point concat_element(const Node& n, const Index& idx);
  Point dot_element(const Node& n, const Index& idx);
  Point conv_element(const Node& n, const Index& idx);
  Point padded_access(const Node& x, const Index& idx, const std::map<AxisKey, std::vector<int64_t>>& low,
                      const std::map<AxisKey, std::vector<int64_t>>& interior, const Value& pad_value,
                      DType t);

  Value convert(const Value& v, DType t, const SourceLoc& loc) const {
    if (is_machine(t) || v.kind == Value::Kind::Machine) {
      if (v.kind == Value::Kind::Machine && v.mt == t) return v;
      throw EvalError("value " + v.str() + " does not have type " + tr::to_string(t) + at_loc(loc));
    }
    if (t == DType::Real && v.kind == Value::Kind::Int) {
      Value r = Value::real(Rational(v.i));
      r.inexact = v.inexact;
      return r;
    }
    if (t == DType::Int && v.kind == Value::Kind::Real) {
      if (!v.r.is_integer()) throw EvalError("a real value " + v.str() + " where an int is expected" + at_loc(loc));
      Value r = Value::integer(v.r.num());  // an integral rational
      r.inexact = v.inexact;
      return r;
    }
    if ((t == DType::Bool) != (v.kind == Value::Kind::Bool))
      throw EvalError("value " + v.str() + " does not have type " + tr::to_string(t) + at_loc(loc));
    return v;
  }

  const Rule& rule_;
  const Instance& inst_;
  std::map<const Node*, Info> memo_;
  std::map<const Node*, std::map<std::string, AxisValues>> attr_memo_;
  std::unordered_map<const Node*, std::map<Index, Point>> elem_memo_;
};

Evaluator::Info Evaluator::compute_info(const Node& n) {
  // Every operand must be defined at the tensor level for the node to be.
  std::vector<const Info*> a;
  for (size_t i = 0; i < n.args.size(); ++i) {
    const Info& ai = info(arg(n, i));
    if (!ai.defined) return bad(ai.why);
    a.push_back(&ai);
  }
  const std::string op = to_string(n.op);
  switch (n.op) {
    case Op::Input: {
      if (n.input < 0 || n.input >= static_cast<int>(rule_.tensors.size()))
        throw EvalError("input refers to no tensor" + at_loc(n.loc));
      const TensorDecl& d = rule_.tensors[n.input];
      return nonneg(eval_shape(d.shape, d.loc), "tensor " + d.name + at_loc(d.loc));
    }
    case Op::Literal:
    case Op::ScalarRef: return good({});
    case Op::Const:
    case Op::Iota: {
      Info r = nonneg(eval_shape(n.shape, n.loc), op + at_loc(n.loc));
      if (r.defined && n.op == Op::Iota) {
        if (n.axes.empty() || !r.shape.count(n.axes[0])) throw EvalError("iota without its axis" + at_loc(n.loc));
        if (r.shape[n.axes[0]].size() != 1)
          throw EvalError("iota axis " + key_str(n.axes[0], rule_) + " must have exactly one axis" + at_loc(n.loc));
      }
      return r;
    }
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Not:
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Rem: case Op::Max: case Op::Min:
    case Op::And: case Op::Or:
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::Select: case Op::Clamp: return elementwise_info(n, a);
    case Op::Broadcast: {
      Shape s = a[0]->shape;
      Shape wanted = eval_shape(n.shape, n.loc);
      for (auto& [k, v] : wanted) {
        if (s.count(k)) continue;  // the operand's own axes keep their sizes
        for (int64_t x : v)
          if (x < 0) return bad("broadcast: new size " + std::to_string(x) + " < 0 on " + key_str(k, rule_) + at_loc(n.loc));
        s[k] = v;
      }
      return good(std::move(s));
    }
    case Op::Sum: {
      if (n.reducer != Reducer::Sum && (n.args.size() != 2 || !is_scalar_shape(a[1]->shape)))
        throw EvalError(std::string(to_string(n.reducer)) + " needs a scalar init value" + at_loc(n.loc));
      Shape s = a[0]->shape;
      for (const auto& [k, si] : n.sum_index) {
        (void)si;
        if (!s.erase(k)) throw EvalError("sum over an axis the operand lacks" + at_loc(n.loc));
      }
      return good(std::move(s));
    }
    case Op::Slice: return slice_info(n, a[0]->shape);
    case Op::Pad: return pad_info(n, a[0]->shape, a[1]->shape);
    case Op::DynSlice: return dynslice_info(n, a[0]->shape);
    case Op::DynUpdate: return dynupdate_info(n, a[0]->shape, a[1]->shape);
    case Op::Concat: return concat_info(n, a);
    case Op::Relabel: {
      Shape s;
      for (const auto& [k, v] : a[0]->shape) {
        auto r = n.relabel.find(k);
        AxisKey to = r == n.relabel.end() ? k : r->second;
        if (!s.emplace(to, v).second) throw EvalError("relabel maps two axes to " + key_str(to, rule_) + at_loc(n.loc));
      }
      return good(std::move(s));
    }
    case Op::Reverse: return good(a[0]->shape);
    case Op::Dot: {
      const Shape &as = a[0]->shape, &bs = a[1]->shape;
      Shape s;
      for (const auto& [k, v] : as)
        if (!n.sum_index.count(k)) s[k] = v;
      for (const auto& [k, v] : bs) {
        auto ak = as.find(k);
        if (ak == as.end()) {
          s[k] = v;
          continue;
        }
        if (ak->second != v)
          return bad("dot: operand sizes differ on common axis " + key_str(k, rule_) + ": " + vec_str(ak->second) +
                     " vs " + vec_str(v) + at_loc(n.loc));
      }
      return good(std::move(s));
    }
    case Op::Conv: return conv_info(n, a[0]->shape, a[1]->shape);
    case Op::Degenerate: return degenerate_info(n, a[0]->shape);
  }
  throw EvalError("unknown operator" + at_loc(n.loc));
}

Evaluator::Info Evaluator::elementwise_info(const Node& n, const std::vector<const Info*>& a) {
  // Tensor operands must agree; scalar operands (empty shape) are splatted.
  const std::string op = to_string(n.op);
  const Shape* first = nullptr;
  for (const Info* ai : a) {
    if (is_scalar_shape(ai->shape)) continue;
    if (!first) {
      first = &ai->shape;
      continue;
    }
    for (const auto& [k, v] : ai->shape) {
      auto f = first->find(k);
      if (f == first->end() || first->size() != ai->shape.size())
        throw EvalError(op + " operands have different axes" + at_loc(n.loc));
      if (f->second != v)
        return bad(op + " operand sizes differ on " + key_str(k, rule_) + ": " + vec_str(f->second) + " vs " +
                   vec_str(v) + at_loc(n.loc));
    }
  }
  return good(first ? *first : Shape{});
}

Evaluator::Info Evaluator::slice_info(const Node& n, const Shape& x) {
  Shape s;
  for (const auto& [k, size] : x) {
    auto st = attr(n, "start", k, std::vector<int64_t>(size.size(), 0));
    auto en = attr(n, "end", k, size);
    auto sd = attr(n, "stride", k, std::vector<int64_t>(size.size(), 1));
    auto& out = s[k];
    for (size_t j = 0; j < size.size(); ++j) {
      if (sd[j] <= 0) return bad("slice: stride " + std::to_string(sd[j]) + " <= 0, " + ctx(n, k, j));
      if (!(0 <= st[j] && st[j] <= en[j] && en[j] <= size[j]))
        return bad("slice: not 0 <= start <= end <= size (start " + std::to_string(st[j]) + ", end " +
                   std::to_string(en[j]) + ", size " + std::to_string(size[j]) + "), " + ctx(n, k, j));
      out.push_back(floor_div(checked_sub(checked_add(checked_sub(en[j], st[j]), sd[j]), 1), sd[j]));
    }
  }
  return good(std::move(s));
}

Evaluator::Info Evaluator::pad_info(const Node& n, const Shape& x, const Shape& pad_value) {
  if (!is_scalar_shape(pad_value)) throw EvalError("pad value must be a scalar" + at_loc(n.loc));
  Shape s;
  for (const auto& [k, size] : x) {
    std::vector<int64_t> zero(size.size(), 0);
    auto lo = attr(n, "low", k, zero), hi = attr(n, "high", k, zero), in = attr(n, "interior", k, zero);
    auto& out = s[k];
    for (size_t j = 0; j < size.size(); ++j) {
      if (in[j] < 0) return bad("pad: interior " + std::to_string(in[j]) + " < 0, " + ctx(n, k, j));
      int64_t o = checked_add(checked_add(lo[j], hi[j]),
                              checked_add(size[j], checked_mul(std::max<int64_t>(0, size[j] - 1), in[j])));
      if (o < 0) return bad("pad: output size " + std::to_string(o) + " < 0, " + ctx(n, k, j));
      out.push_back(o);
    }
  }
  return good(std::move(s));
}

Evaluator::Info Evaluator::dynslice_info(const Node& n, const Shape& x) {
  Shape s = x;
  for (auto& [k, size] : s) {
    if (!has_attr(n, "size", k) && !has_attr(n, "start", k)) continue;
    if (!has_attr(n, "size", k) || !has_attr(n, "start", k))
      throw EvalError("dynslice needs both start and size on " + key_str(k, rule_) + at_loc(n.loc));
    auto st = attr(n, "start", k, {}), sz = attr(n, "size", k, {});
    for (size_t j = 0; j < size.size(); ++j) {
      if (st[j] < 0) return bad("dynslice: start " + std::to_string(st[j]) + " < 0, " + ctx(n, k, j));
      if (sz[j] <= 0) return bad("dynslice: size " + std::to_string(sz[j]) + " <= 0, " + ctx(n, k, j));
      if (checked_add(st[j], sz[j]) > size[j])
        return bad("dynslice: start + size = " + std::to_string(st[j] + sz[j]) + " > " + std::to_string(size[j]) +
                   ", " + ctx(n, k, j));
    }
    size = sz;
  }
  return good(std::move(s));
}

Evaluator::Info Evaluator::dynupdate_info(const Node& n, const Shape& xs, const Shape& us) {
  for (const auto& [k, xsz] : xs) {
    auto u = us.find(k);
    if (u == us.end() || us.size() != xs.size())
      throw EvalError("dynupdate: update must have the operand's axes" + at_loc(n.loc));
    if (!has_attr(n, "start", k))
      throw EvalError("dynupdate: no start on " + key_str(k, rule_) + at_loc(n.loc));
    auto st = attr(n, "start", k, {});
    for (size_t j = 0; j < xsz.size(); ++j) {
      if (st[j] < 0) return bad("dynupdate: start " + std::to_string(st[j]) + " < 0, " + ctx(n, k, j));
      if (u->second[j] <= 0)
        return bad("dynupdate: update size " + std::to_string(u->second[j]) + " <= 0, " + ctx(n, k, j));
      if (checked_add(st[j], u->second[j]) > xsz[j])
        return bad("dynupdate: start + update size = " + std::to_string(st[j] + u->second[j]) + " > " +
                   std::to_string(xsz[j]) + ", " + ctx(n, k, j));
    }
  }
  return good(xs);
}

Evaluator::Info Evaluator::concat_info(const Node& n, const std::vector<const Info*>& a) {
  if (n.axes.empty()) throw EvalError("concat without an axis" + at_loc(n.loc));
  const AxisKey& ck = n.axes[0];
  Shape s = a[0]->shape;
  if (!s.count(ck) || s[ck].size() != 1)
    throw EvalError("concat axis " + key_str(ck, rule_) + " must be a single axis of the operands" + at_loc(n.loc));
  for (size_t i = 1; i < a.size(); ++i) {
    const Shape& o = a[i]->shape;
    if (o.size() != s.size()) throw EvalError("concat operands have different axes" + at_loc(n.loc));
    for (const auto& [k, v] : o) {
      if (!s.count(k)) throw EvalError("concat operands have different axes" + at_loc(n.loc));
      if (k == ck) continue;
      if (s[k] != v)
        return bad("concat: operand " + std::to_string(i + 1) + " size " + vec_str(v) + " differs from " +
                   vec_str(s[k]) + " on " + key_str(k, rule_) + at_loc(n.loc));
    }
    s[ck][0] = checked_add(s[ck][0], o.at(ck)[0]);
  }
  return good(std::move(s));
}

Evaluator::Info Evaluator::conv_info(const Node& n, const Shape& in, const Shape& w) {
  if (!n.conv) throw EvalError("conv without its attributes" + at_loc(n.loc));
  const ConvAttrs& c = *n.conv;
  Shape s;
  for (const auto& k : c.batch) s[k] = in.at(k);
  for (const auto& k : c.output_feature) s[k] = w.at(k);
  for (const auto& k : c.feature)
    if (in.at(k) != w.at(k))
      return bad("conv: feature sizes differ on " + key_str(k, rule_) + at_loc(n.loc));
  for (const auto& k : c.spatial) {
    const auto &si = in.at(k), &sw = w.at(k);
    std::vector<int64_t> one(si.size(), 1), zero(si.size(), 0);
    auto st = attr(n, "stride", k, one), lo = attr(n, "low", k, zero), hi = attr(n, "high", k, zero);
    auto ld = attr(n, "lhs_dilation", k, one), rd = attr(n, "rhs_dilation", k, one);
    auto& out = s[k];
    for (size_t j = 0; j < si.size(); ++j) {
      if (st[j] <= 0) return bad("conv: stride " + std::to_string(st[j]) + " <= 0, " + ctx(n, k, j));
      if (ld[j] < 1 || rd[j] < 1) return bad("conv: dilation < 1, " + ctx(n, k, j));
      int64_t pin = checked_add(checked_add(lo[j], hi[j]),
                                checked_add(si[j], checked_mul(std::max<int64_t>(0, si[j] - 1), ld[j] - 1)));
      if (pin < 0) return bad("conv: padded input size " + std::to_string(pin) + " < 0, " + ctx(n, k, j));
      int64_t pw = checked_add(sw[j], checked_mul(std::max<int64_t>(0, sw[j] - 1), rd[j] - 1));
      int64_t o = floor_div(checked_add(checked_sub(pin, pw), st[j]), st[j]);
      if (o < 0) return bad("conv: output size " + std::to_string(o) + " < 0, " + ctx(n, k, j));
      out.push_back(o);
    }
  }
  return good(std::move(s));
}

Evaluator::Info Evaluator::degenerate_info(const Node& n, const Shape& x) {
  Shape s = x;
  for (const auto& k : n.axes) {
    auto it = s.find(k);
    if (it == s.end()) throw EvalError("degenerate removes an axis the operand lacks" + at_loc(n.loc));
    for (size_t j = 0; j < it->second.size(); ++j)
      if (it->second[j] != 1)
        return bad("degenerate: removed axis has size " + std::to_string(it->second[j]) + " != 1, " + ctx(n, k, j));
    s.erase(it);
  }
  auto add = n.attrs.find("add");
  if (add != n.attrs.end())
    for (const auto& [k, e] : add->second) {
      auto v = per_axis(e, k.rclass, n.loc);
      for (size_t j = 0; j < v.size(); ++j)
        if (v[j] != 1) return bad("degenerate: added axis has size " + std::to_string(v[j]) + " != 1, " + ctx(n, k, j));
      if (!s.emplace(k, v).second) throw EvalError("degenerate adds an existing axis" + at_loc(n.loc));
    }
  return good(std::move(s));
}

// The element of pad(x, v, low, interior) at idx (high only bounds the shape, checked by at()).
Point Evaluator::padded_access(const Node& x, const Index& idx, const std::map<AxisKey, std::vector<int64_t>>& low,
                               const std::map<AxisKey, std::vector<int64_t>>& interior, const Value& pad_value,
                               DType t) {
  const Shape& xs = info(x).shape;
  Index orig;
  for (const auto& [k, size] : xs) {
    const auto& i = idx.at(k);
    auto& o = orig[k];
    for (size_t j = 0; j < size.size(); ++j) {
      int64_t lo = low.at(k)[j], in = interior.at(k)[j];
      int64_t rel = checked_sub(i[j], lo);
      int64_t inner_end = checked_add(size[j], checked_mul(std::max<int64_t>(0, size[j] - 1), in));
      if (rel < 0 || rel >= inner_end || floor_mod(rel, in + 1) != 0) return value(convert(pad_value, t, x.loc));
      o.push_back(rel / (in + 1));
    }
  }
  return at(x, orig);
}

// Operand i of n at idx (a scalar operand at the empty index).
Point Evaluator::operand(const Node& n, size_t i, const Index& idx) {
  const Node& x = arg(n, i);
  return is_scalar_shape(info(x).shape) ? at(x, {}) : at(x, idx);
}

Point Evaluator::unary(const Node& n, const Index& idx, Value (*f)(const Value&)) {
  Point x = operand(n, 0, idx);
  if (!x.defined) return x;
  return value(convert(f(*x.value), dtype(n), n.loc));
}

Point Evaluator::binary(const Node& n, const Index& idx, Value (*f)(const Value&, const Value&)) {
  Point x = operand(n, 0, idx), y = operand(n, 1, idx);
  if (!x.defined) return x;
  if (!y.defined) return y;
  return value(convert(f(*x.value, *y.value), dtype(n), n.loc));
}

// A comparison; pred gets the sign of the three-way comparison of the operands.
Point Evaluator::comparison(const Node& n, const Index& idx, bool (*pred)(int)) {
  Point x = operand(n, 0, idx), y = operand(n, 1, idx);
  if (!x.defined) return x;
  if (!y.defined) return y;
  auto c = vops::compare(*x.value, *y.value);
  // IEEE: a NaN is unordered, so every comparison with it is false but `!=`.
  bool unordered = !c && x.value->is_machine_float();
  if (!c && !unordered) return undefined(std::string("comparison with an unknown value (") + to_string(n.op) + ")" + at_loc(n.loc));
  Value r = Value::boolean(unordered ? n.op == Op::Ne : pred(*c));
  r.inexact = x.value->inexact || y.value->inexact;
  return value(r);
}

Point Evaluator::logical(const Node& n, const Index& idx, bool (*f)(bool, bool)) {
  Point x = operand(n, 0, idx), y = operand(n, 1, idx);
  if (!x.defined) return x;
  if (!y.defined) return y;
  return value(Value::boolean(f(as_bool(*x.value, n.loc), as_bool(*y.value, n.loc))));
}

Point Evaluator::access(const Node& n, const Index& idx) {
  const DType t = dtype(n);
  switch (n.op) {
    case Op::Input: {
      const TensorDecl& d = rule_.tensors[n.input];
      DType dt = d.etype.resolve(inst_.dtype);
      auto it = inst_.inputs.find(n.input);
      if (it != inst_.inputs.end()) {
        auto e = it->second.elems.find(idx);
        if (e != it->second.elems.end()) return value(convert(e->second, dt, d.loc));
      }
      return value(Value::zero(dt));
    }
    case Op::Literal: return literal_element(n);
    case Op::ScalarRef: {
      auto it = inst_.scalars.find(n.input);
      if (it == inst_.scalars.end()) throw EvalError("no value for scalar #" + std::to_string(n.input) + at_loc(n.loc));
      return value(it->second.is_inf() || it->second.kind == Value::Kind::Unknown ? it->second
                                                                                   : convert(it->second, t, n.loc));
    }
    case Op::Const: {
      // A kept operand (ir.h: pow(A, 0)) is accessed at the same index; its value is not used.
      if (n.args.size() > 1) {
        Point kept = operand(n, 1, idx);
        if (!kept.defined) return kept;
      }
      return at(arg(n, 0), {});
    }
    case Op::Iota: {
      int64_t i = idx.at(n.axes[0])[0];
      if (is_machine(t)) return value(Value::machine(t, mach::wrap(t, BigInt(static_cast<long>(i)))));  // XLA: wraps
      return value(convert(Value::integer(i), t, n.loc));
    }
    case Op::Neg: return unary(n, idx, &vops::neg);
    case Op::Abs: return unary(n, idx, &vops::abs);
    case Op::Exp: return unary(n, idx, &vops::exp);
    case Op::Not: {
      Point x = operand(n, 0, idx);
      if (!x.defined) return x;
      return value(Value::boolean(!as_bool(*x.value, n.loc)));
    }
    case Op::Add: return binary(n, idx, &vops::add);
    case Op::Sub: return binary(n, idx, &vops::sub);
    case Op::Mul: return binary(n, idx, &vops::mul);
    case Op::Div: return binary(n, idx, &vops::div);
    case Op::Rem: return binary(n, idx, &vops::rem);
    case Op::Max: return binary(n, idx, &vops::max);
    case Op::Min: return binary(n, idx, &vops::min);
    case Op::And: return logical(n, idx, [](bool x, bool y) { return x && y; });
    case Op::Or: return logical(n, idx, [](bool x, bool y) { return x || y; });
    case Op::Eq: return comparison(n, idx, [](int c) { return c == 0; });
    case Op::Ne: return comparison(n, idx, [](int c) { return c != 0; });
    case Op::Lt: return comparison(n, idx, [](int c) { return c < 0; });
    case Op::Le: return comparison(n, idx, [](int c) { return c <= 0; });
    case Op::Gt: return comparison(n, idx, [](int c) { return c > 0; });
    case Op::Ge: return comparison(n, idx, [](int c) { return c >= 0; });
    case Op::Select: {
      // Only the chosen branch is accessed (TensorRight's select is an if-then-else on the access).
      Point p = operand(n, 0, idx);
      if (!p.defined) return p;
      return operand(n, as_bool(*p.value, n.loc) ? 1 : 2, idx);
    }
    case Op::Clamp: {
      Point lo = operand(n, 0, idx), x = operand(n, 1, idx), hi = operand(n, 2, idx);
      for (Point* q : {&lo, &x, &hi})
        if (!q->defined) return *q;
      return value(convert(vops::min(*hi.value, vops::max(*x.value, *lo.value)), t, n.loc));
    }
    case Op::Broadcast: {
      const Node& x = arg(n, 0);
      return at(x, restrict(idx, info(x).shape));
    }
    case Op::Sum: return reduce_element(n, idx);
    case Op::Slice: {
      const Node& x = arg(n, 0);
      Index ci;
      for (const auto& [k, size] : info(x).shape) {
        auto st = attr(n, "start", k, std::vector<int64_t>(size.size(), 0));
        auto sd = attr(n, "stride", k, std::vector<int64_t>(size.size(), 1));
        auto& o = ci[k];
        for (size_t j = 0; j < size.size(); ++j) o.push_back(checked_add(st[j], checked_mul(sd[j], idx.at(k)[j])));
      }
      return at(x, ci);
    }
    case Op::Pad: return pad_element(n, idx);
    case Op::DynSlice: {
      const Node& x = arg(n, 0);
      Index ci = idx;
      for (auto& [k, v] : ci)
        if (has_attr(n, "start", k)) {
          auto st = attr(n, "start", k, {});
          for (size_t j = 0; j < v.size(); ++j) v[j] = checked_add(v[j], st[j]);
        }
      return at(x, ci);
    }
    case Op::DynUpdate: return dynupdate_element(n, idx);
    case Op::Concat: return concat_element(n, idx);
    case Op::Relabel: {
      std::map<AxisKey, AxisKey> back;
      for (const auto& [from, to] : n.relabel) back[to] = from;
      Index ci;
      for (const auto& [k, v] : idx) {
        auto b = back.find(k);
        ci[b == back.end() ? k : b->second] = v;
      }
      return at(arg(n, 0), ci);
    }
    case Op::Reverse: {
      const Node& x = arg(n, 0);
      const Shape& xs = info(x).shape;
      Index ci = idx;
      for (const auto& k : n.axes) {
        auto& v = ci.at(k);
        for (size_t j = 0; j < v.size(); ++j) v[j] = xs.at(k)[j] - 1 - v[j];
      }
      return at(x, ci);
    }
    case Op::Dot: return dot_element(n, idx);
    case Op::Conv: return conv_element(n, idx);
    case Op::Degenerate: {
      const Node& x = arg(n, 0);
      Index ci;
      for (const auto& [k, v] : info(x).shape) {
        auto it = idx.find(k);
        ci[k] = it != idx.end() ? it->second : std::vector<int64_t>(v.size(), 0);
      }
      return at(x, ci);
    }
  }
  throw EvalError("unknown operator" + at_loc(n.loc));
}

Point Evaluator::literal_element(const Node& n) {
  const DType t = dtype(n);
  const Literal& l = n.lit;
  if (is_machine(t) && l.kind != Literal::Kind::Bool) {
    auto bits = mach::literal_bits(t, l);
    if (!bits) throw EvalError(std::string("a literal with no value in ") + to_string(t) + " (dtype_problem)" + at_loc(n.loc));
    return value(Value::machine(t, *bits));
  }
  switch (l.kind) {
    case Literal::Kind::NaN: throw EvalError("nan outside a float type (dtype_problem)" + at_loc(n.loc));
    case Literal::Kind::Int: return value(convert(Value::integer(l.num), t, n.loc));
    case Literal::Kind::Real: return value(convert(Value::real(Rational(l.num, l.den)), t, n.loc));
    case Literal::Kind::Bool: return value(Value::boolean(l.num != 0));
    case Literal::Kind::PosInf: return value(Value::pos_inf());
    case Literal::Kind::NegInf: return value(Value::neg_inf());
  }
  throw EvalError("unknown literal" + at_loc(n.loc));
}

Point Evaluator::reduce_element(const Node& n, const Index& idx) {
  const DType t = dtype(n);
  const Node& x = arg(n, 0);
  const Shape& xs = info(x).shape;
  Shape range;
  for (const auto& [k, si] : n.sum_index) {
    (void)si;
    range[k] = xs.at(k);
  }
  // sum starts from 0 (an empty sum is 0); reduce_max/min/prod fold their init value with every
  // element, so an empty range gives init (ir.h, Reducer). The init value is always accessed.
  Value acc = Value::zero(t);
  if (n.reducer != Reducer::Sum) {
    Point init = at(arg(n, 1), {});
    if (!init.defined) return init;
    acc = *init.value;
  }
  std::optional<Point> fail;
  for_each_index(range, [&](const Index& s) {
    Index full = idx;
    for (const auto& [k, v] : s) full[k] = v;
    Point p = at(x, full);
    if (!p.defined) {
      fail = p;
      return false;
    }
    switch (n.reducer) {
      case Reducer::Sum: acc = vops::add(acc, *p.value); break;
      case Reducer::Max: acc = vops::max(acc, *p.value); break;
      case Reducer::Min: acc = vops::min(acc, *p.value); break;
      case Reducer::Prod: acc = vops::mul(acc, *p.value); break;
    }
    return true;
  });
  if (fail) return *fail;
  return value(convert(acc, t, n.loc));
}

Point Evaluator::pad_element(const Node& n, const Index& idx) {
  const DType t = dtype(n);
  const Node& x = arg(n, 0);
  Point v = at(arg(n, 1), {});
  std::map<AxisKey, std::vector<int64_t>> lo, in;
  for (const auto& [k, size] : info(x).shape) {
    lo[k] = attr(n, "low", k, std::vector<int64_t>(size.size(), 0));
    in[k] = attr(n, "interior", k, std::vector<int64_t>(size.size(), 0));
  }
  // The pad value is only accessed in the padded area; an undefined value propagates there.
  const Shape& xs = info(x).shape;
  bool padded = false;
  for (const auto& [k, size] : xs)
    for (size_t j = 0; j < size.size() && !padded; ++j) {
      int64_t rel = checked_sub(idx.at(k)[j], lo[k][j]);
      int64_t inner_end = size[j] + std::max<int64_t>(0, size[j] - 1) * in[k][j];
      padded = rel < 0 || rel >= inner_end || floor_mod(rel, in[k][j] + 1) != 0;
    }
  if (padded && !v.defined) return v;
  return padded_access(x, idx, lo, in, padded ? *v.value : Value::zero(t), t);
}

Point Evaluator::dynupdate_element(const Node& n, const Index& idx) {
  const Node &x = arg(n, 0), &u = arg(n, 1);
  const Shape& us = info(u).shape;
  Index ui;
  bool inside = true;
  for (const auto& [k, v] : idx) {
    auto st = attr(n, "start", k, {});
    auto& o = ui[k];
    for (size_t j = 0; j < v.size(); ++j) {
      int64_t rel = v[j] - st[j];
      if (rel < 0 || rel >= us.at(k)[j]) inside = false;
      o.push_back(rel);
    }
  }
  return inside ? at(u, ui) : at(x, idx);
}

Point Evaluator::concat_element(const Node& n, const Index& idx) {
  const AxisKey& ck = n.axes[0];
  int64_t i = idx.at(ck)[0];
  for (size_t a = 0; a < n.args.size(); ++a) {
    const Node& x = arg(n, a);
    int64_t sz = info(x).shape.at(ck)[0];
    if (i < sz || a + 1 == n.args.size()) {
      Index ci = idx;
      ci[ck][0] = i;
      return at(x, ci);
    }
    i -= sz;
  }
  throw EvalError("concat without operands" + at_loc(n.loc));
}

Point Evaluator::dot_element(const Node& n, const Index& idx) {
  const DType t = dtype(n);
  const Node &x = arg(n, 0), &y = arg(n, 1);
  const Shape &xs = info(x).shape, &ys = info(y).shape;
  Shape range;
  for (const auto& [k, si] : n.sum_index) {
    (void)si;
    range[k] = xs.at(k);
  }
  Value acc = Value::zero(t);
  std::optional<Point> fail;
  for_each_index(range, [&](const Index& c) {
    Index xi, yi;
    for (const auto& [k, v] : xs) xi[k] = c.count(k) ? c.at(k) : idx.at(k);
    for (const auto& [k, v] : ys) yi[k] = c.count(k) ? c.at(k) : idx.at(k);
    Point p = at(x, xi), q = at(y, yi);
    if (!p.defined || !q.defined) {
      fail = p.defined ? q : p;
      return false;
    }
    acc = vops::add(acc, vops::mul(*p.value, *q.value));
    return true;
  });
  if (fail) return *fail;
  return value(convert(acc, t, n.loc));
}

Point Evaluator::conv_element(const Node& n, const Index& idx) {
  const DType t = dtype(n);
  // out[b, o, s] = sum over f and window k of padIN[b, f, s*stride + k] * padW[f, o, k] (ir.h).
  const ConvAttrs& c = *n.conv;
  const Node &in = arg(n, 0), &w = arg(n, 1);
  const Shape &ins = info(in).shape, &ws = info(w).shape;
  Shape range;  // feature axes and the dilated window
  std::map<AxisKey, std::vector<int64_t>> st, lo, ld, rd;
  for (const auto& k : c.feature) range[k] = ins.at(k);
  for (const auto& k : c.spatial) {
    std::vector<int64_t> one(ins.at(k).size(), 1), zero(ins.at(k).size(), 0);
    st[k] = attr(n, "stride", k, one);
    lo[k] = attr(n, "low", k, zero);
    ld[k] = attr(n, "lhs_dilation", k, one);
    rd[k] = attr(n, "rhs_dilation", k, one);
    auto& r = range[k];
    for (size_t j = 0; j < one.size(); ++j) {
      int64_t sw = ws.at(k)[j];
      r.push_back(sw + std::max<int64_t>(0, sw - 1) * (rd[k][j] - 1));
    }
  }
  Value acc = Value::zero(t), zero = Value::zero(t);
  std::optional<Point> fail;
  for_each_index(range, [&](const Index& r) {
    Index ii, wi;
    bool in_pad = false, w_pad = false;
    for (const auto& k : c.batch) ii[k] = idx.at(k);
    for (const auto& k : c.output_feature) wi[k] = idx.at(k);
    for (const auto& k : c.feature) ii[k] = wi[k] = r.at(k);
    for (const auto& k : c.spatial) {
      auto &iv = ii[k], &wv = wi[k];
      for (size_t j = 0; j < r.at(k).size(); ++j) {
        int64_t kk = r.at(k)[j];
        int64_t p = checked_sub(checked_add(checked_mul(idx.at(k)[j], st[k][j]), kk), lo[k][j]);
        int64_t sz = ins.at(k)[j];
        if (p < 0 || p >= sz + std::max<int64_t>(0, sz - 1) * (ld[k][j] - 1) || p % ld[k][j] != 0) in_pad = true;
        iv.push_back(p / std::max<int64_t>(1, ld[k][j]));
        if (kk % rd[k][j] != 0) w_pad = true;
        wv.push_back(kk / rd[k][j]);
      }
    }
    Point a{true, zero, {}}, b{true, zero, {}};
    if (!in_pad) a = at(in, ii);
    if (!w_pad) b = at(w, wi);
    if (!a.defined || !b.defined) {
      fail = a.defined ? b : a;
      return false;
    }
    acc = vops::add(acc, vops::mul(*a.value, *b.value));
    return true;
  });
  if (fail) return *fail;
  return value(convert(acc, t, n.loc));
}

// ---- public API -------------------------------------------------------------------------------

Point Evaluated::at(const Index& idx) const { return ev->at(*node, idx); }

std::vector<Index> Evaluated::indices() const {
  std::vector<Index> r;
  if (!defined) return r;
  for_each_index(shape, [&](const Index& i) {
    r.push_back(i);
    return true;
  });
  return r;
}

Evaluated eval(const Rule& rule, const NodeP& node, const Instance& inst) {
  if (!node) throw EvalError("no expression to evaluate");
  Evaluated e;
  e.ev = std::make_shared<Evaluator>(rule, inst);
  e.node = node;
  const auto& inf = e.ev->info(*node);
  e.defined = inf.defined;
  e.why = inf.why;
  e.shape = inf.shape;
  return e;
}

void check_instance_complete(const Rule& rule, const Instance& inst) {
  for (size_t r = 0; r < rule.rclasses.size(); ++r)
    if (!inst.rank.count(static_cast<int>(r))) throw EvalError("instance has no rank for rclass " + rule.rclasses[r].name);
  for (size_t m = 0; m < rule.maps.size(); ++m) {
    auto it = inst.maps.find(static_cast<int>(m));
    if (it == inst.maps.end()) throw EvalError("instance has no value for map " + rule.maps[m].name);
    int rc = rule.maps[m].rclass;
    if (inst.rank.count(rc) && static_cast<int>(it->second.size()) != inst.rank.at(rc))
      throw EvalError("map " + rule.maps[m].name + " has " + std::to_string(it->second.size()) +
                      " values, its rclass has " + std::to_string(inst.rank.at(rc)) + " axes");
  }
  for (size_t s = 0; s < rule.scalars.size(); ++s)
    if (!inst.scalars.count(static_cast<int>(s))) throw EvalError("instance has no value for scalar " + rule.scalars[s].name);
}

bool preconditions_hold(const Rule& rule, const Instance& inst) {
  for (const auto& p : rule.pre) {
    if (!p.cond) continue;
    if (!as_bool(eval_iexpr(*p.cond, inst), p.loc)) return false;
  }
  for (const auto& a : rule.assume) {
    Evaluated e = eval(rule, a.cond, inst);
    if (!e.defined) continue;  // an undefined assumption constrains nothing (reference §2.3)
    bool ok = for_each_index(e.shape, [&](const Index& i) {
      Point p = e.at(i);
      return !p.defined || as_bool(*p.value, a.loc);
    });
    if (!ok) return false;
  }
  return true;
}

namespace {
bool same_shape(const Shape& a, const Shape& b) { return a == b; }
std::string shape_str(const Shape& s, const Rule& rule) {
  std::string r = "{";
  bool first = true;
  for (const auto& [k, v] : s) {
    r += (first ? "" : ", ") + key_str(k, rule) + ": " + vec_str(v);
    first = false;
  }
  return r + "}";
}
}  // namespace

SideCheck check_at(const Rule& rule, const Instance& inst, const Index& idx) {
  SideCheck c;
  Evaluated l = eval(rule, rule.lhs, inst);
  if (!l.defined) {  // nothing is required where the left side is invalid
    c.lhs = Point{false, std::nullopt, l.why};
    return c;
  }
  c.lhs_valid = true;
  Evaluated r = eval(rule, rule.rhs, inst);
  if (!r.defined) {
    c.holds = false;
    c.tensor_level = true;
    c.reason = "right side invalid where the left side is valid: " + r.why;
    c.rhs = Point{false, std::nullopt, r.why};
  } else if (!same_shape(l.shape, r.shape)) {
    c.holds = false;
    c.tensor_level = true;
    c.reason = "shapes differ: left " + shape_str(l.shape, rule) + ", right " + shape_str(r.shape, rule);
  }
  bool in_range = true;
  for (const auto& [k, v] : l.shape) {
    auto it = idx.find(k);
    if (it == idx.end() || it->second.size() != v.size()) {
      in_range = false;
      break;
    }
    for (size_t j = 0; j < v.size(); ++j) in_range = in_range && it->second[j] >= 0 && it->second[j] < v[j];
  }
  c.lhs = in_range ? l.at(idx) : Point{false, std::nullopt, "index outside the left side's shape"};
  if (c.tensor_level || !c.lhs.defined) return c;  // no element is required outside the left side
  c.inexact = c.lhs.value->inexact;
  c.rhs = r.at(idx);
  if (!c.rhs.defined) {
    c.holds = false;
    c.reason = "right side undefined: " + c.rhs.why;
    return c;
  }
  c.inexact = c.inexact || c.rhs.value->inexact;
  if (!values_equal(*c.lhs.value, *c.rhs.value)) {
    c.holds = false;
    c.reason = "values differ: left " + c.lhs.value->str() + ", right " + c.rhs.value->str();
  }
  return c;
}

InstanceCheck check_instance(const Rule& rule, const Instance& inst) {
  InstanceCheck r;
  r.pre = preconditions_hold(rule, inst);
  if (!r.pre) return r;
  Evaluated l = eval(rule, rule.lhs, inst);
  r.lhs_defined = l.defined;
  if (!l.defined) return r;
  SideCheck t = check_at(rule, inst, Index{});  // the tensor level (validity and shape)
  if (t.tensor_level) {
    r.holds = false;
    r.failing = Index{};
    r.at = std::move(t);
    return r;
  }
  for_each_index(l.shape, [&](const Index& i) {
    SideCheck c = check_at(rule, inst, i);
    if (c.holds) return true;
    r.holds = false;
    r.failing = i;
    r.at = std::move(c);
    return false;
  });
  return r;
}

std::string to_string(const Index& idx, const Rule& rule) {
  std::string r = "{";
  bool first = true;
  for (const auto& [k, v] : idx) {
    r += (first ? "" : ", ") + key_str(k, rule) + ": " + vec_str(v);
    first = false;
  }
  return r + "}";
}

std::string describe(const Rule& rule, const Instance& inst) {
  std::ostringstream o;
  o << "dtype " << to_string(inst.dtype) << "\n";
  for (const auto& [rc, n] : inst.rank)
    o << "rank " << (rc < static_cast<int>(rule.rclasses.size()) ? rule.rclasses[rc].name : "#" + std::to_string(rc))
      << " = " << n << "\n";
  for (const auto& [m, v] : inst.maps)
    o << "map " << (m < static_cast<int>(rule.maps.size()) ? rule.maps[m].name : "#" + std::to_string(m)) << " = "
      << vec_str(v) << "\n";
  for (const auto& [s, v] : inst.scalars)
    o << "scalar " << (s < static_cast<int>(rule.scalars.size()) ? rule.scalars[s].name : "#" + std::to_string(s))
      << " = " << v.str() << "\n";
  for (const auto& [t, d] : inst.inputs) {
    std::string name = t < static_cast<int>(rule.tensors.size()) ? rule.tensors[t].name : "#" + std::to_string(t);
    for (const auto& [i, v] : d.elems) o << name << to_string(i, rule) << " = " << v.str() << "\n";
  }
  return o.str();
}

}  // namespace tr
