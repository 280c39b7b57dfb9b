// Reductions whose range is re-indexed by a bijection before it is encoded (docs/verifier.md,
// "Re-indexed reductions"). A sum, max, min or product is a function of the multiset of its
// elements, so it may be taken over any range that is in bijection with the original one, element
// for element. Two such bijections make the summands of common XLA rewrites line up under `match`:
//  * reverse on a reduced key: element i of reverse(X) is element size-1-i of X, and i -> size-1-i
//    is a bijection of [0, size): the reduction reads X at i instead;
//  * pad with the reduction's neutral value (0 for sum, -inf for max, +inf for min, 1 for product)
//    on reduced keys: every padded position is neutral, and the other positions are the elements
//    j of X at low + j*(interior+1) that fall in [0, padded size): the reduction runs over X's
//    range [0, size) with the element ite(position in range, X[j], neutral).
// Both are exact (equal values and equal definedness for every model), so they hold for proofs and
// counterexamples alike.
#include "libtensorright/encode/encode.h"

namespace tr::enc {

namespace {

// The literal that is neutral for the reduction (an exact check on the IR: no term reasoning).
bool neutral_literal(const Node& v, Reducer red) {
  if (v.op != Op::Literal) return false;
  const Literal& l = v.lit;
  switch (red) {
    case Reducer::Sum: return (l.kind == Literal::Kind::Int || l.kind == Literal::Kind::Real) && l.num == 0;
    case Reducer::Prod: return (l.kind == Literal::Kind::Int || l.kind == Literal::Kind::Real) && l.num == 1 && l.den == 1;
    case Reducer::Max: return l.kind == Literal::Kind::NegInf;
    case Reducer::Min: return l.kind == Literal::Kind::PosInf;
  }
  return false;
}

}  // namespace

Elem Encoder::reduced_element(const Node& n, const Index& full, std::vector<BoxEntry>& box) {
  const Node& x = *n.args.at(0);
  auto summed = [&](const AxisKey& k) { return n.sum_index.count(k) > 0; };
  if (x.op == Op::Reverse) {
    Index ri = full;
    for (const AxisKey& k : x.axes)
      if (summed(k))
        for (int j = 0; j < ranks[k.rclass]; ++j)
          ri[k][j] = b.sub(b.sub(size(x, k, j), b.integer(1)), full.at(k).at(j));
    return at(x, ri);
  }
  if (x.op != Op::Pad || !neutral_literal(*x.args.at(1), n.reducer)) return at(x, full);

  // pad(X, neutral): summed keys run over X's own range; the other keys keep pad's reading.
  const Node& inner = *x.args.at(0);
  auto attr = [&](const char* name, const AxisKey& k, int j) -> Term {
    auto it = x.attrs.find(name);
    if (it == x.attrs.end()) return b.zero;
    auto jt = it->second.find(k);
    return jt == it->second.end() || !jt->second ? b.zero : iexpr(*jt->second, j);
  };
  Index ci;
  std::vector<Term> outside;  // the index is in the padding (unsummed keys) / off the range (summed)
  for (const auto& [k, sz] : inner.shape) {
    std::vector<Term> conds;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      Term lo = attr("low", k, j), step = b.add(attr("interior", k, j), b.integer(1));
      Term i = full.at(k).at(j);
      if (summed(k)) {
        // Element j of X sits at low + j*step; it counts when that position is in the padded range.
        Term pos = b.add(lo, b.mul(i, step));
        conds.push_back(b.or_({b.lt(pos, b.zero), b.le(size(x, k, j), pos)}));
        ci[k].push_back(i);
      } else {
        Term rel = b.sub(i, lo);
        Term s = size(inner, k, j);
        Term inner_end = b.add(s, b.mul(b.max(b.zero, b.sub(s, b.integer(1))), attr("interior", k, j)));
        conds.push_back(b.or_({b.lt(rel, b.zero), b.le(inner_end, rel), b.not_(b.eq(b.emod(rel, step), b.zero))}));
        ci[k].push_back(b.ediv(rel, step));
      }
    }
    outside.push_back(agg(k.rclass, false, [&](int j) { return conds.at(static_cast<size_t>(j)); }));
  }
  // The box of a summed key now ranges over X's size on that key (entries in sum_index order).
  size_t e = 0;
  for (const auto& [k, mid] : n.sum_index) {
    (void)mid;
    for (int j = 0; j < ranks[k.rclass]; ++j, ++e) box.at(e).size = size(inner, k, j);
  }
  Term off = b.or_(outside);
  Elem v = at(*x.args.at(1), {});
  if (Builder::is_true(off)) return v;
  Elem r = at(inner, ci);
  if (Builder::is_false(off)) return r;
  if (r.sum || v.sum) throw Unsupported("a reduction of a padded reduction cannot be encoded" + where(n.loc));
  Elem out;
  out.def = b.ite(off, v.def, r.def);
  out.val.v = b.ite(off, v.val.v, r.val.v);
  if (!v.val.tag.isNull() || !r.val.tag.isNull()) {
    Term z = b.zero;
    out.val.tag = b.ite(off, v.val.tag.isNull() ? z : v.val.tag, r.val.tag.isNull() ? z : r.val.tag);
  }
  return out;
}

}  // namespace tr::enc
