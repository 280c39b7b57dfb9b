// Symbolic evaluation of a rule at one rank vector (see encode.h and docs/verifier.md).
// Lambdas that use a structured binding of an enclosing loop capture it by an init-capture
// (`[&, &k = k]`): clang before 16 cannot capture a structured binding, and the fuzz build
// (tests/fuzz, Debian's clang 14) compiles this file.
#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/machine.h"

#include <algorithm>
#include <functional>
#include <set>

namespace tr::enc {

using cvc5::Kind;

namespace {

bool scalar_shape(const Node& n) { return n.shape.empty(); }

// Calls f once on every distinct node of the DAG under n (a let used twice is one node, not a
// copy per use), without recursion.
void scan(const Node& n, const std::function<void(const Node&)>& f) {
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> work{&n};
  while (!work.empty()) {
    const Node* x = work.back();
    work.pop_back();
    if (!seen.insert(x).second) continue;
    f(*x);
    for (const auto& a : x->args)
      if (a) work.push_back(a.get());
  }
}

// The entries of `from` on the axes of x.
Encoder::Index restrict_to(const Node& x, const Encoder::Index& from) {
  Encoder::Index r;
  for (const auto& [k, sz] : x.shape) r[k] = from.at(k);
  return r;
}

// Rejects a sum (kept as its summand) as an operand of n, which cannot encode it.
void no_sum(const Elem& e, const Node& n) {
  if (e.sum) throw Unsupported(std::string("a sum under ") + to_string(n.op) + " cannot be encoded" + where(n.loc));
}

}  // namespace

// Identifies an index: its keys, then the term ids of its entries (at() caches, sum_use_).
std::vector<uint64_t> Encoder::signature_of(const Index& idx) {
  std::vector<uint64_t> sig;
  for (const auto& [k, v] : idx) {
    sig.push_back(static_cast<uint64_t>(k.rclass) * 1000003u + std::hash<std::string>{}(k.label));
    for (const auto& t : v) sig.push_back(t.getId());
  }
  return sig;
}

cvc5::Sort sort_of(const Builder& b, DType t) {
  if (is_machine(t)) return machine_sort(b.s, t);
  switch (t) {
    case DType::Bool: return b.Bool;
    case DType::Int: return b.Int;
    case DType::Real: return b.Real;
    default: return b.Int;
  }
}

Term Encoder::sort_for(DType t) const {
  if (is_machine(t)) return machine_const(b.s, t, 0);
  return t == DType::Real ? b.real(0) : b.zero;
}

Encoder::Encoder(cvc5::Solver& s, const Rule& r, DType t, std::vector<int> rk)
    : b(s), rule(r), dtype(t), ranks(std::move(rk)) {
  if (ranks.size() != rule.rclasses.size()) throw std::logic_error("encoder: rank vector size");
  for (size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i] < 1 || (rule.rclasses[i].single && ranks[i] != 1))
      throw std::logic_error("encoder: bad rank for rclass " + rule.rclasses[i].name);
  // reduce_max/min/prod (Node::reducer, an extension): folds, encoded in reduce.cpp; what
  // cannot be encoded soundly is rejected there (here: in assumptions, malformed inits).
  check_folds();

  // Summation-index maps: which side uses them, and how `match` pairs them.
  std::vector<int> lsi, rsi;
  collect_sums(*rule.lhs, lsi);
  collect_sums(*rule.rhs, rsi);
  std::set<int> lset(lsi.begin(), lsi.end()), rset(rsi.begin(), rsi.end());
  std::map<int, int> alias;  // rhs SI -> lhs SI
  si_free.assign(rule.maps.size(), false);
  for (const auto& m : rule.match) {
    if (m.lhs_si < 0 || m.rhs_si < 0) continue;
    if (rule.maps[m.lhs_si].rclass != rule.maps[m.rhs_si].rclass)
      throw Unsupported("match pairs summation indices of different rclasses" + where(m.loc));
    if (!lset.count(m.lhs_si) || !rset.count(m.rhs_si))
      throw Unsupported("match " + rule.maps[m.lhs_si].name + " == " + rule.maps[m.rhs_si].name +
                        ": the left index must be summed on the left side and the right one on the right" +
                        where(m.loc));
    if (alias.count(m.rhs_si) || si_free[m.lhs_si])
      throw Unsupported("a summation index is matched twice" + where(m.loc));
    alias[m.rhs_si] = m.lhs_si;
    si_free[m.lhs_si] = si_free[m.rhs_si] = true;
  }
  for (int id : lset)
    if (rset.count(id)) si_free[id] = true;  // the same sum on both sides: identity match

  map_consts.resize(rule.maps.size());
  for (size_t m = 0; m < rule.maps.size(); ++m) {
    int rc = rule.maps[m].rclass;
    bool is_si = lset.count(static_cast<int>(m)) || rset.count(static_cast<int>(m));
    for (int j = 0; j < ranks[rc]; ++j) {
      Term c;
      if (is_si && !si_free[m]) {
        c = b.zero;  // an unmatched summation index: the sum must be over a unit or empty box
      } else if (alias.count(static_cast<int>(m))) {
        c = Term();  // filled below from the lhs partner
      } else {
        c = s.mkConst(b.Int, rule.maps[m].name + "_" + std::to_string(j));
        axis_const_rclass[c] = rc;
      }
      map_consts[m].push_back(c);
    }
  }
  for (auto [r2, l] : alias) map_consts[r2] = map_consts[l];

  for (const auto& sc : rule.scalars)
    scalar_consts.push_back(s.mkConst(sort_of(b, sc.etype.resolve(dtype)), sc.name));

  // A derived map (`map n : R = EXPR`) is its definition: n is replaced by EXPR on every axis
  // (the precondition n == EXPR then folds to true). This is an equivalence, not a weakening:
  // a model of one query is a model of the other with n := EXPR. It lets index arithmetic that
  // cancels across derived attributes (e.g. XLA's slice/reverse start formula) fold before the
  // solver sees it. Maps defined through a summation index or a cycle keep their constant.
  {
    std::vector<int> state(rule.maps.size(), 0);  // 0 to do, 1 in progress, 2 done
    std::function<void(const IExpr&, std::set<int>&)> refs = [&](const IExpr& e, std::set<int>& out) {
      if (e.kind == IK::Map) out.insert(e.id);
      for (const auto& a : e.args)
        if (a) refs(*a, out);
    };
    std::function<bool(int)> resolve = [&](int id) -> bool {  // true: id is final
      if (state[id] == 2) return true;
      if (state[id] == 1) return false;
      state[id] = 1;
      const auto& md = rule.maps[id];
      bool ok = md.derived && !lset.count(id) && !rset.count(id);
      if (ok) {
        std::set<int> deps;
        refs(*md.derived, deps);
        for (int d : deps)
          if (d == id || lset.count(d) || rset.count(d) || !resolve(d)) ok = false;
      }
      if (ok) {
        std::vector<Term> def;
        for (int j = 0; j < ranks[md.rclass] && ok; ++j) {
          def.push_back(iexpr(*md.derived, j));
          ok = def.back().getSort() == b.Int;
        }
        if (ok) map_consts[id] = def;
      }
      state[id] = 2;
      return true;
    };
    for (size_t m = 0; m < rule.maps.size(); ++m) resolve(static_cast<int>(m));
    iexpr_cache_.clear();
  }

  for (size_t ti = 0; ti < rule.tensors.size(); ++ti) {
    const auto& td = rule.tensors[ti];
    cvc5::Sort es = sort_of(b, td.etype.resolve(dtype));
    std::vector<cvc5::Sort> dom;
    for (const auto& [k, sz] : td.shape)
      for (int j = 0; j < ranks[k.rclass]; ++j) dom.push_back(b.Int);
    Term f = dom.empty() ? s.mkConst(es, td.name) : s.mkConst(s.mkFunctionSort(dom, es), td.name);
    tensor_fns.push_back(f);
    uf_tensor[f] = static_cast<int>(ti);
  }

