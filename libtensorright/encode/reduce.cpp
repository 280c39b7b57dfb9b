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
#include <algorithm>
#include <functional>
#include <set>
#include <unordered_set>

#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/machine.h"

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

// The identity of the operation: -inf for max, +inf for min, exactly 1 (finite) for *; at a
// fixed-width integer type t the least value, the greatest value and 1.
bool is_identity(const Builder& b, Reducer r, const Val& c, DType t) {
  if (is_fixed(t)) {
    uint64_t id = r == Reducer::Prod ? 1 : mach::wrap(t, r == Reducer::Max ? mach::min_value(t) : mach::max_value(t));
    return c.v == machine_const(b.s, t, id);
  }
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

// The summation-index constants of fold n read at idx (shared when matched, fresh otherwise):
// the box, and in `full` the index with the reduced keys at those constants.
std::vector<BoxEntry> Encoder::fold_box(const Node& n, const Index& idx, Index& full) {
  const Node& x = *n.args.at(0);
  const std::string what = op_name(n.reducer);
  std::vector<BoxEntry> box;
  full = idx;
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
      box.push_back({canon, k.rclass, j, si, size(x, k, j)});
    }
    full[k] = sis;
  }
  return box;
}

// The box entry of a fold over concat(X1, ..., Xm) whose concat axis is reduced by an unmatched
// summation index, or -1 (then the concat is read as one range, an ite over the arguments).
int Encoder::concat_split_entry(const Node& n) {
  const Node& x = *n.args.at(0);
  if (x.op != Op::Concat) return -1;
  const AxisKey& ck = x.axes.at(0);
  auto it = n.sum_index.find(ck);
  if (it == n.sum_index.end() || si_free[it->second]) return -1;
  if (ranks[ck.rclass] != 1) throw Unsupported("concat along an rclass with more than one axis" + where(x.loc));
  int pos = 0;
  for (const auto& [k, mid] : n.sum_index) {
    if (k == ck) return pos;
    pos += ranks[k.rclass];
  }
  throw InternalError("a reduced key without a box entry" + where(n.loc));
}

// fold(c, concat(X1, ..., Xm, axis=K)) with K reduced: K's range is the disjoint union of the
// arguments' ranges, so the fold has m ranges; range a reads Xa at a fresh constant of its own in
// [0, size of Xa along K) (no ite over the arguments, so that each range can be compared with a
// fold of Xa alone).
void Encoder::fold_concat(const Node& n, const Index& full, const std::vector<BoxEntry>& box, int entry, SumVal& s) {
  const Node& x = *n.args.at(0);
  const AxisKey& ck = x.axes.at(0);
  const BoxEntry& e = box.at(static_cast<size_t>(entry));
  for (size_t a = 0; a < x.args.size(); ++a) {
    const Node& xa = *x.args[a];
    std::vector<BoxEntry> pb = box;
    Term si = b.s.mkConst(b.Int, rule.maps[e.map].name + "_0_u" + std::to_string(fold_fresh_++));
    axis_const_rclass[si] = ck.rclass;
    pb[static_cast<size_t>(entry)].si = si;
    pb[static_cast<size_t>(entry)].size = size(xa, ck, 0);
    Index ia = full;
    ia[ck] = {si};
    Elem ea = at(xa, ia);
    if (ea.sum)
      throw Unsupported(std::string(op_name(n.reducer)) + " over a concat of reductions cannot be encoded" + where(n.loc));
    if (a == 0) {
      s.f = ea.val;
      s.box = pb;
      s.defs.push_back({ea.def, pb});
    } else {
      s.more.push_back({ea.val, pb, {{ea.def, pb}}});
    }
  }
}

