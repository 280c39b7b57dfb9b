// The checker: syntax tree -> checked IR. See check.h for what it guarantees; the comments in
// ir.h say what each IR field means, and this file must produce exactly that.
#include "libtensorright/check/check.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "libtensorright/syntax/syntax.h"

namespace tr {

namespace {

using syntax::EK;
using syntax::Expr;
using syntax::ItemKind;

// ---- index-expression construction with light, exact constant folding ---------------------------
// Folding only rewrites integer identities (x+0, x*1, x div 1, exact literal arithmetic), so that
// filled-in defaults give the plain size and not `(size-0+1-1) div 1`.

IExprP mk_int(mpz_class v, const SourceLoc& loc = {}) {
  auto e = std::make_shared<IExpr>();
  e->kind = IK::Int;
  e->value = std::move(v);
  e->loc = loc;
  return e;
}
IExprP mk_bool(bool v, const SourceLoc& loc = {}) {
  auto e = std::make_shared<IExpr>();
  e->kind = IK::Bool;
  e->value = v ? 1 : 0;
  e->loc = loc;
  return e;
}
IExprP mk_op(IK k, std::vector<IExprP> args, const SourceLoc& loc = {}) {
  auto e = std::make_shared<IExpr>();
  e->kind = k;
  e->args = std::move(args);
  e->loc = loc;
  return e;
}
IExprP mk_quant(IK k, int rclass, IExprP body, const SourceLoc& loc) {
  auto e = std::make_shared<IExpr>();
  e->kind = k;
  e->rclass = rclass;
  e->args = {std::move(body)};
  e->loc = loc;
  return e;
}
bool is_lit(const IExprP& e, int64_t v) { return e->kind == IK::Int && e->value == v; }

// Literal arithmetic is folded exactly while the result has at most kMaxFoldBits bits; a bigger
// result stays an operation (evaluated exactly all the same), so that folding cannot blow up.
constexpr size_t kMaxFoldBits = 1 << 16;
bool foldable(const mpz_class& r) { return mpz_sizeinbase(r.get_mpz_t(), 2) <= kMaxFoldBits; }

IExprP fold_bin(IK k, IExprP a, IExprP b, const SourceLoc& loc = {}) {
  const bool ca = a->kind == IK::Int, cb = b->kind == IK::Int;
  mpz_class r;
  switch (k) {
    case IK::Add:
      if (is_lit(a, 0)) return b;
      if (is_lit(b, 0)) return a;
      if (ca && cb && foldable(r = a->value + b->value)) return mk_int(r, loc);
      break;
    case IK::Sub:
      if (is_lit(b, 0)) return a;
      if (ca && cb && foldable(r = a->value - b->value)) return mk_int(r, loc);
      break;
    case IK::Mul:
      if (is_lit(a, 1)) return b;
      if (is_lit(b, 1)) return a;
      if (is_lit(a, 0) || is_lit(b, 0)) return mk_int(0, loc);
      if (ca && cb && foldable(r = a->value * b->value)) return mk_int(r, loc);
      break;
    case IK::Div:
      if (is_lit(b, 1)) return a;
      break;
    case IK::Max:
      if (ca && cb) return mk_int(std::max(a->value, b->value), loc);
      break;
    default: break;
  }
  return mk_op(k, {std::move(a), std::move(b)}, loc);
}

// ---- element types ---------------------------------------------------------------------------------
EType concrete(DType d) { return EType{false, d}; }
EType tvar() { return EType{true, DType::Int}; }

// A checked tensor expression. `poly` marks a subtree made only of numeric literals (and
// arithmetic/const/broadcast over them) whose element type is still open: it takes the type of
// the tensor it meets, or T at the root.
struct TN {
  NodeP n;
  bool poly = false;
  std::optional<SourceLoc> decimal;  // a decimal literal inside a poly subtree: needs real
};

std::shared_ptr<Node> mk_node(Op op, const SourceLoc& loc) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->loc = loc;
  return n;
}

bool same_keys(const AxisMap& a, const AxisMap& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib)
    if (ia->first != ib->first) return false;
  return true;
}

// Bounds on the checked trees (measure()): the degree of a product, the operands of one concat,
// and the operands of all the rule's nodes together (a let counted once). Verification work grows
// with these (a concat operand costs about a millisecond of solver time, an add a tenth of that).
constexpr int64_t kMaxDegree = 4096;
constexpr size_t kMaxConcat = 1000;
constexpr size_t kMaxOperands = 40000;

constexpr const char* kCommon = "is not an axis of both operands (the common axes";

// ---- the checker of one rule -------------------------------------------------------------------------
class RuleChecker {
 public:
  RuleChecker(const syntax::Rule& sr, const std::string& source, const CheckOptions& opts)
      : sr_(sr), source_(source), opts_(opts) {}

  Rule run() {
    r_.name = sr_.name.name;
    r_.title = sr_.title.value_or("");
    r_.loc = sr_.loc;
    dtypes();
    declarations();
    for (size_t i = 0; i < sr_.items.size(); ++i) {
      const auto& it = sr_.items[i];
      if (it.kind == ItemKind::Let) prepare_lets({let_index_.at(it.names[0].name)});
      else if (it.expr && it.kind != ItemKind::Tensor && it.kind != ItemKind::Map) prepare_lets(lets_used(*it.expr));
      switch (it.kind) {
        case ItemKind::Let: let_value(let_index_.at(it.names[0].name)); break;
        case ItemKind::Pre: pre(*it.expr, it.loc); break;
        case ItemKind::Assume: assume(it); break;
        case ItemKind::Lhs:
        case ItemKind::Rhs: side(it); break;
        default: break;
      }
    }
    if (!r_.lhs) fail(sr_.name.loc, "rule '" + r_.name + "' has no lhs");
    if (!r_.rhs) fail(sr_.name.loc, "rule '" + r_.name + "' has no rhs");
    if (!same_keys(r_.lhs->shape, r_.rhs->shape))
      fail(rhs_loc_, "sides have different axes: lhs " + keys_str(r_.lhs->shape) + ", rhs " + keys_str(r_.rhs->shape));
    if (!(r_.lhs->etype == r_.rhs->etype) && !unifiable(r_.lhs->etype, r_.rhs->etype))
      fail(rhs_loc_, "sides have different element types: lhs " + ety_str(r_.lhs->etype) + ", rhs " + ety_str(r_.rhs->etype));
    summation_indices();
    for (const auto& it : sr_.items) {
      if (it.kind == ItemKind::Match) match(it);
      if (it.kind == ItemKind::Expect) expect(it);
    }
    return std::move(r_);
  }

 private:
  enum class NK { RClass, Map, Tensor, Scalar, Let };
  struct NameInfo {
    NK kind;
    int id;
    SourceLoc loc;
  };

  [[noreturn]] void fail(const SourceLoc& loc, const std::string& msg) const {
    throw Error(msg, loc, render_diagnostic(loc, msg, source_));
  }

  // ---- names ----
  static const char* kind_name(NK k) {
    switch (k) {
      case NK::RClass: return "rclass";
      case NK::Map: return "map";
      case NK::Tensor: return "tensor";
      case NK::Scalar: return "scalar";
      case NK::Let: return "let";
    }
    return "?";
  }
  void declare(const syntax::Ident& id, NK kind, int index) {
    auto [it, fresh] = names_.emplace(id.name, NameInfo{kind, index, id.loc});
    if (!fresh)
      fail(id.loc, "'" + id.name + "' is already declared (as " + kind_name(it->second.kind) + " at " +
                       std::to_string(it->second.loc.line) + ":" + std::to_string(it->second.loc.col) + ")");
  }
  const NameInfo& lookup(const std::string& name, const SourceLoc& loc) const {
    auto it = names_.find(name);
    if (it == names_.end()) fail(loc, "undeclared name '" + name + "'");
    return it->second;
  }
  int rclass_of(const std::string& name, const SourceLoc& loc) const {
    const NameInfo& ni = lookup(name, loc);
    if (ni.kind != NK::RClass) fail(loc, "'" + name + "' is a " + kind_name(ni.kind) + ", not an rclass");
    return ni.id;
  }
  AxisKey key(const syntax::KeyRef& k) const { return AxisKey{rclass_of(k.rclass, k.loc), k.label}; }
  std::string key_str(const AxisKey& k) const {
    return r_.rclasses[static_cast<size_t>(k.rclass)].name + (k.label.empty() ? "" : "@" + k.label);
  }
  std::string keys_str(const AxisMap& m) const {
    std::string s = "{";
    for (const auto& [k, v] : m) s += (s.size() > 1 ? ", " : "") + key_str(k);
    return s + "}";
  }