  auto mark = [&](const Node& n) {
    if (n.op == Op::Literal &&
        (n.lit.kind == Literal::Kind::PosInf || n.lit.kind == Literal::Kind::NegInf))
      inf_ = true;
  };
  scan(*rule.lhs, mark);
  scan(*rule.rhs, mark);
  for (const auto& a : rule.assume) scan(*a.cond, mark);
}

void Encoder::collect_sums(const Node& n, std::vector<int>& out) {
  scan(n, [&](const Node& x) {
    for (const auto& [k, id] : x.sum_index) out.push_back(id);
  });
}

Term Encoder::map_const(int id, int j) {
  if (id < 0 || id >= static_cast<int>(map_consts.size()) || j < 0 ||
      j >= static_cast<int>(map_consts[id].size()))
    throw InternalError("map reference outside a per-axis context");
  return map_consts[id][j];
}

// ---- index expressions ----------------------------------------------------------------------------

Term Encoder::iexpr(const IExpr& e, int j) {
  auto key = std::make_pair(&e, j);
  if (auto it = iexpr_cache_.find(key); it != iexpr_cache_.end()) return it->second;
  auto a = [&](size_t i) { return iexpr(*e.args.at(i), j); };
  Term r;
  switch (e.kind) {
    case IK::Int: r = b.integer(e.value); break;
    case IK::Bool: r = e.value ? b.T : b.F; break;
    case IK::Map:
      if (j < 0) throw InternalError("map reference outside a per-axis context" + where(e.loc));
      r = map_const(e.id, j);
      break;
    case IK::Scalar:
      r = scalar_consts.at(e.id);
      if (is_float(rule.scalars.at(static_cast<size_t>(e.id)).etype.resolve(dtype))) {
        // (f16 and bf16 scalars are bit-vectors too: their bits are not their value)
        throw InternalError("a float scalar in a condition (dtype_problem refuses it)" + where(e.loc));
      } else if (r.getSort().isBitVector()) {  // a fixed-width integer stands for its value (signed or unsigned)
        DType t = rule.scalars.at(static_cast<size_t>(e.id)).etype.resolve(dtype);
        Term nat = b.s.mkTerm(Kind::BITVECTOR_TO_NAT, {r});
        if (is_signed_fixed(t)) {
          uint32_t w = static_cast<uint32_t>(bit_width(t));
          Term msb = b.s.mkTerm(b.s.mkOp(Kind::BITVECTOR_EXTRACT, {w - 1, w - 1}), {r});
          BigInt two_w = mach::max_value(t) * 2 + 2;
          nat = b.ite(b.eq(msb, b.s.mkBitVector(1, 1)), b.sub(nat, b.integer(two_w)), nat);
        }
        r = nat;
      } else if (r.getSort() != b.Int && r.getSort() != b.Real && r.getSort() != b.Bool) {
        throw InternalError("a float scalar in a condition (dtype_problem refuses it)" + where(e.loc));
      }
      break;
    case IK::Add: r = b.add(a(0), a(1)); break;
    case IK::Sub: r = b.sub(a(0), a(1)); break;
    case IK::Mul: r = b.mul(a(0), a(1)); break;
    case IK::Div: {  // Euclidean, total (ir.h: x mod m in [0, |m|))
      Term x = a(0), y = a(1);
      r = (b.is_real(x) || b.is_real(y)) ? b.real_div(x, y) : b.ediv(x, y);
      break;
    }
    case IK::Mod: {
      Term x = a(0), y = a(1);
      if (b.is_real(x) || b.is_real(y)) throw Unsupported("mod on a real value" + where(e.loc));
      r = b.emod(x, y);
      break;
    }
    case IK::Neg: r = b.neg(a(0)); break;
    case IK::Abs: r = b.abs(a(0)); break;
    case IK::Min: r = b.min(a(0), a(1)); break;
    case IK::Max: r = b.max(a(0), a(1)); break;
    case IK::Ite: r = b.ite(a(0), a(1), a(2)); break;
    case IK::Eq: r = b.eq(a(0), a(1)); break;
    case IK::Ne: r = b.not_(b.eq(a(0), a(1))); break;
    case IK::Lt: r = b.lt(a(0), a(1)); break;
    case IK::Le: r = b.le(a(0), a(1)); break;
    case IK::Gt: r = b.lt(a(1), a(0)); break;
    case IK::Ge: r = b.le(a(1), a(0)); break;
    case IK::And: r = b.and_({a(0), a(1)}); break;
    case IK::Or: r = b.or_({a(0), a(1)}); break;
    case IK::Not: r = b.not_(a(0)); break;
    case IK::All:
    case IK::Any: {
      const IExpr& body = *e.args.at(0);
      r = agg(e.rclass, e.kind == IK::All, [&](int jj) { return iexpr(body, jj); });
      break;
    }
  }
  iexpr_cache_[key] = r;
  return r;
}

Term Encoder::size(const Node& n, const AxisKey& k, int j) {
  auto it = n.shape.find(k);
  if (it == n.shape.end() || !it->second) throw InternalError("a shape lacks an axis" + where(n.loc));
  return iexpr(*it->second, j);
}

// ---- tensor-level validity --------------------------------------------------------------------------

Term Encoder::same_sizes(const Node& x, const Node& n) {
  std::vector<Term> cs;
  for (const auto& [k, sz] : x.shape)
    cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.eq(size(x, k, j), size(n, k, j)); }));
  return b.and_(cs);
}

Term Encoder::valid(const Node& n) {
  if (auto it = valid_cache_.find(&n); it != valid_cache_.end()) return it->second;
  std::vector<Term> cs;
  for (const auto& a : n.args) cs.push_back(valid(*a));
  auto attr = [&](const char* name, const AxisKey& k, int j) -> std::optional<Term> {
    auto it = n.attrs.find(name);
    if (it == n.attrs.end()) return std::nullopt;
    auto jt = it->second.find(k);
    if (jt == it->second.end() || !jt->second) return std::nullopt;
    return iexpr(*jt->second, j);
  };
  auto nonneg_sizes = [&](const Node& x) {
    for (const auto& [k, sz] : x.shape)
      cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.le(b.zero, size(x, k, j)); }));
  };
  switch (n.op) {
    case Op::Input: {
      const auto& td = rule.tensors.at(n.input);
      for (const auto& [k, sz] : td.shape)
        cs.push_back(agg(k.rclass, true, [&, &sz = sz](int j) { return b.le(b.zero, iexpr(*sz, j)); }));
      break;
    }
    case Op::Literal:
    case Op::ScalarRef: break;
    case Op::Const:
    case Op::Iota: nonneg_sizes(n); break;
    case Op::Neg: case Op::Abs: case Op::Exp: case Op::Not:
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Rem: case Op::Max: case Op::Min:
    case Op::And: case Op::Or: case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::Select: case Op::Clamp:
      for (const auto& a : n.args)
        if (!scalar_shape(*a)) cs.push_back(same_sizes(*a, n));
      break;
    case Op::Broadcast: {
      const Node& x = *n.args.at(0);
      for (const auto& [k, sz] : n.shape)
        if (!x.shape.count(k))
          cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.le(b.zero, size(n, k, j)); }));
      break;
    }
    case Op::Sum: break;
    case Op::Slice: {
      const Node& x = *n.args.at(0);
      for (const auto& [k, sz] : x.shape)
        cs.push_back(agg(k.rclass, true, [&, &k = k](int j) {
          Term st = attr("start", k, j).value_or(b.zero);
          Term en = attr("end", k, j).value_or(size(x, k, j));
          Term sd = attr("stride", k, j).value_or(b.integer(1));
          return b.and_({b.le(b.zero, st), b.le(st, en), b.le(en, size(x, k, j)), b.lt(b.zero, sd)});
        }));
      break;
    }
    case Op::Pad: {
      const Node& x = *n.args.at(0);
      for (const auto& [k, sz] : x.shape)
        cs.push_back(agg(k.rclass, true, [&, &k = k](int j) {
          Term in = attr("interior", k, j).value_or(b.zero);
          return b.and_({b.le(b.zero, in), b.le(b.zero, size(n, k, j))});
        }));
      break;
    }
    case Op::DynSlice: {
      const Node& x = *n.args.at(0);
      auto it = n.attrs.find("start");
      if (it != n.attrs.end())
        for (const auto& [k, e] : it->second)
          cs.push_back(agg(k.rclass, true, [&, &e = e, &k = k](int j) {
            Term st = iexpr(*e, j);
            Term len = attr("size", k, j).value_or(size(n, k, j));
            return b.and_({b.le(b.zero, st), b.lt(b.zero, len), b.le(b.add(st, len), size(x, k, j))});
          }));
      break;
    }
    case Op::DynUpdate: {
      const Node& x = *n.args.at(0);
      const Node& u = *n.args.at(1);
      for (const auto& [k, sz] : x.shape)
        cs.push_back(agg(k.rclass, true, [&, &k = k](int j) {
          Term st = attr("start", k, j).value_or(b.zero);
          Term us = size(u, k, j);
          return b.and_({b.le(b.zero, st), b.lt(b.zero, us), b.le(b.add(st, us), size(x, k, j))});
        }));
      break;
    }
    case Op::Concat: {
      const AxisKey& ck = n.axes.at(0);
      for (const auto& a : n.args)
        for (const auto& [k, sz] : a->shape)
          if (!(k == ck))
            cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.eq(size(*a, k, j), size(n, k, j)); }));
      break;
    }
    case Op::Relabel:
    case Op::Reverse: break;
    case Op::Dot: {
      const Node& x = *n.args.at(0);
      const Node& y = *n.args.at(1);
      for (const auto& [k, sz] : x.shape)
        if (y.shape.count(k))
          cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.eq(size(x, k, j), size(y, k, j)); }));
      break;
    }
    case Op::Degenerate: {
      const Node& x = *n.args.at(0);
      for (const auto& k : n.axes)
        cs.push_back(agg(k.rclass, true, [&](int j) { return b.eq(size(x, k, j), b.integer(1)); }));
      break;
    }
    case Op::Conv: cs.push_back(conv_valid(n)); break;  // conv.cpp
  }
  Term r = b.and_(cs);
  valid_cache_[&n] = r;
  return r;
}

