// reduce_max / reduce_min / reduce_prod: folds of a commutative, associative operation with an
// init value (docs/verifier.md, "Max, min and product reductions").
//
// A fold is kept like a sum: its element f at summation-index constants over a box, plus the init
// value c (SumVal with red != Sum). Matched summation indices share constants with the other side
// (as for sums); an unmatched one gets a FRESH constant u (a sum uses 0), universally quantified
// like a matched one, with the hypothesis "the unmatched box is non-empty => u lies in it". What
// can be done to a fold is deliberately small, so that a fold's value never reaches a definedness
// condition (only the final comparison):
//   * max/min/* with a plain operand p, when the operation is the fold's own: p goes into the init,
//     op(p, fold(c, S)) = fold(op(p, c), S);
//   * a fold of a fold of the same operation: flattened into one fold over the product box;
//   * index-only operators (broadcast, relabel, degenerate, ...) read it at another index;
//   * everything else is Unsupported (the callers' no_sum checks, or here).
#include <functional>
#include <set>
#include <unordered_set>

#include "libtensorright/encode/encode.h"

namespace tr::enc {

namespace {

Term tag_or_zero(const Builder& b, const Val& v) { return v.tag.isNull() ? b.zero : v.tag; }

// Whether t mentions one of the constants in cs.
bool mentions_any(const Term& t, const std::unordered_set<Term>& cs) {
  if (t.isNull() || cs.empty()) return false;
  std::unordered_set<Term> seen;
  std::function<bool(const Term&)> walk = [&](const Term& x) {
    if (!seen.insert(x).second) return false;
    if (cs.count(x)) return true;
    for (size_t i = 0; i < x.getNumChildren(); ++i)
      if (walk(x[i])) return true;
    return false;
  };
  return walk(t);
}

const char* op_name(Reducer r) {
  switch (r) {
    case Reducer::Max: return "reduce_max";
    case Reducer::Min: return "reduce_min";
    case Reducer::Prod: return "reduce_prod";
    case Reducer::Sum: break;
  }
  return "sum";
}

// The elementwise operator of a fold.
Op fold_op(Reducer r) { return r == Reducer::Max ? Op::Max : r == Reducer::Min ? Op::Min : Op::Mul; }

bool same_val(const Val& a, const Val& c) {
  return a.v == c.v && a.tag.isNull() == c.tag.isNull() && (a.tag.isNull() || a.tag == c.tag);
}

// The identity of the operation: -inf for max, +inf for min, exactly 1 (finite) for *.
bool is_identity(const Builder& b, Reducer r, const Val& c) {
  auto tag = c.tag.isNull() ? std::optional<int64_t>(0) : Builder::int_value(c.tag);
  if (r == Reducer::Max) return tag == -1;
  if (r == Reducer::Min) return tag == 1;
  return tag == 0 && (c.v == b.integer(1) || c.v == b.real(1));
}

}  // namespace

// Forms rejected up front. Sums and folds may both occur in a rule, but never inside each other
// (fold_at and the sum code reject that) and never compared with each other (fold_compare).
void Encoder::check_folds() {
  std::set<std::pair<const Node*, bool>> seen;  // the rule is a DAG: each node once
  std::function<void(const Node&, bool)> scan = [&](const Node& n, bool in_assume) {
    if (!seen.insert({&n, in_assume}).second) return;
    if (n.op == Op::Sum && n.reducer != Reducer::Sum) {
      if (in_assume)
        throw Unsupported(std::string(op_name(n.reducer)) + " in an assumption cannot be encoded" + where(n.loc));
      if (n.args.size() != 2 || !n.args[1]->shape.empty())
        throw InternalError(std::string(op_name(n.reducer)) + " without a scalar init value" + where(n.loc));
    }
    for (const auto& a : n.args)
      if (a) scan(*a, in_assume);
  };
  scan(*rule.lhs, false);
  scan(*rule.rhs, false);
  for (const auto& a : rule.assume) scan(*a.cond, true);
}

// The fold at an index: summation-index constants for the reduced keys (shared when matched, fresh
// otherwise), the element there, and the init value.
Elem Encoder::fold_at(const Node& n, const Index& idx) {
  const Node& x = *n.args.at(0);
  const std::string what = op_name(n.reducer);
  Elem c = at(*n.args.at(1), {});
  if (c.sum) throw Unsupported(what + ": a reduction in the init value cannot be encoded" + where(n.loc));

  std::vector<BoxEntry> box;
  std::unordered_set<Term> box_consts;
  Index full = idx;
  auto sig = signature_of(idx);
  for (const auto& [k, mid] : n.sum_index) {
    // Matched constants are shared: the same reduction read at two indices would share them.
    auto [it, fresh] = sum_use_.emplace(mid, sig);
    if (!fresh && it->second != sig)
      throw Unsupported("summation index " + rule.maps[mid].name + " is used by a " + what +
                        " read at two different indices" + where(n.loc));
    int canon = mid;
    for (const auto& m : rule.match)
      if (m.rhs_si == mid) canon = m.lhs_si;
    std::vector<Term> sis;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      Term si;
      if (si_free[mid]) {
        si = map_const(mid, j);
      } else {
        si = b.s.mkConst(b.Int, rule.maps[mid].name + "_" + std::to_string(j) + "_u" + std::to_string(fold_fresh_++));
        axis_const_rclass[si] = k.rclass;
      }
      sis.push_back(si);
      box_consts.insert(si);
      box.push_back({canon, k.rclass, j, si, size(x, k, j)});
    }
    full[k] = sis;
  }

