// Convolution (Op::Conv; ConvAttrs in check/ir.h, the evaluator's Op::Conv in semantics/eval.cpp):
//   out[b, o, s] = sum over f and window k of padIN[b, f, s*stride + k] * padW[f, o, k]
// padIN = pad(IN, 0, low, lhs_dilation - 1, high), padW = pad(W, 0, interior rhs_dilation - 1).
// Like sum/dot, the sum is never unrolled: it is its summand at the summation-index constants of
// the feature and spatial keys (Node::sum_index), over the box feature sizes x dilated window, so
// `match` and the bijection obligations of docs/verifier.md apply unchanged.
#include <algorithm>
#include <functional>

#include "libtensorright/encode/encode.h"

namespace tr::enc {

// The conv attribute `name` of spatial key k on axis j (defaults as in ir.h).
Term Encoder::conv_attr(const Node& n, const char* name, const AxisKey& k, int j, int64_t dflt) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return b.integer(dflt);
  auto jt = it->second.find(k);
  if (jt == it->second.end() || !jt->second) return b.integer(dflt);
  return iexpr(*jt->second, j);
}

namespace {
// size + max(0, size - 1) * (dilation - 1): a dilated extent (ir.h, check.cpp's conv shape).
Term dilated(const Builder& b, const Term& size, const Term& dil) {
  return b.add(size, b.mul(b.max(b.zero, b.sub(size, b.integer(1))), b.sub(dil, b.integer(1))));
}
}  // namespace

// Validity of the conv node itself (the evaluator's shape rules): equal feature sizes; per spatial
// axis stride > 0, dilations >= 1, padded input size >= 0 and output size >= 0.
Term Encoder::conv_valid(const Node& n) {
  if (!n.conv) throw InternalError("conv without its attributes" + where(n.loc));
  const ConvAttrs& c = *n.conv;
  const Node& in = *n.args.at(0);
  const Node& w = *n.args.at(1);
  std::vector<Term> cs;
  for (const auto& k : c.feature)
    cs.push_back(agg(k.rclass, true, [&](int j) { return b.eq(size(in, k, j), size(w, k, j)); }));
  for (const auto& k : c.spatial)
    cs.push_back(agg(k.rclass, true, [&](int j) {
      Term st = conv_attr(n, "stride", k, j, 1), lo = conv_attr(n, "low", k, j, 0), hi = conv_attr(n, "high", k, j, 0);
      Term ld = conv_attr(n, "lhs_dilation", k, j, 1), rd = conv_attr(n, "rhs_dilation", k, j, 1);
      Term pin = b.add(b.add(lo, hi), dilated(b, size(in, k, j), ld));
      Term pw = dilated(b, size(w, k, j), rd);
      // floor division by a positive stride is Euclidean division (the stride test comes first).
      Term out = b.ediv(b.add(b.sub(pin, pw), st), st);
      return b.and_({b.lt(b.zero, st), b.le(b.integer(1), ld), b.le(b.integer(1), rd), b.le(b.zero, pin),
                     b.le(b.zero, out)});
    }));
  return b.and_(cs);
}

Elem Encoder::conv_at(const Node& n, const Index& idx) {
  if (!n.conv) throw InternalError("conv without its attributes" + where(n.loc));
  machine_reduction(n);
  const ConvAttrs& c = *n.conv;
  const Node& in = *n.args.at(0);
  const Node& w = *n.args.at(1);
  auto sig = signature_of(idx);

  // Summation-index constants of the feature and spatial keys, and their box.
  std::vector<BoxEntry> box;
  std::map<AxisKey, std::vector<Term>> si;
  for (const auto& [k, mid] : n.sum_index) {
    auto [it, fresh] = sum_use_.emplace(mid, sig);
    if (!fresh && it->second != sig)
      throw Unsupported("summation index " + rule.maps[mid].name + " is used by a sum read at two different indices" +
                        where(n.loc));
    bool spatial = std::find(c.spatial.begin(), c.spatial.end(), k) != c.spatial.end();
    int canon = mid;  // pair by the lhs partner of a matched index (the constants are shared)
    for (const auto& m : rule.match)
      if (m.rhs_si == mid) canon = m.lhs_si;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      Term s = map_const(mid, j);
      si[k].push_back(s);
      Term extent = spatial ? dilated(b, size(w, k, j), conv_attr(n, "rhs_dilation", k, j, 1)) : size(in, k, j);
      box.push_back({canon, k.rclass, j, s, extent});
    }
  }

  // Input and weight indices; "in the padding" of either padded operand (per spatial rclass, an
  // exists-condition over its axes, built by agg for the rank bound).
  Index ii, wi;
  for (const auto& k : c.batch) ii[k] = idx.at(k);
  for (const auto& k : c.output_feature) wi[k] = idx.at(k);
  for (const auto& k : c.feature) ii[k] = wi[k] = si.at(k);
  std::vector<Term> in_pad, w_pad;
  for (const auto& k : c.spatial) {
    std::vector<Term> pos;
    for (int j = 0; j < ranks[k.rclass]; ++j) {
      Term kk = si.at(k).at(j);
      Term p = b.sub(b.add(b.mul(idx.at(k).at(j), conv_attr(n, "stride", k, j, 1)), kk), conv_attr(n, "low", k, j, 0));
      pos.push_back(p);
      // p >= 0 and the dilations are >= 1 wherever these indices are read, so Euclidean
      // division is the evaluator's truncating one.
      ii[k].push_back(b.ediv(p, conv_attr(n, "lhs_dilation", k, j, 1)));
      wi[k].push_back(b.ediv(kk, conv_attr(n, "rhs_dilation", k, j, 1)));
    }
    in_pad.push_back(agg(k.rclass, false, [&](int j) {
      Term ld = conv_attr(n, "lhs_dilation", k, j, 1);
      Term inner = dilated(b, size(in, k, j), ld);
      return b.or_({b.lt(pos[j], b.zero), b.le(inner, pos[j]), b.not_(b.eq(b.emod(pos[j], ld), b.zero))});
    }));
    w_pad.push_back(agg(k.rclass, false, [&](int j) {
      Term rd = conv_attr(n, "rhs_dilation", k, j, 1);
      return b.not_(b.eq(b.emod(si.at(k).at(j), rd), b.zero));
    }));
  }
  Term ip = b.or_(in_pad), wp = b.or_(w_pad);

  Elem a = Builder::is_true(ip) ? Elem{b.T, {}, nullptr} : at(in, ii);
  Elem v = Builder::is_true(wp) ? Elem{b.T, {}, nullptr} : at(w, wi);
  for (const Elem* e : {&a, &v})
    if (e->sum || (!e->val.v.isNull() && !e->val.tag.isNull()))
      throw Unsupported("conv of a sum or of infinite values cannot be encoded" + where(n.loc));
  Term z = sort_for(n.etype.resolve(dtype));
  Term av = a.val.v.isNull() ? z : b.ite(ip, z, a.val.v);
  Term wv = v.val.v.isNull() ? z : b.ite(wp, z, v.val.v);
  // The evaluator reads an operand only outside its padding; an undefined read fails the sum.
  Term def = b.and_({b.or_({ip, a.def}), b.or_({wp, v.def})});
  Val f{b.mul(av, wv), {}};
  if (box.empty()) return {def, f, nullptr};
  auto s = std::make_shared<SumVal>();
  s->f = f;
  s->box = box;
  s->defs.push_back({def, box});
  return {b.T, {}, s};
}

}  // namespace tr::enc