// ---- elements -----------------------------------------------------------------------------------------

Val Encoder::literal(const Node& n) {
  DType t = n.etype.resolve(dtype);
  const Literal& l = n.lit;
  if (is_machine(t)) {
    auto bits = mach::literal_bits(t, l);  // verify refuses such a dtype first (dtype_problem)
    if (!bits) throw Unsupported(std::string("a literal with no value in ") + to_string(t) + where(n.loc));
    return {machine_const(b.s, t, *bits), {}};
  }
  Term z = sort_for(t);
  switch (l.kind) {
    case Literal::Kind::NaN: throw InternalError("nan outside a float type (dtype_problem)" + where(n.loc));
    case Literal::Kind::Int: return {t == DType::Real ? b.real(l.num) : b.integer(l.num), {}};
    case Literal::Kind::Real:
      if (t != DType::Real && l.den != 1) throw InternalError("a fractional literal in an int context" + where(n.loc));
      return {t == DType::Real ? b.real(l.num, l.den) : b.integer(l.num), {}};
    case Literal::Kind::Bool: return {l.num ? b.T : b.F, {}};
    case Literal::Kind::PosInf: return {z, b.integer(1)};
    case Literal::Kind::NegInf: return {z, b.integer(-1)};
  }
  return {z, {}};
}

namespace {
Term tag_of(const Builder& b, const Val& v) { return v.tag.isNull() ? b.zero : v.tag; }
}  // namespace

// Arithmetic with TensorRight's infinities (semantics/value.cpp): tags only where the rule can
// produce an infinity, so that ordinary rules stay plain arithmetic.
Val Encoder::num_op(Op op, const Val& a, const Val& c, const Node& n, Term& def) {
  (void)def;
  DType t = n.etype.resolve(dtype);
  if (is_machine(t)) return {machine_binary(b, t, op, a.v, c.v), {}};
  bool real = t == DType::Real;
  auto plain = [&](const Term& x, const Term& y) -> Term {
    switch (op) {
      case Op::Add: return b.add(x, y);
      case Op::Sub: return b.sub(x, y);
      case Op::Mul: return b.mul(x, y);
      case Op::Div: return real ? b.real_div(x, y) : b.floor_div(x, y);
      case Op::Rem: return real ? b.real_rem(x, y) : b.trunc_rem(x, y);
      case Op::Max: return b.max(x, y);
      case Op::Min: return b.min(x, y);
      default: throw InternalError(std::string("operator ") + to_string(op) + " on numbers" + where(n.loc));
    }
  };
  if (a.tag.isNull() && c.tag.isNull()) return {plain(a.v, c.v), {}};
  Term ta = tag_of(b, a), tc = tag_of(b, c);
  Term two = b.integer(2), one = b.integer(1), mone = b.integer(-1);
  Term unk = b.or_({b.eq(ta, two), b.eq(tc, two)});
  Term fa = b.eq(ta, b.zero), fc = b.eq(tc, b.zero);
  auto sign = [&](const Term& x) {
    Term z = b.is_real(x) ? b.real(0) : b.zero;
    return b.ite(b.lt(z, x), one, b.ite(b.lt(x, z), mone, b.zero));
  };
  switch (op) {
    case Op::Add:
    case Op::Sub: {
      Term tc2 = op == Op::Sub ? b.ite(b.eq(tc, two), two, b.neg(tc)) : tc;
      Term tag = b.ite(unk, two, b.ite(fa, tc2, b.ite(b.eq(tc2, b.zero), ta, b.ite(b.eq(ta, tc2), ta, two))));
      return {plain(a.v, c.v), tag};
    }
    case Op::Mul: {
      Term tag = b.ite(unk, two,
                       b.ite(b.and_({fa, fc}), b.zero,
                             b.ite(b.and_({b.not_(fa), b.not_(fc)}), b.mul(ta, tc),
                                   b.ite(fa, b.ite(b.eq(sign(a.v), b.zero), two, b.mul(tc, sign(a.v))),
                                         b.ite(b.eq(sign(c.v), b.zero), two, b.mul(ta, sign(c.v)))))));
      return {plain(a.v, c.v), tag};
    }
    case Op::Div:
    case Op::Rem: return {plain(a.v, c.v), b.ite(b.and_({fa, fc}), b.zero, two)};
    case Op::Max:
    case Op::Min: {
      // a >= c in the order -inf < finite < +inf
      Term ge = b.ite(b.eq(ta, tc), b.or_({b.not_(fa), b.le(c.v, a.v)}), b.lt(tc, ta));
      bool mx = op == Op::Max;
      Term pick_a = mx ? ge : b.or_({b.not_(ge), b.and_({b.eq(ta, tc), b.or_({b.not_(fa), b.eq(a.v, c.v)})})});
      return {b.ite(pick_a, a.v, c.v), b.ite(unk, two, b.ite(pick_a, ta, tc))};
    }
    default: throw InternalError(std::string("operator ") + to_string(op) + " with infinities" + where(n.loc));
  }
}