  // ---- dtypes ----
  void dtypes() {
    std::set<DType> seen;
    auto add = [&](DType d, const syntax::Ident& id) {
      if (!seen.insert(d).second) fail(id.loc, "dtype '" + id.name + "' listed twice");
      r_.dtypes.push_back(d);
    };
    for (const auto& id : sr_.dtypes) {
      if (id.name == "any" || id.name == "num") {
        if (sr_.dtypes.size() != 1) fail(id.loc, "'" + id.name + "' cannot be combined with other dtypes");
        if (id.name == "any") add(DType::Bool, id);
        add(DType::Int, id);
        add(DType::Real, id);
      } else if (id.name == "bool") {
        add(DType::Bool, id);
      } else if (id.name == "int") {
        add(DType::Int, id);
      } else if (id.name == "real") {
        add(DType::Real, id);
      } else if (id.name == "ints") {
        for (DType d : {DType::S8, DType::S16, DType::S32, DType::S64, DType::U8, DType::U16, DType::U32, DType::U64})
          add(d, id);
      } else if (id.name == "floats") {
        for (DType d : {DType::F16, DType::BF16, DType::F32, DType::F64}) add(d, id);
      } else if (auto d = dtype_from_string(id.name)) {
        add(*d, id);
      } else {
        fail(id.loc, "unknown dtype '" + id.name +
                         "' (expected any, num, bool, int, real, pred, s8, s16, s32, s64, u8, u16, u32, u64, "
                         "f16, bf16, f32, f64, ints or floats)");
      }
    }
    std::sort(r_.dtypes.begin(), r_.dtypes.end());
    if (opts_.machine) machine_dtypes(*opts_.machine);
  }
  // CheckOptions::machine: int -> the list's integer types, real -> its float types, bool stays.
  void machine_dtypes(const std::vector<DType>& list) {
    std::vector<DType> out;
    for (DType d : r_.dtypes)
      for (DType m : d == DType::Bool ? std::vector<DType>{DType::Bool} : list)
        if ((d == DType::Int && is_fixed(m)) || (d == DType::Real && is_float(m)) || d == m) out.push_back(m);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    if (out.empty()) fail(sr_.loc, "no type of --dtypes replaces the rule's dtypes (" + dtypes_str() + ")");
    // A rule written for int means its integers: with only integer types left, `iota` and the
    // declared type `int` are T.
    int_is_t_ = std::all_of(out.begin(), out.end(), [](DType d) { return is_fixed(d); });
    r_.dtypes = out;
  }
  EType int_type() const { return int_is_t_ ? tvar() : concrete(DType::Int); }
  bool t_has(DType d) const { return std::find(r_.dtypes.begin(), r_.dtypes.end(), d) != r_.dtypes.end(); }
  bool t_only(DType d) const { return r_.dtypes.size() == 1 && r_.dtypes[0] == d; }
  std::string dtypes_str() const {
    std::string s;
    for (DType d : r_.dtypes) s += (s.empty() ? "" : ", ") + std::string(to_string(d));
    return s;
  }
  static std::string ety_str(const EType& e) { return e.is_t ? "T" : to_string(e.dtype); }
  EType etype_word(const syntax::Ident& id, bool int_follows_t = true) const {
    if (id.name == "T") return tvar();
    if (id.name == "int") return int_follows_t ? int_type() : concrete(DType::Int);
    if (auto d = dtype_from_string(id.name)) return concrete(*d);
    fail(id.loc, "unknown element type '" + id.name + "' (expected bool, int, real, T or a machine type: pred, s8..s64, "
                 "u8..u64, f16, bf16, f32, f64)");
  }
  bool is_numeric(const EType& e) const { return e.is_t ? !t_has(DType::Bool) : e.dtype != DType::Bool; }
  bool is_bool(const EType& e) const { return e.is_t ? t_only(DType::Bool) : e.dtype == DType::Bool; }
  // Real or a float type: where decimal literals and `exp` make sense.
  static bool fractional(DType d) { return d == DType::Real || is_float(d); }
  bool is_fractional(const EType& e) const {
    if (!e.is_t) return fractional(e.dtype);
    return std::all_of(r_.dtypes.begin(), r_.dtypes.end(), fractional);
  }
  // T and a concrete type agree only when the rule is checked for that one dtype.
  bool unifiable(const EType& a, const EType& b) const {
    if (a == b) return true;
    if (a.is_t && !b.is_t) return t_only(b.dtype);
    if (b.is_t && !a.is_t) return t_only(a.dtype);
    return false;
  }
  EType unify(const EType& a, const EType& b, const SourceLoc& loc, const std::string& what) const {
    if (unifiable(a, b)) return a;
    std::string msg = what + ": element types " + ety_str(a) + " and " + ety_str(b) + " differ";
    if (a.is_t || b.is_t) msg += " (T stands for each of " + dtypes_str() + ")";
    fail(loc, msg);
  }
  void need_numeric(const EType& e, const SourceLoc& loc, const std::string& what) const {
    if (is_numeric(e)) return;
    if (e.is_t) fail(loc, what + " needs a numeric element type, but T is also bool in this rule");
    fail(loc, what + " needs a numeric element type, got bool");
  }
  void need_bool(const EType& e, const SourceLoc& loc, const std::string& what) const {
    if (is_bool(e)) return;
    fail(loc, what + " needs a bool element type, got " + ety_str(e) + (e.is_t ? " (T stands for " + dtypes_str() + ")" : ""));
  }

  // ---- declarations ----
  void declarations() {
    // Names first, so that declarations may appear in any order.
    for (size_t i = 0; i < sr_.items.size(); ++i) {
      const auto& it = sr_.items[i];
      switch (it.kind) {
        case ItemKind::RClass:
          for (const auto& n : it.names) {
            declare(n, NK::RClass, static_cast<int>(r_.rclasses.size()));
            r_.rclasses.push_back(RClassDecl{n.name, it.single, n.loc});
          }
          break;
        case ItemKind::Map:
          for (const auto& n : it.names) {
            declare(n, NK::Map, static_cast<int>(r_.maps.size()));
            MapDecl md;
            md.name = n.name;
            md.nonneg = it.nonneg;
            md.loc = n.loc;
            r_.maps.push_back(md);
            map_items_.push_back(&it);
          }
          break;
        case ItemKind::Tensor:
          for (const auto& n : it.names) {
            declare(n, NK::Tensor, static_cast<int>(r_.tensors.size()));
            TensorDecl td;
            td.name = n.name;
            td.loc = n.loc;
            r_.tensors.push_back(td);
            tensor_items_.push_back(&it);
          }
          break;
        case ItemKind::Scalar:
          for (const auto& n : it.names) {
            declare(n, NK::Scalar, static_cast<int>(r_.scalars.size()));
            // A declared `int` scalar stays a mathematical integer (it may size or index).
            r_.scalars.push_back(ScalarDecl{n.name, it.etype ? etype_word(*it.etype, false) : tvar(), n.loc});
          }
          break;
        case ItemKind::Let:
          declare(it.names[0], NK::Let, static_cast<int>(lets_.size()));
          let_index_[it.names[0].name] = static_cast<int>(lets_.size());
          lets_.push_back(&it);
          break;
        default: break;
      }
    }
    map_use_.assign(r_.maps.size(), std::nullopt);
    for (size_t m = 0; m < r_.maps.size(); ++m) {
      const auto& it = *map_items_[m];
      r_.maps[m].rclass = rclass_of(it.rclass.name, it.rclass.loc);
    }
    // Declaration facts become preconditions, in declaration order.
    for (size_t m = 0; m < r_.maps.size(); ++m) {
      const auto& it = *map_items_[m];
      MapDecl& md = r_.maps[m];
      IExprP self = map_ref(static_cast<int>(m), md.loc);
      if (md.nonneg)
        r_.pre.push_back(Precondition{mk_quant(IK::All, md.rclass, mk_op(IK::Ge, {self, mk_int(0, md.loc)}, md.loc), md.loc), md.loc});
      if (it.expr) {
        IExprP v = idx_int(*it.expr, md.rclass, "a derived map");
        md.derived = v;
        r_.pre.push_back(Precondition{mk_quant(IK::All, md.rclass, mk_op(IK::Eq, {self, v}, md.loc), md.loc), md.loc});
      }
    }
    for (size_t t = 0; t < r_.tensors.size(); ++t) {
      const auto& it = *tensor_items_[t];
      TensorDecl& td = r_.tensors[t];
      td.etype = it.etype ? etype_word(*it.etype) : tvar();
      td.shape = shape_literal(*it.expr, "tensor shape");
    }
    let_state_.assign(lets_.size(), 0);
    let_val_.resize(lets_.size());
  }

  IExprP map_ref(int id, const SourceLoc& loc) const {
    auto e = std::make_shared<IExpr>();
    e->kind = IK::Map;
    e->id = id;
    e->loc = loc;
    return e;
  }

  // ---- index expressions (sizes, attributes, conditions) ----
  // `rc` >= 0: a per-axis context of that rclass (maps must be on it; the result is Int).
  // `rc` == -1: a precondition; every rclass mentioned is added to `seen`.
  enum class IT { Int, Bool };
  struct IdxCtx {
    int rc = -1;
    std::set<int>* seen = nullptr;
    const char* what = "";
  };

  IExprP idx_int(const Expr& e, int rc, const char* what) {
    IdxCtx c{rc, nullptr, what};
    IT t;
    IExprP v = idx(e, c, t);
    if (t != IT::Int) fail(e.loc, std::string(what) + " must be an integer expression");
    return v;
  }