// The fold at an index: its box, the element there, and the init value.
Elem Encoder::fold_at(const Node& n, const Index& idx) {
  const std::string what = op_name(n.reducer);
  Elem c = at(*n.args.at(1), {});
  if (c.sum) throw Unsupported(what + ": a reduction in the init value cannot be encoded" + where(n.loc));
  Index full;
  std::vector<BoxEntry> box = fold_box(n, idx, full);
  auto s = std::make_shared<SumVal>();
  s->red = n.reducer;
  s->node = &n;
  s->init = c.val;
  if (int entry = concat_split_entry(n); entry >= 0) {
    fold_concat(n, full, box, entry, *s);
    return {c.def, {}, s};
  }
  Elem body = reduced_element(n, full, box);  // reindex.cpp
  s->box = box;
  s->defs.push_back({body.def, box});
  if (!body.sum) {
    s->f = body.val;
    return {c.def, {}, s};
  }
  fold_flatten(n, box, *body.sum, *s);
  return {c.def, {}, s};
}

// A fold (s: init, box and the element's definedness set) of a fold `in` of the same operation,
// flattened: fold(c, {fold(ci, S_j) : j in J}) with the inner init ci independent of j is
//   max/min (idempotent): fold(J empty ? c : c op ci, union of S_j)
//   *: c * ci^|J| * prod(union S_j): flat with init c when ci = 1, or with c * ci when |J| <= 1
//      (then a goal: J is empty or a single point).
// Each of the inner fold's ranges becomes a range of the outer one, over box x its box.
void Encoder::fold_flatten(const Node& n, const std::vector<BoxEntry>& box, const SumVal& in, SumVal& s) {
  const std::string what = op_name(n.reducer);
  if (in.red == Reducer::Sum) throw Unsupported(what + " of a sum cannot be encoded" + where(n.loc));
  if (in.red != n.reducer)
    throw Unsupported(what + " of a " + op_name(in.red) + " cannot be encoded" + where(n.loc));
  std::unordered_set<Term> box_consts;
  for (const auto& e : box) box_consts.insert(e.si);
  if (mentions_any(in.init.v, box_consts) || mentions_any(in.init.tag, box_consts))
    throw Unsupported(what + " of a " + what + " whose init depends on the outer index" + where(n.loc));
  const Val c = s.init;
  bool idempotent = n.reducer != Reducer::Prod;  // c op c = c: max, min
  if (!(idempotent && same_val(in.init, c)) && !is_identity(b, n.reducer, in.init, n.etype.resolve(dtype))) {
    Term dummy = b.T;
    Val comb = num_op(fold_op(n.reducer), c, in.init, n, dummy);
    Term empty = box_empty(box);
    s.init.v = b.ite(empty, c.v, comb.v);
    if (!c.tag.isNull() || !comb.tag.isNull()) s.init.tag = b.ite(empty, tag_or_zero(b, c), tag_or_zero(b, comb));
    if (n.reducer == Reducer::Prod) fold_goals_.push_back(b.or_({empty, box_unit(box)}));
  }
  auto outer = [&](const std::vector<BoxEntry>& inner) {
    std::vector<BoxEntry> r = box;
    r.insert(r.end(), inner.begin(), inner.end());
    return r;
  };
  auto outer_defs = [&](std::vector<std::pair<Term, std::vector<BoxEntry>>> ds) {
    for (auto& d : ds) d.second.insert(d.second.end(), box.begin(), box.end());
    return ds;
  };
  s.f = in.f;
  s.box = outer(in.box);
  auto inner_defs = outer_defs(in.defs);
  s.defs.insert(s.defs.end(), inner_defs.begin(), inner_defs.end());
  for (const auto& p : in.more) s.more.push_back({p.f, outer(p.box), outer_defs(p.defs)});
}