Term Encoder::cmp_op(Op op, const Val& a, const Val& c, Term& def) {
  if (a.v.getSort() == b.Bool) {  // false < true
    Term x = a.v, y = c.v;
    switch (op) {
      case Op::Eq: return b.iff(x, y);
      case Op::Ne: return b.not_(b.iff(x, y));
      case Op::Lt: return b.and_({b.not_(x), y});
      case Op::Le: return b.or_({b.not_(x), y});
      case Op::Gt: return b.and_({x, b.not_(y)});
      case Op::Ge: return b.or_({x, b.not_(y)});
      default: break;
    }
  }
  if (a.tag.isNull() && c.tag.isNull()) {
    switch (op) {
      case Op::Eq: return b.eq(a.v, c.v);
      case Op::Ne: return b.not_(b.eq(a.v, c.v));
      case Op::Lt: return b.lt(a.v, c.v);
      case Op::Le: return b.le(a.v, c.v);
      case Op::Gt: return b.lt(c.v, a.v);
      case Op::Ge: return b.le(c.v, a.v);
      default: break;
    }
  }
  Term ta = tag_of(b, a), tc = tag_of(b, c), two = b.integer(2);
  // A comparison with Unknown is undefined (the evaluator's compare gives nullopt).
  def = b.and_({def, b.not_(b.eq(ta, two)), b.not_(b.eq(tc, two))});
  Term fin = b.eq(ta, b.zero);
  Term eqv = b.and_({b.eq(ta, tc), b.or_({b.not_(fin), b.eq(a.v, c.v)})});
  Term ltv = b.ite(b.eq(ta, tc), b.and_({fin, b.lt(a.v, c.v)}), b.lt(ta, tc));
  switch (op) {
    case Op::Eq: return eqv;
    case Op::Ne: return b.not_(eqv);
    case Op::Lt: return ltv;
    case Op::Le: return b.or_({ltv, eqv});
    case Op::Gt: return b.not_(b.or_({ltv, eqv}));
    case Op::Ge: return b.not_(ltv);
    default: throw InternalError("comparison operator");
  }
}

// The rule's final comparison (semantics values_equal): Unknown equals nothing.
Term Encoder::values_equal(const Val& a, const Val& c) {
  if (a.tag.isNull() && c.tag.isNull()) return b.eq(a.v, c.v);
  Term ta = tag_of(b, a), tc = tag_of(b, c), two = b.integer(2);
  return b.and_({b.not_(b.eq(ta, two)), b.eq(ta, tc), b.or_({b.not_(b.eq(ta, b.zero)), b.eq(a.v, c.v)})});
}

Term Encoder::in_range(const Node& n, const Index& idx) {
  std::vector<Term> cs;
  for (const auto& [k, sz] : n.shape) {
    const auto& iv = idx.at(k);
    cs.push_back(agg(k.rclass, true, [&, &k = k](int j) {
      return b.and_({b.le(b.zero, iv.at(j)), b.lt(iv.at(j), size(n, k, j))});
    }));
  }
  return b.and_(cs);
}

Term Encoder::shapes_equal(const Node& x, const Node& y) {
  std::vector<Term> cs;
  for (const auto& [k, sz] : x.shape)
    cs.push_back(agg(k.rclass, true, [&, &k = k](int j) { return b.eq(size(x, k, j), size(y, k, j)); }));
  return b.and_(cs);
}

Elem Encoder::at(const Node& n, const Index& idx) {
  auto key = std::make_pair(&n, signature_of(idx));
  if (auto it = at_cache_.find(key); it != at_cache_.end()) return it->second;
  Elem e = at_uncached(n, idx);
  // Numbers take the node's sort (an int literal or iota in a real context).
  if (!e.sum && !e.val.v.isNull() && n.etype.resolve(dtype) == DType::Real && e.val.v.getSort() == b.Int)
    e.val.v = b.to_real(e.val.v);
  at_cache_[key] = e;
  return e;
}

// A condition over a summation box, one per-rclass aggregate per SI map (so that each map's range is
// one condition for the rank bound): every axis satisfies `entry` (all), or some axis does (any).
// Axes of the rclass without an entry contribute `missing`.
Term Encoder::box_agg(const std::vector<BoxEntry>& box, bool all, const std::function<Term(const BoxEntry&)>& entry) {
  std::map<int, std::vector<const BoxEntry*>> by;
  for (const auto& e : box) by[e.map].push_back(&e);
  std::vector<Term> cs;
  for (const auto& [m, es] : by) {
    int rc = es.front()->rclass;
    cs.push_back(agg(rc, all, [&, &es = es](int j) {
      for (auto* e : es)
        if (e->j == j) return entry(*e);
      return all ? b.T : b.F;
    }));
  }
  return all ? b.and_(cs) : b.or_(cs);
}

Term Encoder::box_cond(const std::vector<BoxEntry>& box) {
  return box_agg(box, true, [&](const BoxEntry& e) { return b.and_({b.le(b.zero, e.si), b.lt(e.si, e.size)}); });
}

Term Encoder::box_empty(const std::vector<BoxEntry>& box) {
  return box_agg(box, false, [&](const BoxEntry& e) { return b.le(e.size, b.zero); });
}

Term Encoder::box_unit(const std::vector<BoxEntry>& box) {
  return box_agg(box, true, [&](const BoxEntry& e) { return b.eq(e.size, b.integer(1)); });
}

// Operand i of n at idx (a scalar operand at the empty index).
Elem Encoder::operand_at(const Node& n, size_t i, const Index& idx) {
  const Node& x = *n.args.at(i);
  return scalar_shape(x) ? at(x, {}) : at(x, idx);
}

// Attribute `name` of n on axis j of k, or dflt where n does not give it.
Term Encoder::index_attr(const Node& n, const char* name, const AxisKey& k, int j, Term dflt) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return dflt;
  auto jt = it->second.find(k);
  if (jt == it->second.end() || !jt->second) return dflt;
  return iexpr(*jt->second, j);
}

// if c then x else y, elementwise (n: the operator, for the error on a sum).
Elem Encoder::ite_elem(const Node& n, const Term& c, const Elem& x, const Elem& y) {
  if (Builder::is_true(c)) return x;
  if (Builder::is_false(c)) return y;
  no_sum(x, n);
  no_sum(y, n);
  Elem r;
  r.def = b.ite(c, x.def, y.def);
  r.val.v = b.ite(c, x.val.v, y.val.v);
  if (!x.val.tag.isNull() || !y.val.tag.isNull()) r.val.tag = b.ite(c, tag_of(b, x.val), tag_of(b, y.val));
  return r;
}

// e, defined only where d also holds.
Elem Encoder::with_def(Elem e, const Term& d) {
  e.def = b.and_({d, e.def});
  return e;
}