  Elem body = reduced_element(n, full, box);  // reindex.cpp
  auto s = std::make_shared<SumVal>();
  s->red = n.reducer;
  s->node = &n;
  s->init = c.val;
  s->box = box;
  s->defs.push_back({body.def, box});
  if (!body.sum) {
    s->f = body.val;
    return {c.def, {}, s};
  }
  const SumVal& in = *body.sum;
  if (in.red == Reducer::Sum) throw Unsupported(what + " of a sum cannot be encoded" + where(n.loc));
  if (in.red != n.reducer)
    throw Unsupported(what + " of a " + op_name(in.red) + " cannot be encoded" + where(n.loc));
  // fold(c, {fold(ci, S_j) : j in J}) with the inner init ci independent of j:
  //   max/min (idempotent): = fold(J empty ? c : c op ci, union of S_j)
  //   *: = c * ci^|J| * prod(union S_j): flat with init c when ci = 1, or with c * ci when |J| <= 1
  //      (then a goal: J is empty or a single point).
  if (mentions_any(in.init.v, box_consts) || mentions_any(in.init.tag, box_consts))
    throw Unsupported(what + " of a " + what + " whose init depends on the outer index" + where(n.loc));
  Val init = c.val;
  bool idempotent = n.reducer != Reducer::Prod;  // c op c = c: max, min
  if (!(idempotent && same_val(in.init, c.val)) && !is_identity(b, n.reducer, in.init)) {
    Term dummy = b.T;
    Val comb = num_op(fold_op(n.reducer), c.val, in.init, n, dummy);
    Term empty = box_empty(box);
    init.v = b.ite(empty, c.val.v, comb.v);
    if (!c.val.tag.isNull() || !comb.tag.isNull())
      init.tag = b.ite(empty, tag_or_zero(b, c.val), tag_or_zero(b, comb));
    if (n.reducer == Reducer::Prod) fold_goals_.push_back(b.or_({empty, box_unit(box)}));
  }
  s->init = init;
  s->f = in.f;
  s->box.insert(s->box.end(), in.box.begin(), in.box.end());
  for (auto d : in.defs) {
    d.second.insert(d.second.end(), box.begin(), box.end());
    s->defs.push_back(d);
  }
  return {c.def, {}, s};
}