// op(x, y) with a fold among the operands: only the fold's own operation with a plain operand,
// which goes into the init (commutativity and associativity, also with infinities and Unknown).
// Two folds of op itself: one fold over the ranges of both, with init op(c1, c2) (commutativity
// and associativity).
Elem Encoder::fold_arith(Op op, const Node& n, const Elem& x, const Elem& y) {
  if (x.sum && y.sum) {
    if (!is_fold(x) || !is_fold(y) || x.sum->red != y.sum->red || fold_op(x.sum->red) != op)
      throw Unsupported(std::string("operator ") + to_string(op) + " of two reductions cannot be encoded" + where(n.loc));
    auto s = std::make_shared<SumVal>(*x.sum);
    Term dummy = b.T;
    s->init = num_op(op, x.sum->init, y.sum->init, n, dummy);
    s->more.push_back({y.sum->f, y.sum->box, y.sum->defs});
    s->more.insert(s->more.end(), y.sum->more.begin(), y.sum->more.end());
    return {b.and_({x.def, y.def}), {}, s};
  }
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
  for (const auto& p : f.more)
    for (const auto& e : p.box) consts.insert(e.si);
  if (mentions_any(pe.val.v, consts) || mentions_any(pe.val.tag, consts))
    throw InternalError("an operand depends on a reduction's own index" + where(n.loc));
  auto s = std::make_shared<SumVal>(f);
  Term dummy = b.T;
  s->init = num_op(op, f.init, pe.val, n, dummy);
  if (distributes) {
    s->f = num_op(op, f.f, pe.val, n, dummy);
    for (auto& p : s->more) p.f = num_op(op, p.f, pe.val, n, dummy);
  }
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
  if ((le.sum && !le.sum->more.empty()) || (re.sum && !re.sum->more.empty()))
    return fold_compare_ranges(le, re, in_range_l, lhs_access, eq_goal);
  struct Side {
    const SumVal* f = nullptr;
    std::vector<BoxEntry> p, u;
    Term eu = Term();
    std::set<int> maps;
  };
  std::vector<Term> hyps{in_range_l, le.def}, goals{re.def};
  std::vector<Term> hint;  // exactness goals (and a dominating difference), for Query::cex_hints
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
    if (red != Reducer::Prod && lhs_val.tag.isNull() && rhs_val.tag.isNull() && !is_machine(dtype)) {
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
  fold_hints_ = {b.and_(hint)};
}

// Folds over several ranges (fold_concat, fold_arith), compared range by range: a sufficient
// condition. Both sides fold the same operation over as many ranges, with equal inits, and range k
// of one side equals range k of the other: the unmatched summation-index constants of range k are
// identified rclass by rclass, in order (the right side's replaced by the left side's), then both
// ranges hold the same points and the same element at each point. A model of the negation is a
// candidate only (Query::has_sums): the verdict comes from its replay.
void Encoder::fold_compare_ranges(const Elem& le, const Elem& re, const Term& in_range_l, Term& lhs_access,
                                  Term& eq_goal) {
  if (!le.sum || !re.sum)
    throw Unsupported("a reduction over several ranges (a reduced concat axis, or two reductions combined) "
                      "compared with a value that is not a reduction cannot be encoded");
  const SumVal& l = *le.sum;
  const SumVal& r = *re.sum;
  if (l.red != r.red) throw Unsupported(std::string("a ") + op_name(l.red) + " compared with a " + op_name(r.red));
  if (l.more.size() != r.more.size())
    throw Unsupported(std::string(op_name(l.red)) + " over " + std::to_string(l.more.size() + 1) +
                      " ranges compared with one over " + std::to_string(r.more.size() + 1) + " ranges");
  auto has_tag = [](const SumVal& f) {
    bool t = !f.f.tag.isNull() || !f.init.tag.isNull();
    for (const auto& p : f.more) t = t || !p.f.tag.isNull();
    return t;
  };
  if (l.red == Reducer::Prod && (has_tag(l) || has_tag(r)))
    throw Unsupported("reduce_prod of possibly infinite values over several ranges cannot be encoded (inf * 0 is unknown)");
  std::vector<Term> hyps{in_range_l, le.def}, goals{re.def, values_equal(l.init, r.init)};
  std::vector<Term> differ{b.not_(values_equal(l.init, r.init))}, empties, top_l, top_r;
  for (const auto& g : fold_goals_) goals.push_back(g);
  // The search hints need a dominating element: for max (min) one beyond both inits and 0, the
  // evaluator's value of the elements a model does not read.
  const bool mx = l.red == Reducer::Max;
  bool dominate = l.red != Reducer::Prod && !is_machine(dtype);  // the hint orders Int/Real values
  for (const Val* c : {&l.init, &r.init})
    if (!c->tag.isNull() && Builder::int_value(c->tag) != (mx ? -1 : 1)) dominate = false;  // maybe infinite
  auto beyond = [&](const Term& x, const Term& y) { return mx ? b.lt(y, x) : b.lt(x, y); };  // x beyond y
  auto on_top = [&](const Term& in, const Val& x, const Val& y) {
    std::vector<Term> t{in, beyond(x.v, y.v), beyond(x.v, sort_for(dtype))};
    for (const Val* c : {&l.init, &r.init})
      if (c->tag.isNull()) t.push_back(beyond(x.v, c->v));
    return b.and_(t);
  };
  auto piece = [](const SumVal& f, size_t k) {
    return k == 0 ? FoldPiece{f.f, f.box, f.defs} : f.more[k - 1];
  };
  for (size_t k = 0; k <= l.more.size(); ++k) {
    FoldPiece lp = piece(l, k), rp = piece(r, k);
    std::vector<Term> from, to;
    std::set<int> ml, mr;
    std::vector<const BoxEntry*> ul, ur;
    for (const auto& e : lp.box) si_free[e.map] ? (void)ml.insert(e.map) : ul.push_back(&e);
    for (const auto& e : rp.box) si_free[e.map] ? (void)mr.insert(e.map) : ur.push_back(&e);
    if (ml != mr) throw Unsupported("a matched summation index is reduced on one side only");
    if (ul.size() != ur.size())
      throw Unsupported("range " + std::to_string(k + 1) + " of a " + op_name(l.red) +
                        " has a different number of unmatched summation axes on each side");
    // Paired per rclass, in order (a flattened fold lists its outer axes first).
    auto by_rclass = [](const BoxEntry* x, const BoxEntry* y) { return x->rclass < y->rclass; };
    std::stable_sort(ul.begin(), ul.end(), by_rclass);
    std::stable_sort(ur.begin(), ur.end(), by_rclass);
    for (size_t i = 0; i < ul.size(); ++i) {
      if (ul[i]->rclass != ur[i]->rclass)
        throw Unsupported("range " + std::to_string(k + 1) + " of a " + op_name(l.red) +
                          " reduces axes of different rclasses on each side");
      from.push_back(ur[i]->si);
      to.push_back(ul[i]->si);
    }
    auto sub = [&](const Term& t) { return t.isNull() || from.empty() ? t : t.substitute(from, to); };
    auto sub_box = [&](std::vector<BoxEntry> bx) {
      for (auto& e : bx) {
        e.si = sub(e.si);
        e.size = sub(e.size);
      }
      return bx;
    };
    Val rf{sub(rp.f.v), sub(rp.f.tag)};
    Term dl = box_cond(lp.box), dr = box_cond(sub_box(rp.box));
    goals.push_back(b.iff(dl, dr));
    for (const auto& [c, bx] : lp.defs) hyps.push_back(b.implies(box_cond(bx), c));
    for (const auto& [c, bx] : rp.defs) goals.push_back(b.implies(box_cond(sub_box(bx)), sub(c)));
    goals.push_back(b.implies(dl, values_equal(lp.f, rf)));
    differ.push_back(b.not_(b.iff(dl, dr)));
    differ.push_back(b.and_({dl, b.not_(values_equal(lp.f, rf))}));
    empties.push_back(b.and_({box_empty(lp.box), box_empty(sub_box(rp.box))}));
    dominate = dominate && lp.f.tag.isNull() && rf.tag.isNull();
    if (dominate) {
      top_l.push_back(on_top(dl, lp.f, rf));
      top_r.push_back(on_top(dl, rf, lp.f));
    }
  }
  lhs_access = b.and_(hyps);
  eq_goal = b.and_(goals);
  // Hints, tried in order: a range where the left (then the right) element dominates the other,
  // the inits differing over empty ranges, any difference.
  fold_hints_.clear();
  if (dominate) fold_hints_ = {b.or_(top_l), b.or_(top_r)};
  empties.push_back(differ.front());
  fold_hints_.push_back(b.and_(empties));
  fold_hints_.push_back(b.or_(differ));
}

}  // namespace tr::enc