Elem Encoder::at_uncached(const Node& n, const Index& idx) {
  switch (n.op) {
    case Op::Input: return input_at(n, idx);
    case Op::Literal: return {b.T, literal(n), nullptr};
    case Op::ScalarRef: {
      DType t = rule.scalars.at(static_cast<size_t>(n.input)).etype.resolve(dtype);
      Term c = scalar_consts.at(n.input);
      return {b.T, {is_machine(t) ? machine_value(b, t, c) : c, {}}, nullptr};
    }
    case Op::Const: {
      Elem v = at(*n.args.at(0), {});
      if (n.args.size() < 2) return v;
      // A kept operand (ir.h: pow(A, 0)): defined where it is; its value is never read.
      Elem kept = operand_at(n, 1, idx);
      if (kept.sum) throw Unsupported("pow(A, 0) of a reduction cannot be encoded" + where(n.loc));
      return with_def(v, kept.def);
    }
    case Op::Iota: {
      Term i = idx.at(n.axes.at(0)).at(0);
      DType t = n.etype.resolve(dtype);
      if (is_machine(t)) {  // the index modulo 2^w (XLA's iota of a narrow type wraps)
        if (!is_fixed(t)) throw Unsupported(std::string("iota of ") + to_string(t) + " cannot be encoded" + where(n.loc));
        i = b.s.mkTerm(b.s.mkOp(cvc5::Kind::INT_TO_BITVECTOR, {static_cast<uint32_t>(bit_width(t))}), {i});
      }
      return {b.T, {i, {}}, nullptr};
    }
    case Op::Neg:
    case Op::Abs:
    case Op::Exp: return unary_at(n, idx);
    case Op::Not: {
      Elem x = operand_at(n, 0, idx);
      no_sum(x, n);
      return {x.def, {b.not_(x.val.v), {}}, nullptr};
    }
    case Op::Add: case Op::Sub: case Op::Mul: case Op::Div: case Op::Rem: case Op::Max: case Op::Min:
      return arith(n.op, n, operand_at(n, 0, idx), operand_at(n, 1, idx));
    case Op::And:
    case Op::Or: {
      Elem x = operand_at(n, 0, idx), y = operand_at(n, 1, idx);
      no_sum(x, n);
      no_sum(y, n);
      Term v = n.op == Op::And ? b.and_({x.val.v, y.val.v}) : b.or_({x.val.v, y.val.v});
      return {b.and_({x.def, y.def}), {v, {}}, nullptr};
    }
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge: {
      Elem x = operand_at(n, 0, idx), y = operand_at(n, 1, idx);
      no_sum(x, n);
      no_sum(y, n);
      Term def = b.and_({x.def, y.def});
      DType ot = n.args.at(0)->etype.resolve(dtype);
      Term v = is_machine(ot) ? machine_compare(b, ot, n.op, x.val.v, y.val.v) : cmp_op(n.op, x.val, y.val, def);
      return {def, {v, {}}, nullptr};
    }
    case Op::Select: {
      Elem p = operand_at(n, 0, idx);
      no_sum(p, n);
      Elem r = ite_elem(n, p.val.v, operand_at(n, 1, idx), operand_at(n, 2, idx));
      return with_def(r, p.def);
    }
    case Op::Clamp: {
      Elem lo = operand_at(n, 0, idx), x = operand_at(n, 1, idx), hi = operand_at(n, 2, idx);
      no_sum(lo, n);
      no_sum(x, n);
      no_sum(hi, n);
      Term def = b.and_({lo.def, x.def, hi.def});
      Val m = num_op(Op::Max, x.val, lo.val, n, def);
      Val r = num_op(Op::Min, hi.val, m, n, def);
      return {def, r, nullptr};
    }
    case Op::Broadcast: {
      const Node& x = *n.args.at(0);
      return at(x, restrict_to(x, idx));
    }
    case Op::Sum:
    case Op::Dot: return sum_at(n, idx);
    case Op::Slice: {
      const Node& x = *n.args.at(0);
      Index ci;
      for (const auto& [k, sz] : x.shape)
        for (int j = 0; j < ranks[k.rclass]; ++j)
          ci[k].push_back(b.add(index_attr(n, "start", k, j, b.zero), b.mul(index_attr(n, "stride", k, j, b.integer(1)), idx.at(k).at(j))));
      return at(x, ci);
    }
    case Op::Pad: return pad_at(n, idx);
    case Op::DynSlice: {
      const Node& x = *n.args.at(0);
      Index ci;
      for (const auto& [k, sz] : x.shape)
        for (int j = 0; j < ranks[k.rclass]; ++j) ci[k].push_back(b.add(index_attr(n, "start", k, j, b.zero), idx.at(k).at(j)));
      return at(x, ci);
    }
    case Op::DynUpdate: return dynupdate_at(n, idx);
    case Op::Concat: return concat_at(n, idx);
    case Op::Relabel: {
      const Node& x = *n.args.at(0);
      Index ci;
      for (const auto& [k, sz] : x.shape) {
        auto it = n.relabel.find(k);
        ci[k] = idx.at(it == n.relabel.end() ? k : it->second);
      }
      return at(x, ci);
    }
    case Op::Reverse: {
      const Node& x = *n.args.at(0);
      Index ci = restrict_to(x, idx);
      for (const auto& k : n.axes)
        for (int j = 0; j < ranks[k.rclass]; ++j)
          ci[k][j] = b.sub(b.sub(size(x, k, j), b.integer(1)), idx.at(k).at(j));
      return at(x, ci);
    }
    case Op::Degenerate: {
      const Node& x = *n.args.at(0);
      Index ci;
      for (const auto& [k, sz] : x.shape) {
        if (std::find(n.axes.begin(), n.axes.end(), k) != n.axes.end())
          ci[k] = std::vector<Term>(ranks[k.rclass], b.zero);
        else
          ci[k] = idx.at(k);
      }
      return at(x, ci);
    }
    case Op::Conv: return conv_at(n, idx);  // conv.cpp
  }
  throw InternalError("unknown operator");
}

Elem Encoder::input_at(const Node& n, const Index& idx) {
  const auto& td = rule.tensors.at(n.input);
  Term f = tensor_fns.at(n.input);
  std::vector<Term> args;
  for (const auto& [k, sz] : td.shape)
    for (const auto& x : idx.at(k)) args.push_back(x);
  Term app;
  if (args.empty()) {
    app = f;
  } else {
    std::vector<Term> ch{f};
    ch.insert(ch.end(), args.begin(), args.end());
    app = b.s.mkTerm(Kind::APPLY_UF, ch);
  }
  accesses.push_back({n.input, app, args});
  DType t = td.etype.resolve(dtype);
  return {b.T, {is_machine(t) ? machine_value(b, t, app) : app, {}}, nullptr};
}

Elem Encoder::unary_at(const Node& n, const Index& idx) {
  DType t = n.etype.resolve(dtype);
  Elem x = operand_at(n, 0, idx);
  if (x.sum) {
    no_float_sum(x, n);
    if (n.op != Op::Neg || !x.sum->f.tag.isNull() || is_fold(x)) no_sum(x, n);
    auto s = std::make_shared<SumVal>(*x.sum);
    s->f.v = b.neg(s->f.v);
    if (!s->init.v.isNull()) s->init.v = b.neg(s->init.v);  // -(c + Σf) = -c + Σ -f
    return {x.def, {}, s};
  }
  Val v = x.val;
  Term tg = v.tag;
  Val r;
  if (is_machine(t)) {
    if (n.op == Op::Exp) return {x.def, {machine_exp(t, v.v), {}}, nullptr};
    return {x.def, {machine_unary(b, t, n.op, v.v), {}}, nullptr};
  }
  if (n.op == Op::Neg) {
    r.v = b.neg(v.v);
    if (!tg.isNull()) r.tag = b.ite(b.eq(tg, b.integer(2)), tg, b.neg(tg));
  } else if (n.op == Op::Abs) {
    r.v = b.abs(v.v);
    if (!tg.isNull()) r.tag = b.ite(b.eq(tg, b.zero), b.zero, b.ite(b.eq(tg, b.integer(2)), tg, b.integer(1)));
  } else {
    if (t != DType::Real) throw InternalError("exp on a non-real value" + where(n.loc));
    Term e = b.exp(v.v);
    if (tg.isNull()) {
      r.v = e;
    } else {  // exp(-inf) = 0, exp(+inf) = +inf, exp(Unknown) = Unknown
      Term mi = b.eq(tg, b.integer(-1));
      r.v = b.ite(mi, b.real(0), e);
      r.tag = b.ite(mi, b.zero, tg);
    }
  }
  return {x.def, r, nullptr};
}

// exp at a float type t (docs/machine-types.md): an uninterpreted function of t, the same at every
// use, about which nothing else is assumed, so a proof holds for every implementation of exp (XLA's
// backends differ). Its value is a symbol of t's sort, read like an input element (f16, bf16: a
// bit pattern, widened).
Term Encoder::machine_exp(DType t, const Term& x) {
  if (!is_float(t)) throw InternalError(std::string("exp at ") + to_string(t));
  auto it = exp_fns.find(t);
  if (it == exp_fns.end())
    it = exp_fns.emplace(t, b.s.mkConst(b.s.mkFunctionSort({x.getSort()}, machine_sort(b.s, t)), "exp_" + std::string(to_string(t)))).first;
  Term app = b.s.mkTerm(Kind::APPLY_UF, {it->second, x});
  exp_apps.push_back({t, app});
  return machine_value(b, t, app);
}