// op(x, y) with a fold among the operands: only the fold's own operation with a plain operand,
// which goes into the init (commutativity and associativity, also with infinities and Unknown).
Elem Encoder::fold_arith(Op op, const Node& n, const Elem& x, const Elem& y) {
  if (x.sum && y.sum)
    throw Unsupported(std::string("operator ") + to_string(op) + " of two reductions cannot be encoded" + where(n.loc));
  const Elem& fe = x.sum ? x : y;
  const Elem& pe = x.sum ? y : x;
  const SumVal& f = *fe.sum;
  // min over a max-fold (max over a min-fold) distributes over the elements: on a total order with
  // -inf < finite < inf and Unknown absorbing, min(max(c, x1, ..., xn), p) is
  // max(min(c, p), min(x1, p), ..., min(xn, p)) (also for n = 0), so it is the fold of the same
  // range with every element and the init passed through min(., p).
  const bool distributes = (op == Op::Min && f.red == Reducer::Max) || (op == Op::Max && f.red == Reducer::Min);
  if (fold_op(f.red) != op && !distributes)
    throw Unsupported(std::string("operator ") + to_string(op) + " applied to a " + op_name(f.red) +
                      " cannot be encoded" + where(n.loc));
  std::unordered_set<Term> consts;
  for (const auto& e : f.box) consts.insert(e.si);
  if (mentions_any(pe.val.v, consts) || mentions_any(pe.val.tag, consts))
    throw InternalError("an operand depends on a reduction's own index" + where(n.loc));
  auto s = std::make_shared<SumVal>(f);
  Term dummy = b.T;
  s->init = num_op(op, f.init, pe.val, n, dummy);
  if (distributes) s->f = num_op(op, f.f, pe.val, n, dummy);
  return {b.and_({x.def, y.def}), {}, s};
}