  IExprP idx(const Expr& e, IdxCtx& c, IT& t) {
    switch (e.kind) {
      case EK::Int:
        t = IT::Int;
        return mk_int(e.ival, e.loc);
      case EK::Decimal: fail(e.loc, "decimal literals are not allowed in " + std::string(c.what));
      case EK::Braces: fail(e.loc, "a brace literal is not allowed in " + std::string(c.what));
      case EK::Name: {
        if (e.text == "true" || e.text == "false") {
          t = IT::Bool;
          return mk_bool(e.text == "true", e.loc);
        }
        if (e.text == "inf") fail(e.loc, "'inf' is not allowed in " + std::string(c.what));
        if (!e.label.empty()) fail(e.loc, "a labelled axis is not allowed in " + std::string(c.what));
        const NameInfo& ni = lookup(e.text, e.loc);
        if (ni.kind == NK::Map) {
          const MapDecl& md = r_.maps[static_cast<size_t>(ni.id)];
          if (c.rc >= 0 && md.rclass != c.rc)
            fail(e.loc, "map '" + e.text + "' is on rclass " + r_.rclasses[static_cast<size_t>(md.rclass)].name +
                            ", but " + c.what + " is on rclass " + r_.rclasses[static_cast<size_t>(c.rc)].name);
          if (c.seen) c.seen->insert(md.rclass);
          if (!map_use_[static_cast<size_t>(ni.id)]) map_use_[static_cast<size_t>(ni.id)] = e.loc;
          t = IT::Int;
          return map_ref(ni.id, e.loc);
        }
        if (ni.kind == NK::Scalar) {
          const ScalarDecl& sd = r_.scalars[static_cast<size_t>(ni.id)];
          if (is_bool(sd.etype)) {
            t = IT::Bool;
          } else if (!is_numeric(sd.etype)) {
            fail(e.loc, "scalar '" + e.text + "' has type T, which is both bool and numeric in this rule; it cannot be used in " + c.what);
          } else {
            // Sizes and attributes are integers: only int scalars fit there.
            if (c.rc >= 0 && !(sd.etype.is_t ? t_only(DType::Int) : sd.etype.dtype == DType::Int))
              fail(e.loc, "scalar '" + e.text + "' has type " + ety_str(sd.etype) + ", but " + c.what + " needs int");
            t = IT::Int;
          }
          auto x = std::make_shared<IExpr>();
          x->kind = IK::Scalar;
          x->id = ni.id;
          x->loc = e.loc;
          return x;
        }
        if (ni.kind == NK::Tensor || ni.kind == NK::Let)
          fail(e.loc, std::string(kind_name(ni.kind)) + " '" + e.text + "' is a tensor and cannot be used in " + c.what +
                          (c.rc < 0 ? " (tensor values go in 'assume')" : ""));
        fail(e.loc, "rclass '" + e.text + "' cannot be used in " + std::string(c.what));
      }
      case EK::Unary: {
        IT a;
        IExprP x = idx(*e.args[0], c, a);
        if (e.text == "-") {
          if (a != IT::Int) fail(e.loc, "'-' needs an integer operand");
          t = IT::Int;
          if (x->kind == IK::Int) return mk_int(-x->value, e.loc);
          return mk_op(IK::Neg, {x}, e.loc);
        }
        if (a != IT::Bool) fail(e.loc, "'!' needs a condition operand");
        t = IT::Bool;
        return mk_op(IK::Not, {x}, e.loc);
      }
      case EK::Binary: {
        const std::string& o = e.text;
        if (o == "/" || o == "%")
          fail(e.loc, "'" + o + "' is for tensors; in " + c.what + " use '" + (o == "/" ? "div" : "mod") + "'");
        IT a, b;
        IExprP x = idx(*e.args[0], c, a);
        IExprP y = idx(*e.args[1], c, b);
        static const std::unordered_map<std::string, IK> arith = {
            {"+", IK::Add}, {"-", IK::Sub}, {"*", IK::Mul}, {"div", IK::Div}, {"mod", IK::Mod}};
        static const std::unordered_map<std::string, IK> cmp = {{"==", IK::Eq}, {"!=", IK::Ne}, {"<", IK::Lt},
                                                                {"<=", IK::Le}, {">", IK::Gt}, {">=", IK::Ge}};
        if (auto f = arith.find(o); f != arith.end()) {
          if (a != IT::Int || b != IT::Int) fail(e.loc, "'" + o + "' needs integer operands");
          t = IT::Int;
          return mk_op(f->second, {x, y}, e.loc);
        }
        if (auto f = cmp.find(o); f != cmp.end()) {
          if (a != b) fail(e.loc, "'" + o + "' compares an integer with a condition");
          if (a == IT::Bool && o != "==" && o != "!=") fail(e.loc, "'" + o + "' needs integer operands");
          t = IT::Bool;
          return mk_op(f->second, {x, y}, e.loc);
        }
        if (a != IT::Bool || b != IT::Bool) fail(e.loc, "'" + o + "' needs condition operands");
        t = IT::Bool;
        return mk_op(o == "&&" ? IK::And : IK::Or, {x, y}, e.loc);
      }
      case EK::Call: {
        const std::string& f = e.text;
        if (!e.named.empty()) fail(e.named[0].loc, "'" + f + "' takes no attributes here");
        auto nargs = [&](size_t n) {
          if (e.args.size() != n)
            fail(e.loc, "'" + f + "' takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s") + ", got " +
                            std::to_string(e.args.size()));
        };
        if (f == "all" || f == "any") {
          if (c.rc >= 0) fail(e.loc, "'" + f + "(...)' is only allowed in preconditions");
          fail(e.loc, "'" + f + "(...)' may only be combined with &&, || and ! (it cannot be nested or compared)");
        }
        if (f == "abs") {
          nargs(1);
          IT a;
          IExprP x = idx(*e.args[0], c, a);
          if (a != IT::Int) fail(e.loc, "'abs' needs an integer operand");
          t = IT::Int;
          return mk_op(IK::Abs, {x}, e.loc);
        }
        if (f == "min" || f == "max") {
          nargs(2);
          IT a, b;
          IExprP x = idx(*e.args[0], c, a);
          IExprP y = idx(*e.args[1], c, b);
          if (a != IT::Int || b != IT::Int) fail(e.loc, "'" + f + "' needs integer operands");
          t = IT::Int;
          return mk_op(f == "min" ? IK::Min : IK::Max, {x, y}, e.loc);
        }
        if (f == "ite") {
          nargs(3);
          IT a, b, d;
          IExprP x = idx(*e.args[0], c, a);
          IExprP y = idx(*e.args[1], c, b);
          IExprP z = idx(*e.args[2], c, d);
          if (a != IT::Bool) fail(e.args[0]->loc, "the first argument of 'ite' must be a condition");
          if (b != d) fail(e.loc, "the branches of 'ite' have different types");
          t = b;
          return mk_op(IK::Ite, {x, y, z}, e.loc);
        }
        fail(e.loc, "'" + f + "' cannot be used in " + std::string(c.what));
      }
    }
    fail(e.loc, "unexpected expression");
  }

  static bool mentions_quantifier(const Expr& e) {
    if (e.kind == EK::Call && (e.text == "all" || e.text == "any")) return true;
    for (const auto& a : e.args)
      if (mentions_quantifier(*a)) return true;
    return false;
  }

  std::string rclass_list(const std::set<int>& s) const {
    std::string out;
    for (int r : s) out += (out.empty() ? "" : " and ") + r_.rclasses[static_cast<size_t>(r)].name;
    return out;
  }

  // A precondition: every map reference ends up under exactly one All/Any (see ir.h).
  IExprP pre_cond(const Expr& e) {
    if (!mentions_quantifier(e)) {
      std::set<int> seen;
      IdxCtx c{-1, &seen, "a precondition"};
      IT t;
      IExprP body = idx(e, c, t);
      if (t != IT::Bool) fail(e.loc, "a precondition must be a condition, not an integer");
      if (seen.empty()) return body;
      if (seen.size() == 1) return mk_quant(IK::All, *seen.begin(), body, e.loc);
      // Per-axis conjunctions over different rclasses split exactly.
      if (e.kind == EK::Binary && e.text == "&&")
        return mk_op(IK::And, {pre_cond(*e.args[0]), pre_cond(*e.args[1])}, e.loc);
      fail(e.loc, "condition mentions maps of rclasses " + rclass_list(seen) +
                      "; say how it ranges over their axes with all(...) or any(...)");
    }
    if (e.kind == EK::Call && (e.text == "all" || e.text == "any")) {
      if (e.args.size() != 1 || !e.named.empty()) fail(e.loc, "'" + e.text + "' takes one condition");
      std::set<int> seen;
      IdxCtx c{-1, &seen, "a precondition"};
      IT t;
      IExprP body = idx(*e.args[0], c, t);
      if (t != IT::Bool) fail(e.args[0]->loc, "'" + e.text + "' needs a condition");
      // Ranks are >= 1, so a quantifier over no map is just its body.
      if (seen.empty()) return body;
      if (seen.size() > 1)
        fail(e.loc, "'" + e.text + "(...)' mentions maps of rclasses " + rclass_list(seen) +
                        "; quantify each rclass separately");
      return mk_quant(e.text == "all" ? IK::All : IK::Any, *seen.begin(), body, e.loc);
    }
    if (e.kind == EK::Binary && (e.text == "&&" || e.text == "||"))
      return mk_op(e.text == "&&" ? IK::And : IK::Or, {pre_cond(*e.args[0]), pre_cond(*e.args[1])}, e.loc);
    if (e.kind == EK::Unary && e.text == "!") return mk_op(IK::Not, {pre_cond(*e.args[0])}, e.loc);
    fail(e.loc, "all(...) and any(...) may only be combined with &&, || and !");
  }

  void pre(const Expr& e, const SourceLoc& loc) { r_.pre.push_back(Precondition{pre_cond(e), loc}); }

  // ---- brace literals ----
  const Expr& need_braces(const Expr& e, const std::string& what) const {
    if (e.kind != EK::Braces) fail(e.loc, what + " must be a brace literal {...}");
    return e;
  }

  // `{R: size, R: size2 @b}`: the sizes of a new shape.
  AxisMap shape_literal(const Expr& e, const std::string& what) {
    need_braces(e, what);
    AxisMap m;
    std::map<int, const syntax::KeyRef*> copies;
    for (const auto& be : e.entries) {
      if (!be.value) fail(be.key.loc, what + ": axis '" + be.key.str() + "' needs a size ('" + be.key.str() + ": SIZE')");
      AxisKey k = key(be.key);
      if (m.count(k)) {
        if (k.label.empty())
          fail(be.key.loc, what + ": rclass " + be.key.rclass + " appears more than once; give each copy a distinct @label");
        fail(be.key.loc, what + ": axis " + be.key.str() + " appears twice");
      }
      m[k] = idx_int(*be.value, k.rclass, "a size");
    }
    return m;
  }

  // An attribute `{R: e, ...}` on keys of `operand`.
  AxisMap attr_map(const syntax::NamedArg& na, const AxisMap& operand, const std::string& op) {
    const Expr& e = need_braces(*na.value, "attribute '" + na.name + "'");
    AxisMap m;
    for (const auto& be : e.entries) {
      if (!be.value) fail(be.key.loc, "attribute '" + na.name + "' needs a value for axis '" + be.key.str() + "'");
      AxisKey k = key(be.key);
      if (!operand.count(k))
        fail(be.key.loc, op + ": attribute '" + na.name + "' names axis " + be.key.str() +
                             ", which the operand does not have (its axes: " + keys_str(operand) + ")");
      if (m.count(k)) fail(be.key.loc, "attribute '" + na.name + "' gives axis " + be.key.str() + " twice");
      std::string what = "attribute '" + na.name + "' of axis " + be.key.str();
      m[k] = idx_int(*be.value, k.rclass, what.c_str());
    }
    return m;
  }

  // `{R, S@b}`: a set of keys of `operand` (or new keys when operand is null).
  std::vector<AxisKey> key_set(const Expr& e, const AxisMap* operand, const std::string& what,
                               const char* domain = "the operand does not have (its axes") {
    need_braces(e, what);
    std::vector<AxisKey> v;
    for (const auto& be : e.entries) {
      if (be.value || be.to) fail(be.key.loc, what + " lists axes only ('{" + be.key.str() + "}')");
      AxisKey k = key(be.key);
      if (operand && !operand->count(k))
        fail(be.key.loc, what + " names axis " + be.key.str() + ", which " + domain + ": " +
                             keys_str(*operand) + ")");
      if (std::find(v.begin(), v.end(), k) != v.end()) fail(be.key.loc, what + " lists axis " + be.key.str() + " twice");
      v.push_back(k);
    }
    return v;
  }

  // `{R: i}`: summation-index maps of keys of `operand`.
  std::map<AxisKey, int> si_map(const Expr& e, const AxisMap& operand, const std::string& what,
                                const char* domain = "the operand does not have (its axes") {
    need_braces(e, what);
    std::map<AxisKey, int> m;
    for (const auto& be : e.entries) {
      if (!be.value) fail(be.key.loc, what + " needs a summation-index map for axis " + be.key.str() + " ('" + be.key.str() + ": i')");
      AxisKey k = key(be.key);
      if (!operand.count(k))
        fail(be.key.loc, what + " names axis " + be.key.str() + ", which " + domain + ": " +
                             keys_str(operand) + ")");
      if (m.count(k)) fail(be.key.loc, what + " lists axis " + be.key.str() + " twice");
      const Expr& v = *be.value;
      if (v.kind != EK::Name || !v.label.empty())
        fail(v.loc, what + ": the summation index of axis " + be.key.str() + " must be a map name");
      const NameInfo& ni = lookup(v.text, v.loc);
      if (ni.kind != NK::Map) fail(v.loc, "'" + v.text + "' is a " + kind_name(ni.kind) + ", not a map");
      const MapDecl& md = r_.maps[static_cast<size_t>(ni.id)];
      if (md.rclass != k.rclass)
        fail(v.loc, "map '" + v.text + "' is on rclass " + r_.rclasses[static_cast<size_t>(md.rclass)].name + ", but axis " +
                        be.key.str() + " is of rclass " + be.key.rclass);
      if (md.nonneg || map_items_[static_cast<size_t>(ni.id)]->expr)
        fail(v.loc, "summation-index map '" + v.text + "' must be a plain map (not '>= 0' or derived)");
      if (!si_use_.count(ni.id)) si_use_[ni.id] = v.loc;
      m[k] = ni.id;
    }
    return m;
  }

  // The location of key `k` in a brace literal (for errors found after the literal was read).
  SourceLoc entry_loc(const Expr& braces, const AxisKey& k) const {
    for (const auto& be : braces.entries)
      if (key(be.key) == k) return be.key.loc;
    return braces.loc;
  }

  AxisKey key_arg(const Expr& e, const std::string& what) const {
    if (e.kind != EK::Name) fail(e.loc, what + " must name an axis (R or R@label)");
    return key(syntax::KeyRef{e.text, e.label, e.loc});
  }

  // ---- tensor expressions ----
  static bool is_scalar(const TN& t) { return t.n->shape.empty(); }

  // Fixes the element type of a poly subtree: a copy of the DAG (a let used twice stays one node).
  NodeP retype(const NodeP& n, const EType& et) const {
    std::unordered_map<const Node*, NodeP> copy;
    for (const Node* x : post_order(n, [](const Node*) { return false; })) {
      auto c = std::make_shared<Node>(*x);
      c->etype = et;
      for (auto& a : c->args) a = copy.at(a.get());
      copy[x] = c;
    }
    return copy.at(n.get());
  }
  NodeP coerce(const TN& t, const EType& et, const SourceLoc& loc) const {
    if (!t.poly) return t.n;
    (void)loc;
    if (!is_numeric(et)) {
      if (et.is_t) fail(t.n->loc, "a numeric literal is used as T, but T is also bool in this rule");
      fail(t.n->loc, "a numeric literal is used where bool is expected");
    }
    if (t.decimal && !is_fractional(et))
      fail(*t.decimal, "a decimal literal or 'nan' needs element type real or a float type, but here it is " + ety_str(et) +
                           (et.is_t ? " (T stands for " + dtypes_str() + ")" : ""));
    return retype(t.n, et);
  }
  NodeP finalize(const TN& t) const { return coerce(t, tvar(), t.n->loc); }
  TN fixed(NodeP n) const { return TN{std::move(n), false, std::nullopt}; }

  // The common shape of elementwise operands: scalars splat; the others must have equal key sets.
  AxisMap common_shape(const std::vector<const TN*>& ops, const SourceLoc& loc, const std::string& what) const {
    const AxisMap* first = nullptr;
    for (const TN* t : ops) {
      if (is_scalar(*t)) continue;
      if (!first) {
        first = &t->n->shape;
      } else if (!same_keys(*first, t->n->shape)) {
        fail(loc, what + ": operands have different axes: " + keys_str(*first) + " and " + keys_str(t->n->shape));
      }
    }
    return first ? *first : AxisMap{};
  }

  // Combines the element types of operands that must agree (poly ones adopt the others' type).
  // Returns the common type, or nullopt when all are poly.
  std::optional<EType> common_etype(std::vector<TN*> ops, const SourceLoc& loc, const std::string& what) const {
    std::optional<EType> et;
    for (TN* t : ops)
      if (!t->poly) et = et ? unify(*et, t->n->etype, loc, what) : t->n->etype;
    if (et)
      for (TN* t : ops)
        if (t->poly) *t = fixed(coerce(*t, *et, loc));
    return et;
  }

  TN elementwise(Op op, std::vector<TN> ops, const SourceLoc& loc, const std::string& what, bool numeric,
                 bool keeps_poly) {
    std::vector<TN*> ptrs;
    for (auto& t : ops) ptrs.push_back(&t);
    std::optional<EType> et = common_etype(ptrs, loc, what);
    auto n = mk_node(op, loc);
    std::vector<const TN*> cptrs(ptrs.begin(), ptrs.end());
    n->shape = common_shape(cptrs, loc, what);
    TN out;
    if (!et) {
      if (!keeps_poly) {
        for (auto& t : ops) t = fixed(finalize(t));
        et = tvar();
      } else {
        out.poly = true;
        for (auto& t : ops)
          if (t.decimal) out.decimal = t.decimal;
        et = tvar();  // placeholder until the subtree is coerced
      }
    }
    // A poly subtree is numeric by construction; its type is checked when it is coerced.
    if (!out.poly) {
      if (numeric) need_numeric(*et, loc, what);
      else need_bool(*et, loc, what);
    }
    n->etype = *et;
    for (auto& t : ops) n->args.push_back(t.n);
    out.n = n;
    return out;
  }

  TN literal(Literal lit, const SourceLoc& loc, bool poly) const {
    auto n = mk_node(Op::Literal, loc);
    n->lit = lit;
    n->etype = lit.kind == Literal::Kind::Bool ? concrete(DType::Bool) : tvar();
    return TN{n, poly, std::nullopt};
  }

  // A decimal literal (digits '.' digits, at most syntax::kMaxNumberDigits long: the lexer checks)
  // as an exact rational in lowest terms.
  TN decimal(const Expr& e) const {
    auto dot = e.text.find('.');
    if (dot == std::string::npos) fail(e.loc, "malformed decimal literal '" + e.text + "'");
    mpq_class q(mpz_class(e.text.substr(0, dot) + e.text.substr(dot + 1), 10));
    mpz_ui_pow_ui(q.get_den_mpz_t(), 10, e.text.size() - dot - 1);
    q.canonicalize();
    Literal l;
    l.kind = Literal::Kind::Real;
    l.num = q.get_num();
    l.den = q.get_den();
    TN t = literal(l, e.loc, true);
    t.decimal = e.loc;
    return t;
  }

  TN let_value(int i) {
    if (let_state_[static_cast<size_t>(i)] == 2) return *let_val_[static_cast<size_t>(i)];
    const syntax::Item& it = *lets_[static_cast<size_t>(i)];
    if (let_state_[static_cast<size_t>(i)] == 1) fail(it.names[0].loc, "'" + it.names[0].name + "' is defined in terms of itself");
    let_state_[static_cast<size_t>(i)] = 1;
    TN v = tensor(*it.expr);
    measure(v.n);
    let_val_[static_cast<size_t>(i)] = v;
    let_state_[static_cast<size_t>(i)] = 2;
    return v;
  }

  // ---- lets in dependency order, and the size of the checked tree ----
  // Lets are checked once each and shared: a use of a let is its node (the checked rule is a DAG).
  // Before an item is checked, the lets it uses are checked, dependencies first, by an explicit
  // work stack: a chain of lets may be thousands long, and checking a let whose dependencies are
  // done recurses no deeper than its own syntax tree (bounded by the parser).
  static void let_names(const Expr& e, std::vector<const Expr*>& out) {
    if (e.kind == EK::Name) out.push_back(&e);
    for (const auto& a : e.args) let_names(*a, out);
    for (const auto& na : e.named) let_names(*na.value, out);
    for (const auto& be : e.entries)
      if (be.value) let_names(*be.value, out);
  }
  std::vector<int> lets_used(const Expr& e) const {
    std::vector<const Expr*> names;
    let_names(e, names);
    std::vector<int> out;
    for (const Expr* n : names)
      if (auto it = let_index_.find(n->text); it != let_index_.end()) out.push_back(it->second);
    return out;
  }
  void prepare_lets(const std::vector<int>& lets) {
    std::vector<std::pair<int, bool>> work;  // (let, its dependencies are pushed)
    std::vector<bool> on_path(lets_.size(), false);
    for (auto j = lets.rbegin(); j != lets.rend(); ++j) work.emplace_back(*j, false);
    while (!work.empty()) {
      auto [i, expanded] = work.back();
      const size_t u = static_cast<size_t>(i);
      if (let_state_[u] == 2) {
        work.pop_back();
      } else if (expanded) {
        work.pop_back();
        on_path[u] = false;
        let_value(i);
      } else if (on_path[u]) {  // the lets expanded below this entry are exactly its users
        const syntax::Ident& id = lets_[u]->names[0];
        fail(id.loc, "'" + id.name + "' is defined in terms of itself");
      } else {
        work.back().second = true;
        on_path[u] = true;
        std::vector<int> deps = lets_used(*lets_[u]->expr);  // checked in the order they are used
        for (auto j = deps.rbegin(); j != deps.rend(); ++j)
          if (let_state_[static_cast<size_t>(*j)] != 2) work.emplace_back(*j, false);
      }
    }
  }

  // The distinct nodes of the DAG under `root` that `known` does not stop at, each after its
  // arguments; iterative, as a checked tree may be deep before measure() has bounded it.
  template <class Known>
  static std::vector<const Node*> post_order(const NodeP& root, Known known) {
    std::vector<const Node*> out;
    std::unordered_set<const Node*> seen;
    std::vector<std::pair<const Node*, bool>> work{{root.get(), false}};
    while (!work.empty()) {
      auto [n, expanded] = work.back();
      work.pop_back();
      if (expanded) {
        out.push_back(n);
        continue;
      }
      if (known(n) || !seen.insert(n).second) continue;
      work.emplace_back(n, true);
      for (auto a = n->args.rbegin(); a != n->args.rend(); ++a) work.emplace_back(a->get(), false);
    }
    return out;
  }

  // Bounds every checked tree, lets included, so that the later stages may recurse over it and
  // the solver never sees an expanded power: the height of the DAG (as the parser bounds the
  // syntax, kMaxNesting), the degree of its products (x * x ... counts each factor; the solver
  // keeps x^n as n factors) and its width (kMaxConcat, kMaxOperands). An error is located at the
  // first node over a limit.
  void measure(const NodeP& root) {
    for (const Node* n : post_order(root, [&](const Node* x) { return shape_of_.count(x) > 0; })) {
      int height = 0;
      int64_t degree = 0;
      for (const auto& a : n->args) {
        const auto& [h, d] = shape_of_.at(a.get());
        height = std::max(height, h);
        degree = n->op == Op::Mul || n->op == Op::Dot || n->op == Op::Conv ? degree + d : std::max(degree, d);
      }
      if (n->op == Op::Input || n->op == Op::ScalarRef || n->op == Op::Iota) degree = 1;
      if (height + 1 > syntax::kMaxNesting)
        fail(n->loc, "expression nesting deeper than " + std::to_string(syntax::kMaxNesting) +
                         " levels, counting the lets it uses");
      operands_ += n->args.size();
      if (n->op == Op::Concat && n->args.size() > kMaxConcat)
        fail(n->loc, "'concat' takes at most " + std::to_string(kMaxConcat) + " operands, got " + std::to_string(n->args.size()));
      if (operands_ > kMaxOperands)
        fail(n->loc, "the rule is too large: its expressions have more than " + std::to_string(kMaxOperands) +
                         " operands (a let counts once)");
      if (degree > kMaxDegree)
        fail(n->loc, "the degree of this product exceeds " +
                         std::to_string(kMaxDegree) + " (the solver expands x^n into n factors)");
      shape_of_[n] = {height + 1, degree};
    }
    measured_.push_back(root);
  }

  TN tensor(const Expr& e) {
    switch (e.kind) {
      case EK::Int: {
        Literal l;
        l.num = e.ival;
        return literal(l, e.loc, true);
      }
      case EK::Decimal: return decimal(e);
      case EK::Braces: fail(e.loc, "a brace literal is not a tensor expression");
      case EK::Name: {
        if (e.text == "true" || e.text == "false") {
          Literal l;
          l.kind = Literal::Kind::Bool;
          l.num = e.text == "true";
          return literal(l, e.loc, false);
        }
        if (e.text == "inf") {
          Literal l;
          l.kind = Literal::Kind::PosInf;
          return literal(l, e.loc, true);
        }
        if (e.text == "nan") {  // extension: float types only (a rule listing no float type is refused)
          Literal l;
          l.kind = Literal::Kind::NaN;
          TN t = literal(l, e.loc, true);
          t.decimal = e.loc;
          return t;
        }
        if (!e.label.empty()) fail(e.loc, "'" + e.text + "@" + e.label + "' is an axis, not a tensor expression");
        const NameInfo& ni = lookup(e.text, e.loc);
        switch (ni.kind) {
          case NK::Tensor: {
            auto n = mk_node(Op::Input, e.loc);
            n->input = ni.id;
            const TensorDecl& td = r_.tensors[static_cast<size_t>(ni.id)];
            n->etype = td.etype;
            n->shape = td.shape;
            return fixed(n);
          }
          case NK::Scalar: {
            auto n = mk_node(Op::ScalarRef, e.loc);
            n->input = ni.id;
            n->etype = r_.scalars[static_cast<size_t>(ni.id)].etype;
            return fixed(n);
          }
          case NK::Let: return let_value(ni.id);
          case NK::Map: fail(e.loc, "map '" + e.text + "' is not a tensor; maps are used in sizes, attributes and conditions");
          case NK::RClass: fail(e.loc, "rclass '" + e.text + "' is not a tensor");
        }
        break;
      }
      case EK::Unary: {
        TN a = tensor(*e.args[0]);
        if (e.text == "-") {
          // Fold negative literals so that `-1` and `-inf` are literals.
          if (a.n->op == Op::Literal && a.poly) {
            Literal l = a.n->lit;
            if (l.kind == Literal::Kind::PosInf) l.kind = Literal::Kind::NegInf;
            else if (l.kind == Literal::Kind::NegInf) l.kind = Literal::Kind::PosInf;
            else if (l.kind == Literal::Kind::NaN) return elementwise(Op::Neg, {a}, e.loc, "'-'", true, true);
            else if (l.num == 0) l.neg_zero = !l.neg_zero;
            else l.num = -l.num;
            TN t = literal(l, e.loc, true);
            t.decimal = a.decimal;
            return t;
          }
          return elementwise(Op::Neg, {a}, e.loc, "'-'", true, true);
        }
        return elementwise(Op::Not, {a}, e.loc, "'!'", false, false);
      }
      case EK::Binary: return binary(e);
      case EK::Call: return call(e);
    }
    fail(e.loc, "unexpected expression");
  }

  TN binary(const Expr& e) {
    const std::string& o = e.text;
    if (o == "div" || o == "mod") fail(e.loc, "'" + o + "' is for conditions; on tensors use '" + (o == "div" ? "/" : "%") + "'");
    TN a = tensor(*e.args[0]);
    TN b = tensor(*e.args[1]);
    static const std::unordered_map<std::string, Op> arith = {
        {"+", Op::Add}, {"-", Op::Sub}, {"*", Op::Mul}, {"/", Op::Div}, {"%", Op::Rem}};
    static const std::unordered_map<std::string, Op> cmp = {{"==", Op::Eq}, {"!=", Op::Ne}, {"<", Op::Lt},
                                                            {"<=", Op::Le}, {">", Op::Gt}, {">=", Op::Ge}};
    std::string what = "'" + o + "'";
    if (auto f = arith.find(o); f != arith.end()) return elementwise(f->second, {a, b}, e.loc, what, true, true);
    if (o == "&&" || o == "||") return elementwise(o == "&&" ? Op::And : Op::Or, {a, b}, e.loc, what, false, false);
    Op op = cmp.at(o);
    // A comparison: operands numeric (== and != also take bool); the result is bool.
    bool eq = op == Op::Eq || op == Op::Ne;
    std::vector<TN*> ptrs{&a, &b};
    std::optional<EType> et = common_etype(ptrs, e.loc, what);
    if (!et) {
      a = fixed(finalize(a));
      b = fixed(finalize(b));
      et = tvar();
    }
    if (!eq || !is_bool(*et)) need_numeric(*et, e.loc, what);
    auto n = mk_node(op, e.loc);
    n->shape = common_shape({&a, &b}, e.loc, what);
    n->etype = concrete(DType::Bool);
    n->args = {a.n, b.n};
    return fixed(n);
  }

  // ---- calls ----
  void positional(const Expr& e, size_t lo, size_t hi) const {
    size_t n = e.args.size();
    if (n < lo || n > hi) {
      std::string want = lo == hi ? std::to_string(lo) : hi == SIZE_MAX ? "at least " + std::to_string(lo)
                                                                        : std::to_string(lo) + " to " + std::to_string(hi);
      fail(e.loc, "'" + e.text + "' takes " + want + " positional argument" + (lo == 1 && hi == 1 ? "" : "s") + ", got " +
                      std::to_string(n));
    }
  }
  std::map<std::string, const syntax::NamedArg*> attributes(const Expr& e, std::initializer_list<const char*> allowed) const {
    std::map<std::string, const syntax::NamedArg*> m;
    for (const auto& na : e.named) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || na.name == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(na.loc, "unknown attribute '" + na.name + "' of '" + e.text + "'" +
                         (list.empty() ? " (it takes none)" : " (expected " + list + ")"));
      }
      m[na.name] = &na;
    }
    return m;
  }
  TN scalar_operand(const Expr& e, const std::string& what) {
    TN t = tensor(e);
    if (!is_scalar(t)) fail(e.loc, what + " must be a scalar, but it has axes " + keys_str(t.n->shape));
    return t;
  }
  TN non_poly(TN t) const { return t.poly ? fixed(finalize(t)) : t; }

  TN call(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    if (f == "all" || f == "any" || f == "ite")
      fail(loc, what + " is only allowed in preconditions");
    if (f == "max" || f == "min") {
      positional(e, 2, 2);
      attributes(e, {});
      return elementwise(f == "max" ? Op::Max : Op::Min, {tensor(*e.args[0]), tensor(*e.args[1])}, loc, what, true, true);
    }
    if (f == "abs") {
      positional(e, 1, 1);
      attributes(e, {});
      return elementwise(Op::Abs, {tensor(*e.args[0])}, loc, what, true, true);
    }
    if (f == "exp") return call_exp(e);
    if (f == "pow") return call_pow(e);
    if (f == "select") return call_select(e);
    if (f == "clamp") {
      positional(e, 3, 3);
      attributes(e, {});
      return elementwise(Op::Clamp, {tensor(*e.args[0]), tensor(*e.args[1]), tensor(*e.args[2])}, loc, what, true, true);
    }
    if (f == "const") return call_const(e);
    if (f == "iota") return call_iota(e);
    if (f == "broadcast") return call_broadcast(e);
    if (f == "sum") return call_sum(e);
    if (f == "reduce_max" || f == "reduce_min" || f == "reduce_prod") return call_reduce(e);
    if (f == "slice") return call_slice(e);
    if (f == "pad") return call_pad(e);
    if (f == "dynslice") return call_dynslice(e);
    if (f == "dynupdate") return call_dynupdate(e);
    if (f == "concat") return call_concat(e);
    if (f == "relabel") return call_relabel(e);
    if (f == "reverse") return call_reverse(e);
    if (f == "dot") return call_dot(e);
    if (f == "conv") return conv(e);
    if (f == "degenerate") return call_degenerate(e);
    fail(loc, "unknown function '" + f + "'");
  }

  TN call_exp(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 1, 1);
    attributes(e, {});
    TN a = tensor(*e.args[0]);
    if (a.poly) a = fixed(coerce(a, is_fractional(tvar()) ? tvar() : concrete(DType::Real), loc));
    if (!is_fractional(a.n->etype))
      fail(loc, "'exp' needs element type real or a float type, got " + ety_str(a.n->etype) +
                    (a.n->etype.is_t ? " (T stands for " + dtypes_str() + ")" : ""));
    return elementwise(Op::Exp, {a}, loc, what, true, false);
  }

  // Extension: pow(A, k) with a literal k >= 0 is desugared into multiplications.
  TN call_pow(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    attributes(e, {});
    const Expr& k = *e.args[1];
    if (k.kind != EK::Int) fail(k.loc, "the exponent of 'pow' must be a non-negative integer literal");
    if (k.ival > 64) fail(k.loc, "the exponent of 'pow' is limited to 64");
    TN a = tensor(*e.args[0]);
    if (!a.poly) need_numeric(a.n->etype, loc, what);
    if (k.ival == 0) {
      // 1 wherever A is valid and defined: A stays an operand of the Const (ir.h), so that its
      // validity and definedness survive the fold. A scalar of literal arithmetic is always
      // valid and defined, so there the 1 stands alone.
      Literal one;
      one.num = 1;
      TN lit = literal(one, loc, true);
      if (is_scalar(a) && a.poly) return lit;
      auto n = mk_node(Op::Const, loc);
      n->shape = a.n->shape;
      n->etype = a.poly ? tvar() : a.n->etype;
      n->args = {a.poly ? finalize(lit) : coerce(lit, a.n->etype, loc), a.poly ? finalize(a) : a.n};
      return TN{n, false, std::nullopt};
    }
    TN acc = a;
    for (int64_t i = 1; i < k.ival; ++i) acc = elementwise(Op::Mul, {acc, a}, loc, "'pow'", true, true);
    return acc;
  }

  TN call_select(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 3, 3);
    attributes(e, {});
    TN p = tensor(*e.args[0]);
    if (p.poly) fail(e.args[0]->loc, "the predicate of 'select' must be bool");
    need_bool(p.n->etype, e.args[0]->loc, "the predicate of 'select'");
    TN a = tensor(*e.args[1]), b = tensor(*e.args[2]);
    std::optional<EType> et = common_etype({&a, &b}, loc, what);
    if (!et) {
      a = fixed(finalize(a));
      b = fixed(finalize(b));
      et = tvar();
    }
    auto n = mk_node(Op::Select, loc);
    n->shape = common_shape({&p, &a, &b}, loc, what);
    n->etype = *et;
    n->args = {p.n, a.n, b.n};
    return fixed(n);
  }

  TN call_const(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    attributes(e, {});
    TN v = scalar_operand(*e.args[0], "the value of 'const'");
    auto n = mk_node(Op::Const, loc);
    n->shape = shape_literal(*e.args[1], "the shape of 'const'");
    n->etype = v.n->etype;
    n->args = {v.n};
    return TN{n, v.poly, v.decimal};
  }

  TN call_iota(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    attributes(e, {});
    auto n = mk_node(Op::Iota, loc);
    n->shape = shape_literal(*e.args[0], "the shape of 'iota'");
    AxisKey k = key_arg(*e.args[1], "the axis of 'iota'");
    if (!n->shape.count(k)) fail(e.args[1]->loc, "the axis of 'iota' (" + key_str(k) + ") is not in its shape " + keys_str(n->shape));
    mark_single(k.rclass);
    n->axes = {k};
    n->etype = int_type();
    return fixed(n);
  }

  TN call_broadcast(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    attributes(e, {});
    TN a = tensor(*e.args[0]);
    AxisMap add = shape_literal(*e.args[1], "the new axes of 'broadcast'");
    auto n = mk_node(Op::Broadcast, loc);
    n->shape = a.n->shape;
    for (const auto& [k, v] : add) {
      if (a.n->shape.count(k)) fail(entry_loc(*e.args[1], k), "broadcast adds axis " + key_str(k) + ", which the operand already has");
      n->shape[k] = v;
    }
    n->etype = a.n->etype;
    n->args = {a.n};
    return TN{n, a.poly, a.decimal};
  }

  TN call_sum(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    attributes(e, {});
    TN a = non_poly(tensor(*e.args[0]));
    need_numeric(a.n->etype, loc, what);
    auto n = mk_node(Op::Sum, loc);
    n->sum_index = si_map(*e.args[1], a.n->shape, "'sum'");
    if (n->sum_index.empty()) fail(e.args[1]->loc, "'sum' needs at least one axis");
    n->shape = a.n->shape;
    for (const auto& [k, m] : n->sum_index) n->shape.erase(k);
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  // Extension: XLA's Reduce with a max/min/multiply computation and an init value (ir.h, Reducer).
  TN call_reduce(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    auto at = attributes(e, {"init"});
    if (!at.count("init")) fail(loc, what + " needs an init value: init=...");
    const Expr& ie = *at["init"]->value;
    TN a = tensor(*e.args[0]);
    TN v = scalar_operand(ie, "the init value of " + what);
    std::optional<EType> et = common_etype({&a, &v}, ie.loc, "the init value of " + what);
    if (!et) {
      a = fixed(finalize(a));
      v = fixed(finalize(v));
      et = tvar();
    }
    need_numeric(*et, loc, what);
    auto n = mk_node(Op::Sum, loc);
    n->reducer = f == "reduce_max" ? Reducer::Max : f == "reduce_min" ? Reducer::Min : Reducer::Prod;
    n->sum_index = si_map(*e.args[1], a.n->shape, what);
    if (n->sum_index.empty()) fail(e.args[1]->loc, what + " needs at least one axis");
    n->shape = a.n->shape;
    for (const auto& [k, m] : n->sum_index) n->shape.erase(k);
    n->etype = *et;
    n->args = {a.n, v.n};
    return fixed(n);
  }

  TN call_slice(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 1, 1);
    auto at = attributes(e, {"start", "end", "stride"});
    TN a = non_poly(tensor(*e.args[0]));
    const AxisMap& sh = a.n->shape;
    auto n = mk_node(Op::Slice, loc);
    AxisMap st = at.count("start") ? attr_map(*at["start"], sh, what) : AxisMap{};
    AxisMap en = at.count("end") ? attr_map(*at["end"], sh, what) : AxisMap{};
    AxisMap sd = at.count("stride") ? attr_map(*at["stride"], sh, what) : AxisMap{};
    for (const auto& [k, size] : sh) {
      if (!st.count(k)) st[k] = mk_int(0);
      if (!en.count(k)) en[k] = size;
      if (!sd.count(k)) sd[k] = mk_int(1);
      // (end - start + stride - 1) div stride
      n->shape[k] = fold_bin(IK::Div, fold_bin(IK::Add, fold_bin(IK::Sub, en[k], st[k]), fold_bin(IK::Sub, sd[k], mk_int(1))), sd[k]);
    }
    n->attrs["start"] = st;
    n->attrs["end"] = en;
    n->attrs["stride"] = sd;
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  TN call_pad(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    auto at = attributes(e, {"low", "high", "interior"});
    TN a = tensor(*e.args[0]);
    TN v = scalar_operand(*e.args[1], "the padding value of 'pad'");
    std::optional<EType> et = common_etype({&a, &v}, loc, what);
    if (!et) {
      a = fixed(finalize(a));
      v = fixed(finalize(v));
      et = tvar();
    }
    const AxisMap& sh = a.n->shape;
    auto n = mk_node(Op::Pad, loc);
    AxisMap lo = at.count("low") ? attr_map(*at["low"], sh, what) : AxisMap{};
    AxisMap hi = at.count("high") ? attr_map(*at["high"], sh, what) : AxisMap{};
    AxisMap in = at.count("interior") ? attr_map(*at["interior"], sh, what) : AxisMap{};
    for (const auto& [k, size] : sh) {
      if (!lo.count(k)) lo[k] = mk_int(0);
      if (!hi.count(k)) hi[k] = mk_int(0);
      if (!in.count(k)) in[k] = mk_int(0);
      // low + high + size + max(0, size - 1) * interior
      n->shape[k] = fold_bin(IK::Add, fold_bin(IK::Add, fold_bin(IK::Add, lo[k], hi[k]), size),
                             fold_bin(IK::Mul, fold_bin(IK::Max, mk_int(0), fold_bin(IK::Sub, size, mk_int(1))), in[k]));
    }
    n->attrs["low"] = lo;
    n->attrs["high"] = hi;
    n->attrs["interior"] = in;
    n->etype = *et;
    n->args = {a.n, v.n};
    return fixed(n);
  }

  TN call_dynslice(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 1, 1);
    auto at = attributes(e, {"start", "size"});
    TN a = non_poly(tensor(*e.args[0]));
    const AxisMap& sh = a.n->shape;
    if (!at.count("start") || !at.count("size")) fail(loc, "'dynslice' needs both 'start' and 'size'");
    AxisMap st = attr_map(*at["start"], sh, what);
    AxisMap sz = attr_map(*at["size"], sh, what);
    if (!same_keys(st, sz))
      fail(at["size"]->loc, "'dynslice': 'start' and 'size' must name the same axes (" + keys_str(st) + " vs " + keys_str(sz) + ")");
    auto n = mk_node(Op::DynSlice, loc);
    n->shape = sh;
    for (const auto& [k, v] : sz) n->shape[k] = v;
    n->attrs["start"] = st;
    n->attrs["size"] = sz;
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  TN call_dynupdate(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    auto at = attributes(e, {"start"});
    TN a = tensor(*e.args[0]), u = tensor(*e.args[1]);
    std::optional<EType> et = common_etype({&a, &u}, loc, what);
    if (!et) fail(loc, "'dynupdate' needs tensor operands");
    if (is_scalar(a) || is_scalar(u)) fail(loc, "'dynupdate' needs tensor operands, not scalars");
    if (!same_keys(a.n->shape, u.n->shape))
      fail(e.args[1]->loc, "'dynupdate': the update has axes " + keys_str(u.n->shape) + ", the operand " + keys_str(a.n->shape));
    if (!at.count("start")) fail(loc, "'dynupdate' needs 'start' on every axis of the operand");
    AxisMap st = attr_map(*at["start"], a.n->shape, what);
    for (const auto& [k, v] : a.n->shape)
      if (!st.count(k)) fail(at["start"]->loc, "'dynupdate': 'start' must give every axis of the operand; " + key_str(k) + " is missing");
    auto n = mk_node(Op::DynUpdate, loc);
    n->shape = a.n->shape;
    n->attrs["start"] = st;
    n->etype = *et;
    n->args = {a.n, u.n};
    return fixed(n);
  }

  TN call_concat(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, SIZE_MAX);
    auto at = attributes(e, {"axis"});
    if (!at.count("axis")) fail(loc, "'concat' needs 'axis=R'");
    std::vector<TN> ops;
    for (const auto& x : e.args) ops.push_back(tensor(*x));
    std::vector<TN*> ptrs;
    for (auto& t : ops) ptrs.push_back(&t);
    std::optional<EType> et = common_etype(ptrs, loc, what);
    if (!et) fail(loc, "'concat' needs tensor operands");
    for (size_t i = 0; i < ops.size(); ++i) {
      if (is_scalar(ops[i])) fail(e.args[i]->loc, "'concat' needs tensor operands, not scalars");
      if (!same_keys(ops[0].n->shape, ops[i].n->shape))
        fail(e.args[i]->loc, "'concat': operands have different axes: " + keys_str(ops[0].n->shape) + " and " + keys_str(ops[i].n->shape));
    }
    AxisKey k = key_arg(*at["axis"]->value, "the axis of 'concat'");
    if (!ops[0].n->shape.count(k))
      fail(at["axis"]->value->loc, "the axis of 'concat' (" + key_str(k) + ") is not an axis of its operands " + keys_str(ops[0].n->shape));
    mark_single(k.rclass);
    auto n = mk_node(Op::Concat, loc);
    n->shape = ops[0].n->shape;
    IExprP total = ops[0].n->shape.at(k);
    for (size_t i = 1; i < ops.size(); ++i) total = fold_bin(IK::Add, total, ops[i].n->shape.at(k));
    n->shape[k] = total;
    n->axes = {k};
    n->etype = *et;
    for (auto& t : ops) n->args.push_back(t.n);
    return fixed(n);
  }

  TN call_relabel(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    attributes(e, {});
    TN a = non_poly(tensor(*e.args[0]));
    const Expr& b = need_braces(*e.args[1], "the renaming of 'relabel'");
    auto n = mk_node(Op::Relabel, loc);
    for (const auto& be : b.entries) {
      if (!be.to) fail(be.key.loc, "'relabel' takes renamings 'R@a -> R@b'");
      AxisKey from = key(be.key), to = key(*be.to);
      if (!a.n->shape.count(from))
        fail(be.key.loc, "'relabel' renames axis " + be.key.str() + ", which the operand does not have (its axes: " + keys_str(a.n->shape) + ")");
      if (from.rclass != to.rclass)
        fail(be.to->loc, "'relabel' can only rename an axis to another copy of the same rclass (" + be.key.str() + " -> " + be.to->str() + ")");
      if (n->relabel.count(from)) fail(be.key.loc, "'relabel' renames axis " + be.key.str() + " twice");
      n->relabel[from] = to;
    }
    AxisMap out;
    for (const auto& [k, v] : a.n->shape) {
      auto r = n->relabel.find(k);
      AxisKey nk = r == n->relabel.end() ? k : r->second;
      if (out.count(nk)) fail(b.loc, "'relabel' is not injective: two axes become " + key_str(nk));
      out[nk] = v;
    }
    n->shape = out;
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  TN call_reverse(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    attributes(e, {});
    TN a = non_poly(tensor(*e.args[0]));
    auto n = mk_node(Op::Reverse, loc);
    n->axes = key_set(*e.args[1], &a.n->shape, "'reverse'");
    n->shape = a.n->shape;
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  TN call_dot(const Expr& e) {
    const std::string& f = e.text;
    const SourceLoc& loc = e.loc;
    std::string what = "'" + f + "'";
    positional(e, 2, 2);
    auto at = attributes(e, {"contract", "batch"});
    TN a = non_poly(tensor(*e.args[0])), b = non_poly(tensor(*e.args[1]));
    EType et = unify(a.n->etype, b.n->etype, loc, what);
    need_numeric(et, loc, what);
    AxisMap common;
    for (const auto& [k, v] : a.n->shape)
      if (b.n->shape.count(k)) common[k] = v;
    auto n = mk_node(Op::Dot, loc);
    if (at.count("contract")) n->sum_index = si_map(*at["contract"]->value, common, "'dot' contract", kCommon);
    if (at.count("batch")) n->axes = key_set(*at["batch"]->value, &common, "'dot' batch", kCommon);
    for (const AxisKey& k : n->axes)
      if (n->sum_index.count(k)) fail(at["batch"]->value->loc, "'dot': axis " + key_str(k) + " is both contracted and batch");
    for (const auto& [k, v] : common)
      if (!n->sum_index.count(k) && std::find(n->axes.begin(), n->axes.end(), k) == n->axes.end())
        fail(loc, "'dot': common axis " + key_str(k) + " must be listed in 'contract' or 'batch'");
    n->shape = a.n->shape;
    for (const auto& [k, m] : n->sum_index) n->shape.erase(k);
    for (const auto& [k, v] : b.n->shape)
      if (!common.count(k)) n->shape[k] = v;
    n->etype = et;
    n->args = {a.n, b.n};
    return fixed(n);
  }

  TN call_degenerate(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 1, 1);
    auto at = attributes(e, {"add", "remove"});
    TN a = non_poly(tensor(*e.args[0]));
    auto n = mk_node(Op::Degenerate, loc);
    n->shape = a.n->shape;
    if (at.count("remove")) n->axes = key_set(*at["remove"]->value, &a.n->shape, "'degenerate' remove");
    for (const AxisKey& k : n->axes) n->shape.erase(k);
    AxisMap add;
    if (at.count("add")) {
      const Expr& b = need_braces(*at["add"]->value, "attribute 'add'");
      for (const auto& be : b.entries) {
        if (be.to || (be.value && !(be.value->kind == EK::Int && be.value->ival == 1)))
          fail(be.value ? be.value->loc : be.key.loc, "'degenerate' adds axes of size 1 only ('{" + be.key.str() + ": 1}')");
        AxisKey k = key(be.key);
        if (a.n->shape.count(k) && std::find(n->axes.begin(), n->axes.end(), k) == n->axes.end())
          fail(be.key.loc, "'degenerate' adds axis " + be.key.str() + ", which the operand already has");
        if (add.count(k)) fail(be.key.loc, "'degenerate' adds axis " + be.key.str() + " twice");
        add[k] = mk_int(1, be.key.loc);
        n->shape[k] = add[k];
      }
    }
    n->attrs["add"] = add;
    n->etype = a.n->etype;
    n->args = {a.n};
    return fixed(n);
  }

  // conv(IN, W, feature={F: i}, spatial={S: k}, batch={B}, output={O}, stride=, low=, high=,
  //      lhs_dilation=, rhs_dilation=): see docs/trverify-language.md and ConvAttrs in ir.h.
  TN conv(const Expr& e) {
    const SourceLoc& loc = e.loc;
    positional(e, 2, 2);
    auto at = attributes(e, {"batch", "feature", "output", "spatial", "stride", "low", "high", "lhs_dilation", "rhs_dilation"});
    TN in = non_poly(tensor(*e.args[0])), w = non_poly(tensor(*e.args[1]));
    EType et = unify(in.n->etype, w.n->etype, loc, "'conv'");
    need_numeric(et, loc, "'conv'");
    const AxisMap &si = in.n->shape, &sw = w.n->shape;
    AxisMap common, only_in, only_w;
    for (const auto& [k, v] : si) (sw.count(k) ? common : only_in)[k] = v;
    for (const auto& [k, v] : sw)
      if (!si.count(k)) only_w[k] = v;
    ConvAttrs ca;
    auto n = mk_node(Op::Conv, loc);
    if (!at.count("feature")) fail(loc, "'conv' needs 'feature={F: i}' (the contracted input-feature axes and their summation indices)");
    std::map<AxisKey, int> feat = si_map(*at["feature"]->value, common, "'conv' feature", kCommon);
    std::map<AxisKey, int> spat;
    if (at.count("spatial")) spat = si_map(*at["spatial"]->value, common, "'conv' spatial", kCommon);
    for (const auto& [k, m] : feat) {
      if (spat.count(k)) fail(at["spatial"]->value->loc, "'conv': axis " + key_str(k) + " is both feature and spatial");
      ca.feature.push_back(k);
      n->sum_index[k] = m;
    }
    for (const auto& [k, m] : spat) {
      ca.spatial.push_back(k);
      n->sum_index[k] = m;
    }
    for (const auto& [k, v] : common)
      if (!n->sum_index.count(k))
        fail(loc, "'conv': common axis " + key_str(k) + " of input and weight must be listed in 'feature' or 'spatial'");
    for (const auto& [k, v] : only_in) ca.batch.push_back(k);
    for (const auto& [k, v] : only_w) ca.output_feature.push_back(k);
    // batch / output are implied by the key sets; when written they must agree.
    auto check_implied = [&](const char* name, const std::vector<AxisKey>& want) {
      if (!at.count(name)) return;
      std::vector<AxisKey> got = key_set(*at[name]->value, nullptr, std::string("'conv' ") + name);
      std::sort(got.begin(), got.end());
      if (got != want) {
        std::string w = "{";
        for (const auto& k : want) w += (w.size() > 1 ? ", " : "") + key_str(k);
        fail(at[name]->value->loc, std::string("'conv': '") + name + "' must be exactly the axes " + w + "} (" +
                                       (std::string(name) == "batch" ? "the input axes not in the weight" : "the weight axes not in the input") + ")");
      }
    };
    check_implied("batch", ca.batch);
    check_implied("output", ca.output_feature);
    AxisMap spatial_shape;
    for (const auto& k : ca.spatial) spatial_shape[k] = si.at(k);
    auto spatial_attr = [&](const char* name, int64_t dflt) {
      AxisMap m = at.count(name) ? attr_map(*at[name], spatial_shape, "'conv' (spatial axes only)") : AxisMap{};
      for (const auto& k : ca.spatial)
        if (!m.count(k)) m[k] = mk_int(dflt);
      n->attrs[name] = m;
      return m;
    };
    AxisMap stride = spatial_attr("stride", 1), low = spatial_attr("low", 0), high = spatial_attr("high", 0),
           ld = spatial_attr("lhs_dilation", 1), rd = spatial_attr("rhs_dilation", 1);
    for (const auto& k : ca.batch) n->shape[k] = si.at(k);
    for (const auto& k : ca.output_feature) n->shape[k] = sw.at(k);
    for (const auto& k : ca.spatial) {
      IExprP s = si.at(k), ws = sw.at(k);
      auto dilated = [&](const IExprP& size, const IExprP& dil) {
        return fold_bin(IK::Add, size, fold_bin(IK::Mul, fold_bin(IK::Max, mk_int(0), fold_bin(IK::Sub, size, mk_int(1))),
                                                fold_bin(IK::Sub, dil, mk_int(1))));
      };
      IExprP pin = fold_bin(IK::Add, fold_bin(IK::Add, low[k], high[k]), dilated(s, ld[k]));
      IExprP pw = dilated(ws, rd[k]);
      n->shape[k] = fold_bin(IK::Div, fold_bin(IK::Add, fold_bin(IK::Sub, pin, pw), stride[k]), stride[k]);
    }
    n->conv = ca;
    n->etype = et;
    n->args = {in.n, w.n};
    return fixed(n);
  }

  void mark_single(int rc) { r_.rclasses[static_cast<size_t>(rc)].single = true; }

  // ---- rule-level items ----
  void assume(const syntax::Item& it) {
    TN t = tensor(*it.expr);
    if (t.poly) fail(it.expr->loc, "'assume' needs a bool tensor expression");
    need_bool(t.n->etype, it.expr->loc, "'assume'");
    measure(t.n);
    r_.assume.push_back(Assumption{t.n, it.loc});
  }

  void side(const syntax::Item& it) {
    bool lhs = it.kind == ItemKind::Lhs;
    NodeP& slot = lhs ? r_.lhs : r_.rhs;
    if (slot) fail(it.loc, std::string("rule has more than one '") + (lhs ? "lhs" : "rhs") + "'");
    TN t = tensor(*it.expr);
    slot = finalize(t);
    measure(slot);
    if (!lhs) rhs_loc_ = it.loc;
  }

  static void collect_si(const NodeP& n, std::set<const Node*>& seen, std::vector<std::pair<int, SourceLoc>>& out) {
    if (!seen.insert(n.get()).second) return;
    for (const auto& [k, m] : n->sum_index) out.emplace_back(m, n->loc);
    for (const auto& a : n->args) collect_si(a, seen, out);
  }

  // Which maps are summation indices of which side; SI maps have no other use.
  void summation_indices() {
    for (int s = 0; s < 2; ++s) {
      std::set<const Node*> seen;
      std::vector<std::pair<int, SourceLoc>> uses;
      collect_si(s == 0 ? r_.lhs : r_.rhs, seen, uses);
      for (const auto& [m, loc] : uses) {
        if (!side_of_si_.emplace(m, s).second) {
          if (side_of_si_[m] == s)
            fail(loc, "summation-index map '" + r_.maps[static_cast<size_t>(m)].name + "' is used by two reductions of the " +
                          (s == 0 ? "lhs" : "rhs"));
          fail(loc, "summation-index map '" + r_.maps[static_cast<size_t>(m)].name +
                        "' is used on both sides; use one map per side and relate them with 'match'");
        }
      }
    }
    for (const auto& [m, loc] : si_use_) {
      const auto& other = map_use_[static_cast<size_t>(m)];
      if (other)
        fail(*other, "map '" + r_.maps[static_cast<size_t>(m)].name + "' is a summation index (at " + std::to_string(loc.line) + ":" +
                         std::to_string(loc.col) + ") and cannot also be used in a size, attribute or condition");
      if (!side_of_si_.count(m))
        fail(loc, "summation-index map '" + r_.maps[static_cast<size_t>(m)].name + "' is used in neither lhs nor rhs");
    }
  }

  void match(const syntax::Item& it) {
    for (const auto& [a, b] : it.pairs) {
      auto side = [&](const syntax::Ident& id) {
        const NameInfo& ni = lookup(id.name, id.loc);
        if (ni.kind != NK::Map) fail(id.loc, "'" + id.name + "' is a " + kind_name(ni.kind) + ", not a map");
        auto s = side_of_si_.find(ni.id);
        if (s == side_of_si_.end()) fail(id.loc, "map '" + id.name + "' is not a summation index of either side");
        return std::pair<int, int>{ni.id, s->second};
      };
      auto [ma, sa] = side(a);
      auto [mb, sb] = side(b);
      if (sa == sb)
        fail(b.loc, "'match' pairs an lhs summation index with an rhs one, but '" + a.name + "' and '" + b.name + "' are both in the " +
                        (sa == 0 ? "lhs" : "rhs"));
      if (r_.maps[static_cast<size_t>(ma)].rclass != r_.maps[static_cast<size_t>(mb)].rclass)
        fail(b.loc, "'match' pairs maps of different rclasses ('" + a.name + "' and '" + b.name + "')");
      Match mt;
      mt.lhs_si = sa == 0 ? ma : mb;
      mt.rhs_si = sa == 0 ? mb : ma;
      mt.loc = a.loc;
      for (const auto& prev : r_.match) {
        if (prev.lhs_si == mt.lhs_si) fail(sa == 0 ? a.loc : b.loc, "'" + r_.maps[static_cast<size_t>(mt.lhs_si)].name + "' is already matched");
        if (prev.rhs_si == mt.rhs_si) fail(sa == 0 ? b.loc : a.loc, "'" + r_.maps[static_cast<size_t>(mt.rhs_si)].name + "' is already matched");
      }
      r_.match.push_back(mt);
    }
  }

  void expect(const syntax::Item& it) {
    if (r_.expect) fail(it.loc, "rule has more than one 'expect'");
    auto v = verdict_from_string(it.verdict.name);
    if (!v)
      fail(it.verdict.loc, "unknown verdict '" + it.verdict.name + "' (expected proved, counterexample, vacuous, timeout, unknown or unsupported)");
    r_.expect = v;
    r_.expect_loc = it.verdict.loc;
  }

  const syntax::Rule& sr_;
  const std::string& source_;
  const CheckOptions& opts_;
  bool int_is_t_ = false;  // CheckOptions::machine with integer types only (int_type)
  Rule r_;
  std::unordered_map<std::string, NameInfo> names_;
  std::vector<const syntax::Item*> map_items_, tensor_items_, lets_;
  std::unordered_map<std::string, int> let_index_;
  std::vector<int> let_state_;  // 0 unchecked, 1 in progress, 2 done
  std::vector<std::optional<TN>> let_val_;
  std::vector<std::optional<SourceLoc>> map_use_;  // first use of each map outside summation indices
  std::map<int, SourceLoc> si_use_;                 // first use of each map as a summation index
  std::map<int, int> side_of_si_;                   // SI map -> 0 lhs / 1 rhs
  SourceLoc rhs_loc_;
  std::unordered_map<const Node*, std::pair<int, int64_t>> shape_of_;  // measure(): height, degree
  size_t operands_ = 0;          // measure(): operands of the distinct nodes so far
  std::vector<NodeP> measured_;  // the measured roots: keep shape_of_'s nodes alive (its keys unique)
};

}  // namespace

LoadedFile check_file(const syntax::File& file, const CheckOptions& opts) {
  LoadedFile out;
  out.path = file.path;
  std::map<std::string, SourceLoc> names;
  for (const auto& sr : file.rules) {
    auto [it, fresh] = names.emplace(sr.name.name, sr.name.loc);
    if (!fresh) {
      std::string msg = "rule '" + sr.name.name + "' is already defined at line " + std::to_string(it->second.line);
      throw Error(msg, sr.name.loc, render_diagnostic(sr.name.loc, msg, *file.source));
    }
    if (!opts.machine) {
      out.rules.push_back(RuleChecker(sr, *file.source, opts).run());
      continue;
    }
    try {
      out.rules.push_back(RuleChecker(sr, *file.source, opts).run());
    } catch (const Error& e) {
      out.skipped.push_back({sr.name.name, sr.loc, e.loc().str() + ": " + e.message()});
    }
  }
  return out;
}

LoadedFile load_rule_source(const std::string& text, const std::string& name, const CheckOptions& opts) {
  return check_file(syntax::parse(text, name), opts);
}

LoadedFile load_rule_file(const std::string& path, const CheckOptions& opts) {
  return check_file(syntax::parse_file(path), opts);
}

}  // namespace tr