// Reductions over machine types (docs/machine-types.md, "Reductions"). Fixed-width integers: the
// Int encoding's sums, modulo 2^w, and its max/min/prod folds, whose reasoning (commutativity,
// associativity, idempotence of max and min on a total order, the ring identities of *) holds
// for wrapping integers too. Floats: a plain sum (XLA's Reduce with an add computation), whose
// order XLA does not fix, is compared element by element with the other side's (refinement up to
// the order of the reduction); dot and conv are refused, since XLA leaves their precision
// (accumulation type, TF32) to the backend; folds are refused (XLA's max is not commutative at
// +-0, and * does not associate under rounding).
void Encoder::machine_reduction(const Node& n) {
  DType t = n.etype.resolve(dtype);
  if (!is_machine(t)) return;
  std::string what = n.op == Op::Sum ? to_string(n.reducer) : to_string(n.op);
  if (n.op == Op::Sum && n.reducer != Reducer::Sum && is_float(t))
    throw Unsupported(what + " over " + to_string(t) + " cannot be encoded yet" + where(n.loc));
  if (is_float(t) && n.op != Op::Sum)
    throw Unsupported(what + " over " + to_string(t) + " is not checked: XLA leaves its accumulation precision to the backend" + where(n.loc));
}

// A float sum may only be compared element by element: refuse arithmetic that rearranges it.
void Encoder::no_float_sum(const Elem& e, const Node& n) const {
  if (e.sum && is_float(n.etype.resolve(dtype)))
    throw Unsupported(std::string("a float sum under ") + to_string(n.op) + " cannot be encoded: rounding depends on the grouping" + where(n.loc));
}

Elem Encoder::sum_at(const Node& n, const Index& idx) {
  machine_reduction(n);
  if (n.op == Op::Sum && n.reducer != Reducer::Sum) return fold_at(n, idx);  // reduce.cpp
  // Summation-index constants for the contracted keys; the sum is kept as its summand.
  std::vector<BoxEntry> box;
  Index full = idx;
  const Node& x = *n.args.at(0);
  auto sig = signature_of(idx);
  for (const auto& [k, mid] : n.sum_index) {
    auto [it, fresh] = sum_use_.emplace(mid, sig);
    if (!fresh && it->second != sig)
      throw Unsupported("summation index " + rule.maps[mid].name +
                        " is used by a sum read at two different indices" + where(n.loc));
    std::vector<Term> sis;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      Term si = map_const(mid, j);
      sis.push_back(si);
      // Pair by the lhs partner of a matched index (the constants are shared).
      int canon = mid;
      for (const auto& m : rule.match)
        if (m.rhs_si == mid) canon = m.lhs_si;
      box.push_back({canon, k.rclass, j, si, size(x, k, j)});
    }
    full[k] = sis;
  }
  Elem body;
  if (n.op == Op::Sum) {
    body = reduced_element(n, full, box);  // reindex.cpp
  } else {
    const Node& y = *n.args.at(1);
    body = arith(Op::Mul, n, at(x, restrict_to(x, full)), at(y, restrict_to(y, full)));
  }
  if (box.empty()) return body;
  if (is_fold(body)) throw Unsupported("a sum of max/min/prod reductions cannot be encoded" + where(n.loc));
  auto s = std::make_shared<SumVal>();
  if (body.sum) {
    no_float_sum(body, n);  // a sum of sums is not one flat float sum
    if (!body.sum->f.tag.isNull()) throw Unsupported("a sum of infinities cannot be encoded" + where(n.loc));
    if (!body.sum->init.v.isNull())
      throw Unsupported("a sum of a sum plus a value cannot be encoded" + where(n.loc));
    s->f = body.sum->f;
    s->box = box;
    s->box.insert(s->box.end(), body.sum->box.begin(), body.sum->box.end());
    s->defs.push_back({body.def, box});
    for (auto d : body.sum->defs) {
      d.second.insert(d.second.end(), box.begin(), box.end());
      s->defs.push_back(d);
    }
  } else {
    if (!body.val.tag.isNull()) throw Unsupported("a sum of infinities cannot be encoded" + where(n.loc));
    s->f = body.val;
    s->box = box;
    s->defs.push_back({body.def, box});
  }
  return {b.T, {}, s};
}

Elem Encoder::pad_at(const Node& n, const Index& idx) {
  const Node& x = *n.args.at(0);
  Index ci;
  std::vector<Term> padded;
  for (const auto& [k, sz] : x.shape) {
    std::vector<Term> rel, step;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      rel.push_back(b.sub(idx.at(k).at(j), index_attr(n, "low", k, j, b.zero)));
      step.push_back(b.add(index_attr(n, "interior", k, j, b.zero), b.integer(1)));
      // interior >= 0 is part of validity, so the divisor is positive wherever it matters.
      ci[k].push_back(b.ediv(rel.back(), step.back()));
    }
    padded.push_back(agg(k.rclass, false, [&, &k = k](int j) {
      Term s = size(x, k, j);
      Term in = index_attr(n, "interior", k, j, b.zero);
      Term inner = b.add(s, b.mul(b.max(b.zero, b.sub(s, b.integer(1))), in));
      return b.or_({b.lt(rel[j], b.zero), b.le(inner, rel[j]), b.not_(b.eq(b.emod(rel[j], step[j]), b.zero))});
    }));
  }
  Term inpad = b.or_(padded);
  if (Builder::is_true(inpad)) return at(*n.args.at(1), {});
  if (Builder::is_false(inpad)) return at(x, ci);
  return ite_elem(n, inpad, at(*n.args.at(1), {}), at(x, ci));
}

Elem Encoder::dynupdate_at(const Node& n, const Index& idx) {
  const Node& x = *n.args.at(0);
  const Node& u = *n.args.at(1);
  Index ui;
  std::vector<Term> win;
  for (const auto& [k, sz] : x.shape) {
    for (int j = 0; j < ranks[k.rclass]; ++j) ui[k].push_back(b.sub(idx.at(k).at(j), index_attr(n, "start", k, j, b.zero)));
    win.push_back(agg(k.rclass, true, [&, &k = k](int j) {
      Term st = index_attr(n, "start", k, j, b.zero);
      Term i = idx.at(k).at(j);
      return b.and_({b.le(st, i), b.lt(i, b.add(st, size(u, k, j)))});
    }));
  }
  return ite_elem(n, b.and_(win), at(u, ui), at(x, idx));
}

Elem Encoder::concat_at(const Node& n, const Index& idx) {
  const AxisKey& ck = n.axes.at(0);
  if (ranks[ck.rclass] != 1) throw Unsupported("concat along an rclass with more than one axis" + where(n.loc));
  Term i = idx.at(ck).at(0);
  // Right-nested: x1 if i < s1, else x2 at i - s1 if i - s1 < s2, ...
  std::vector<Term> offs{b.zero};
  for (size_t a = 0; a + 1 < n.args.size(); ++a) offs.push_back(b.add(offs.back(), size(*n.args[a], ck, 0)));
  auto shifted = [&](size_t a) {
    Index ci = idx;
    ci[ck] = {b.sub(i, offs[a])};
    return at(*n.args[a], ci);
  };
  Elem r = shifted(n.args.size() - 1);
  for (size_t a = n.args.size() - 1; a-- > 0;) r = ite_elem(n, b.lt(i, offs[a + 1]), shifted(a), r);
  return r;
}