// The element comparison at the top when a side is a fold (docs/verifier.md). A fold's box splits
// into matched entries P (shared constants) and unmatched ones U (fresh constants).
//   * U must be empty or a single point, or, for max/min, the element must not mention U's
//     constants (a fold of a constant over a non-empty range is that constant: idempotence).
//   * No matched entries on either side: each fold is exactly ite(U empty, c, c op f) and the
//     values are compared as they are.
//   * Matched entries: both sides are folds of the same operation; the ranges of P coincide (the
//     match is a bijection), the inits are equal, "U empty" agrees on both sides unless P is empty,
//     and the elements are equal pointwise (none Unknown, so neither fold is Unknown).
void Encoder::fold_compare(const Elem& le, const Elem& re, const Term& in_range_l, Term& lhs_access, Term& eq_goal) {
  if ((le.sum && !is_fold(le)) || (re.sum && !is_fold(re)))
    throw Unsupported("a sum compared with a max/min/prod reduction cannot be encoded");
  struct Side {
    const SumVal* f = nullptr;
    std::vector<BoxEntry> p, u;
    Term eu = Term();
    std::set<int> maps;
  };
  std::vector<Term> hyps{in_range_l, le.def}, goals{re.def};
  std::vector<Term> hint;  // exactness goals (and a dominating difference), for Query::cex_hint
  auto side = [&](const Elem& e, bool lhs) {
    Side sd;
    if (!e.sum) return sd;
    sd.f = e.sum.get();
    std::unordered_set<Term> ucs;
    for (const auto& x : sd.f->box) {
      (si_free[x.map] ? sd.p : sd.u).push_back(x);
      if (si_free[x.map]) {
        sd.maps.insert(x.map);
      } else {
        ucs.insert(x.si);
      }
    }
    sd.eu = box_empty(sd.u);
    // The fresh constants lie in their box when it is non-empty (true for some value of them).
    hyps.push_back(b.implies(b.not_(sd.eu), box_cond(sd.u)));
    bool indep = sd.f->red != Reducer::Prod && !mentions_any(sd.f->f.v, ucs) && !mentions_any(sd.f->f.tag, ucs);
    if (!indep) {
      goals.push_back(b.or_({sd.eu, box_unit(sd.u)}));
      hint.push_back(goals.back());
    }
    for (const auto& [c, sub] : sd.f->defs) (lhs ? hyps : goals).push_back(b.implies(box_cond(sub), c));
    return sd;
  };
  Side l = side(le, true), r = side(re, false);
  for (const auto& g : fold_goals_) {
    goals.push_back(g);
    hint.push_back(g);
  }

  if (l.maps.empty() && r.maps.empty()) {
    auto exact = [&](const Side& sd, const Elem& e) -> Val {
      if (!sd.f) return e.val;
      const SumVal& f = *sd.f;
      Term dummy = b.T;
      Val comb = num_op(fold_op(f.red), f.init, f.f, *f.node, dummy);
      Val v{b.ite(sd.eu, f.init.v, comb.v), Term()};
      if (!f.init.tag.isNull() || !comb.tag.isNull()) v.tag = b.ite(sd.eu, tag_or_zero(b, f.init), tag_or_zero(b, comb));
      return v;
    };
    lhs_val = exact(l, le);
    rhs_val = exact(r, re);
    goals.push_back(values_equal(lhs_val, rhs_val));
  } else {
    if (!l.f || !r.f || l.maps != r.maps)
      throw Unsupported("a matched summation index is reduced on one side only");
    if (l.f->red != r.f->red)
      throw Unsupported(std::string("a ") + op_name(l.f->red) + " compared with a " + op_name(r.f->red));
    if (l.f->red == Reducer::Prod &&
        (!l.f->f.tag.isNull() || !r.f->f.tag.isNull() || !l.f->init.tag.isNull() || !r.f->init.tag.isNull()))
      throw Unsupported("reduce_prod of possibly infinite values under match cannot be encoded (inf * 0 is unknown)");
    Term dl = box_cond(l.p), dr = box_cond(r.p);
    goals.push_back(b.iff(dl, dr));  // the match is a bijection between the two ranges
    goals.push_back(b.or_({box_empty(l.p), b.iff(l.eu, r.eu)}));
    hint.push_back(goals[goals.size() - 2]);
    hint.push_back(goals.back());
    goals.push_back(values_equal(l.f->init, r.f->init));
    lhs_val = l.f->f;
    rhs_val = r.f->f;
    Term inner = b.and_({dl, b.not_(l.eu), b.not_(r.eu)});
    goals.push_back(b.implies(inner, values_equal(lhs_val, rhs_val)));
    // The search hint: the elements differ at s, and for max (min) the larger (smaller) of the
    // two exceeds both inits and 0, the evaluator's value of elements the model does not read.
    std::vector<Term> dom{inner, b.not_(values_equal(lhs_val, rhs_val))};
    Reducer red = l.f->red;
    if (red != Reducer::Prod && lhs_val.tag.isNull() && rhs_val.tag.isNull()) {
      bool mx = red == Reducer::Max;
      Term top = mx ? b.max(lhs_val.v, rhs_val.v) : b.min(lhs_val.v, rhs_val.v);
      auto beyond = [&](const Term& x) { return mx ? b.lt(x, top) : b.lt(top, x); };
      dom.push_back(beyond(sort_for(dtype)));
      for (const Val* c : {&l.f->init, &r.f->init}) {
        if (c->tag.isNull()) {
          dom.push_back(beyond(c->v));
        } else if (Builder::int_value(c->tag) != (mx ? -1 : 1)) {
          dom = {inner, b.not_(values_equal(lhs_val, rhs_val))};  // an init that may be infinite
          break;
        }
      }
    }
    // ... or the inits differ and both ranges are empty.
    Term inits_differ = b.and_({b.not_(values_equal(l.f->init, r.f->init)), b.or_({box_empty(l.p), b.and_({l.eu, r.eu})})});
    hint.push_back(b.or_({b.and_(dom), inits_differ}));
  }
  lhs_access = b.and_(hyps);
  eq_goal = b.and_(goals);
  fold_hint_ = b.and_(hint);
}

}  // namespace tr::enc