// Elementwise arithmetic; with sums, only products (and real division by a plain value)
// distribute: (Σ f)(Σ g) = Σ f g over the product box, p Σ f = Σ p f, (Σ f) / p = Σ f / p.
Elem Encoder::arith(Op op, const Node& n, const Elem& x, const Elem& y) {
  DType t = n.etype.resolve(dtype);
  Term def = b.and_({x.def, y.def});
  no_float_sum(x, n);
  no_float_sum(y, n);
  if (is_fold(x) || is_fold(y)) return fold_arith(op, n, x, y);  // reduce.cpp
  if ((x.sum && !y.sum) || (y.sum && !x.sum)) return offset_arith(op, n, x, y);
  if (x.sum || y.sum) {
    if (!x.sum->init.v.isNull() || !y.sum->init.v.isNull())
      throw Unsupported(std::string("a sum plus a value under ") + to_string(op) + " cannot be encoded" + where(n.loc));
    bool ok = op == Op::Mul || (op == Op::Div && t == DType::Real && !y.sum);
    if (!ok || (x.sum && !x.sum->f.tag.isNull()) || (y.sum && !y.sum->f.tag.isNull()) ||
        (!x.sum && !x.val.tag.isNull()) || (!y.sum && !y.val.tag.isNull()))
      throw Unsupported(std::string("a sum under ") + to_string(op) + " cannot be encoded" + where(n.loc));
    auto s = std::make_shared<SumVal>();
    Term fx = x.sum ? x.sum->f.v : x.val.v;
    Term fy = y.sum ? y.sum->f.v : y.val.v;
    if (x.sum) {
      s->box = x.sum->box;
      s->defs = x.sum->defs;
    }
    if (y.sum) {
      for (const auto& e : y.sum->box)
        for (const auto& f : s->box)
          if (e.map == f.map) throw Unsupported("a product of a sum with itself cannot be encoded" + where(n.loc));
      s->box.insert(s->box.end(), y.sum->box.begin(), y.sum->box.end());
      s->defs.insert(s->defs.end(), y.sum->defs.begin(), y.sum->defs.end());
    }
    s->f.v = op == Op::Mul ? b.mul(fx, fy) : b.real_div(fx, fy);
    return {def, {}, s};
  }
  Val v = num_op(op, x.val, y.val, n, def);
  return {def, v, nullptr};
}

// A sum (possibly with an offset c, SumVal::init) and a plain value p: the sum with another offset,
// by identities of + and * (and real division, x / p = x * inv(p)) over numbers:
//   (c + Σ f) + p = (c + p) + Σ f        p + (c + Σ f) = (p + c) + Σ f
//   (c + Σ f) - p = (c - p) + Σ f        p - (c + Σ f) = (p - c) + Σ (-f)
//   (c + Σ f) * p = c*p + Σ f*p          p * (c + Σ f) = p*c + Σ p*f      (c + Σ f) / p = c/p + Σ f/p
// with c = 0 when there is no offset. Infinite values are refused (inf - inf is not 0).
Elem Encoder::offset_arith(Op op, const Node& n, const Elem& x, const Elem& y) {
  DType t = n.etype.resolve(dtype);
  Term def = b.and_({x.def, y.def});
  const Elem& se = x.sum ? x : y;
  const Elem& pe = x.sum ? y : x;
  const SumVal& in = *se.sum;
  bool sum_first = x.sum != nullptr;
  bool ok = op == Op::Add || op == Op::Sub || op == Op::Mul || (op == Op::Div && t == DType::Real && sum_first);
  if (!ok || !in.f.tag.isNull() || !pe.val.tag.isNull() || (!in.init.v.isNull() && !in.init.tag.isNull()))
    throw Unsupported(std::string("a sum under ") + to_string(op) + " cannot be encoded" + where(n.loc));
  auto s = std::make_shared<SumVal>(in);
  Term p = pe.val.v;
  Term z = sort_for(t);
  Term c = in.init.v.isNull() ? z : in.init.v;
  bool none = in.init.v.isNull();  // no offset: a product or quotient keeps none
  Term c2;
  switch (op) {
    case Op::Add: c2 = sum_first ? b.add(c, p) : b.add(p, c); break;
    case Op::Sub:
      if (sum_first) {
        c2 = b.sub(c, p);
      } else {
        c2 = b.sub(p, c);
        s->f.v = b.neg(in.f.v);
      }
      break;
    case Op::Mul:
      c2 = sum_first ? b.mul(c, p) : b.mul(p, c);
      s->f.v = sum_first ? b.mul(in.f.v, p) : b.mul(p, in.f.v);
      break;
    default:  // real division by a plain value
      c2 = b.real_div(c, p);
      s->f.v = b.real_div(in.f.v, p);
      break;
  }
  s->init = none && (op == Op::Mul || op == Op::Div) ? Val{} : Val{c2, {}};
  return {def, {}, s};
}

void Encoder::collect_accesses(const Term& t, std::unordered_set<Term>& seen) {
  if (!seen.insert(t).second) return;
  for (size_t i = 0; i < t.getNumChildren(); ++i) collect_accesses(t[i], seen);
}

// `assume` facts hold at every index of their shape wherever defined. We instantiate them at the
// indices where the query reads an input tensor the assumption mentions (docs/verifier.md).
std::vector<Term> Encoder::assumption_instances() {
  std::vector<Term> out;
  std::vector<Access> acc = accesses;  // instances add accesses; one round only
  std::set<std::pair<size_t, std::vector<uint64_t>>> done;
  for (size_t ai = 0; ai < rule.assume.size(); ++ai) {
    const Node& a = *rule.assume[ai].cond;
    std::set<int> mentioned;
    scan(a, [&](const Node& x) {
      if (x.op == Op::Input) mentioned.insert(x.input);
    });
    Term va = valid(a);
    for (const auto& ac : acc) {
      if (!mentioned.count(ac.tensor)) continue;
      const auto& td = rule.tensors.at(ac.tensor);
      Index ti;
      size_t p = 0;
      for (const auto& [k, sz] : td.shape)
        for (int j = 0; j < ranks[k.rclass]; ++j) ti[k].push_back(ac.args.at(p++));
      Index ai_idx;
      bool ok = true;
      for (const auto& [k, sz] : a.shape) {
        if (!ti.count(k)) {
          ok = false;
          break;
        }
        ai_idx[k] = ti[k];
      }
      if (!ok || !done.insert({ai, signature_of(ai_idx)}).second) continue;
      Elem e = at(a, ai_idx);
      if (e.sum) throw Unsupported("a sum in an assumption" + where(rule.assume[ai].loc));
      if (!e.val.tag.isNull()) throw Unsupported("an assumption over infinities" + where(rule.assume[ai].loc));
      out.push_back(b.implies(b.and_({va, in_range(a, ai_idx), e.def}), e.val.v));
    }
  }
  return out;
}

// True facts about the real exponential (and real inverses) that cvc5's incremental linearisation does not derive
// by itself: exp(a) * exp(b) = exp(a + b) for every pair of exponentials in the query, and
// exp(a) > 0. Adding true facts to the hypotheses is sound.
std::vector<Term> Encoder::exp_lemmas(const std::vector<Term>& roots) {
  std::vector<Term> exps;
  std::unordered_set<Term> seen;
  std::function<void(const Term&)> walk = [&](const Term& t) {
    if (!seen.insert(t).second) return;
    if (t.getKind() == Kind::EXPONENTIAL) exps.push_back(t);
    for (size_t i = 0; i < t.getNumChildren(); ++i) walk(t[i]);
  };
  for (const auto& r : roots)
    if (!r.isNull()) walk(r);
  std::vector<Term> out;
  // Real inverses inv(y) = ite(y = 0, 0, 1/y): y * inv(y) = 1 for y != 0, and
  // inv(a) * inv(b) = inv(a * b) (also when a or b is 0).
  std::vector<Term> invs;
  for (const auto& t : seen)
    if (t.getKind() == Kind::DIVISION && t[0].getKind() == Kind::CONST_RATIONAL && t[0] == b.real(1)) invs.push_back(t[1]);
  std::sort(invs.begin(), invs.end());
  if (invs.size() <= 6)
    for (size_t i = 0; i < invs.size(); ++i) {
      Term y = invs[i];
      out.push_back(b.implies(b.not_(b.eq(y, b.real(0))), b.eq(b.mul(y, b.inverse(y)), b.real(1))));
      for (size_t j = i; j < invs.size(); ++j)
        out.push_back(b.eq(b.mul(b.inverse(y), b.inverse(invs[j])), b.inverse(b.mul(y, invs[j]))));
    }
  if (exps.size() > 8) return out;
  for (size_t i = 0; i < exps.size(); ++i) {
    out.push_back(b.lt(b.real(0), exps[i]));
    for (size_t j = i; j < exps.size(); ++j) {
      Term sum = b.s.mkTerm(Kind::EXPONENTIAL, {b.add(exps[i][0], exps[j][0])});
      out.push_back(b.eq(b.mul(exps[i], exps[j]), sum));
    }
  }
  return out;
}

namespace {
void conjuncts(const Term& t, std::unordered_set<Term>& out) {
  if (!out.insert(t).second) return;
  if (t.getKind() == Kind::AND)
    for (size_t i = 0; i < t.getNumChildren(); ++i) conjuncts(t[i], out);
}
}  // namespace

Query Encoder::build() {
  const Node& L = *rule.lhs;
  const Node& R = *rule.rhs;
  {
    std::set<AxisKey> lk, rk;
    for (const auto& [k, v] : L.shape) lk.insert(k);
    for (const auto& [k, v] : R.shape) rk.insert(k);
    if (lk != rk) throw InternalError("the two sides have different axes (the checker rejects this)");
  }
  std::vector<Term> pre;
  for (const auto& p : rule.pre) pre.push_back(iexpr(*p.cond, -1));

  lhs_valid = valid(L);
  rhs_valid = valid(R);
  for (const auto& [k, sz] : L.shape)
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      std::string nm = "i_" + rule.rclasses[k.rclass].name + (k.label.empty() ? "" : "@" + k.label) + "_" + std::to_string(j);
      Term c = b.s.mkConst(b.Int, nm);
      axis_const_rclass[c] = k.rclass;
      index[k].push_back(c);
    }
  Elem le = at(L, index);
  Elem re = at(R, index);
  Term in_range_l = in_range(L, index);
  Term shape_eq = shapes_equal(L, R);

  Query q;
  Term lhs_access, eq_goal;
  if (is_fold(le) || is_fold(re)) {
    q.has_sums = true;  // the match and the unmatched-index goals are incomplete, as for sums
    fold_compare(le, re, in_range_l, lhs_access, eq_goal);  // reduce.cpp
    q.cex_hints = fold_hints_;
  } else if (!le.sum && !re.sum) {
    lhs_val = le.val;
    rhs_val = re.val;
    lhs_access = b.and_({in_range_l, le.def});
    eq_goal = b.and_({re.def, values_equal(le.val, re.val)});
  } else {
    q.has_sums = true;
    auto as_sum = [&](const Elem& e) {
      if (e.sum) return *e.sum;
      SumVal s;
      s.f = e.val;
      return s;
    };
    SumVal sl = as_sum(le), sr = as_sum(re);
    if (!sl.f.tag.isNull() || !sr.f.tag.isNull()) throw Unsupported("a sum compared with an infinite value");
    auto split = [&](const SumVal& s, std::vector<BoxEntry>& paired, std::vector<BoxEntry>& unpaired) {
      for (const auto& e : s.box) (si_free[e.map] ? paired : unpaired).push_back(e);
    };
    std::vector<BoxEntry> pl, ul, pr, ur;
    split(sl, pl, ul);
    split(sr, pr, ur);
    std::set<int> ml, mr;
    for (const auto& e : pl) ml.insert(e.map);
    for (const auto& e : pr) mr.insert(e.map);
    if (ml != mr) throw Unsupported("a matched summation index is summed on one side only");
    Term dl = box_cond(pl), dr = box_cond(pr);
    // The match is the identity on the shared constants, hence injective both ways; it is a
    // bijection between the two ranges iff they are the same set of points.
    Term bij = b.iff(dl, dr);
    // Unmatched indices are 0: their box must be empty (the sum is 0) or a single point.
    Term el = box_empty(ul), er = box_empty(ur);
    Term unit_l = b.or_({el, box_unit(ul)}), unit_r = b.or_({er, box_unit(ur)});
    Term z = sort_for(dtype);
    Val vl{b.ite(el, z, sl.f.v), {}}, vr{b.ite(er, z, sr.f.v), {}};
    // Offsets (c + Σ f): without matched indices each side's value is exactly c + (its unit or
    // empty sum); with matched ones, equal offsets and equal sums are sufficient.
    Term offsets_equal = b.T;
    if (pl.empty() && is_float(dtype)) {
      // A float sum over a single point is +0 + f, not f (it is +0 for f = -0); over no point, +0.
      if (le.sum) vl.v = b.ite(el, z, machine_binary(b, dtype, Op::Add, z, sl.f.v));
      if (re.sum) vr.v = b.ite(er, z, machine_binary(b, dtype, Op::Add, z, sr.f.v));
    } else if (pl.empty()) {
      if (!sl.init.v.isNull()) vl.v = b.add(sl.init.v, vl.v);
      if (!sr.init.v.isNull()) vr.v = b.add(sr.init.v, vr.v);
    } else if (!sl.init.v.isNull() || !sr.init.v.isNull()) {
      offsets_equal = values_equal(Val{sl.init.v.isNull() ? z : sl.init.v, {}}, Val{sr.init.v.isNull() ? z : sr.init.v, {}});
    }
    lhs_val = vl;
    rhs_val = vr;
    std::vector<Term> ldefs{in_range_l, le.def}, rdefs{re.def};
    for (const auto& [c, sub] : sl.defs) ldefs.push_back(b.implies(box_cond(sub), c));
    for (const auto& [c, sub] : sr.defs) rdefs.push_back(b.implies(box_cond(sub), c));
    lhs_access = b.and_(ldefs);
    eq_goal = b.and_({bij, unit_l, unit_r, offsets_equal, b.implies(dl, b.and_({b.and_(rdefs), values_equal(vl, vr)}))});
  }
  lhs_def = lhs_access;
  rhs_def = eq_goal;

  std::vector<Term> hyp = pre;
  hyp.push_back(lhs_valid);
  std::vector<Term> lemmas = exp_lemmas({le.val.v, re.val.v, lhs_access, eq_goal});
  for (auto& t : assumption_instances()) hyp.push_back(t);
  Term hyp_core = b.and_(hyp);
  for (auto& t : b.rem_lemmas()) lemmas.push_back(t);
  for (auto& t : b.nested_div_lemmas()) {
    lemmas.push_back(t);
    q.theorems.push_back(t);
  }
  hyp.insert(hyp.end(), lemmas.begin(), lemmas.end());
  q.hyp = b.and_(hyp);

  // Goal parts already among the hypotheses (the same validity subterm on both sides) are dropped.
  std::unordered_set<Term> known;
  conjuncts(q.hyp, known);
  std::function<void(const Term&, std::vector<Term>&)> split_goal = [&](const Term& t, std::vector<Term>& out) {
    if (known.count(t) || Builder::is_true(t)) return;
    if (t.getKind() == Kind::AND && !registry.count(t)) {
      for (size_t i = 0; i < t.getNumChildren(); ++i) split_goal(t[i], out);
      return;
    }
    out.push_back(t);
  };
  std::vector<Term> gs;
  split_goal(rhs_valid, gs);
  split_goal(shape_eq, gs);
  q.shape_goals = gs;
  gs.push_back(eq_goal);
  q.goals = gs;
  q.lhs_access = lhs_access;
  q.eq_goal = eq_goal;
  // Refinement as in the evaluator's check_at, in two queries: wherever the lhs is valid, the rhs
  // is valid and has the same shape, also when the lhs has no elements (shape_query, no index);
  // at an index where the lhs is defined, the rhs is valid, has the same shape, is defined and
  // equal (query). Two queries rather than one disjunction: cvc5 decides each much faster.
  Term shape_all = b.and_(q.shape_goals);
  if (!Builder::is_true(shape_all)) q.shape_query = b.and_({hyp_core, b.not_(shape_all)});
  q.query = b.and_({q.hyp, lhs_access, b.not_(b.and_(q.goals))});
  q.vacuity = b.and_({hyp_core, lhs_access});  // without the exp facts: cheaper models
  return q;
}

}  // namespace tr::enc
