// Rank-bound inference: a polarity walk over the rank-1 query (docs/rank-bound.md).
#include "libtensorright/bound/bound.h"

#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "libtensorright/encode/encode.h"

namespace tr::bound {

using cvc5::Kind;
using cvc5::Term;

namespace {

enum Pol : int { kPos = 1, kNeg = 2, kBoth = 3 };

// Which per-rclass conditions need a witness axis so that dropping all other axes keeps the truth
// value of the formula: a forall that may be false (negative polarity) and an exists that may be
// true (positive polarity). Atoms that depend on an axis outside such a condition are counted
// too (a conservative safety net; the encoder does not build them).
class Walker {
 public:
  Walker(const enc::Encoder& e, const Rule& r) : e_(e), rule_(r) {}

  using Need = std::set<std::tuple<uint64_t, int, int>>;  // (term, rclass, kind)

  void walk(const Term& t, int pol, Need& need) {
    if (t.getSort().isBoolean()) {
      bool_walk(t, pol, need);
    } else {
      value_walk(t, need);
    }
  }

  std::map<int, std::set<Term>> accesses;  // tensor -> distinct reads
  std::unordered_set<Term> skip;           // valid conjuncts (Query::theorems): never a witness
  void reset() { visited_.clear(); }  // before collecting a new Need

 private:
  void bool_walk(const Term& t, int pol, Need& need) {
    if (skip.count(t)) return;
    int& seen = visited_[t];
    if ((seen & pol) == pol) return;
    pol &= ~seen;
    seen |= pol;
    if (auto it = e_.registry.find(t); it != e_.registry.end()) {
      for (const auto& a : it->second) {
        if (rule_.rclasses[a.rclass].single) continue;
        if ((a.forall && (pol & kNeg)) || (!a.forall && (pol & kPos))) need.insert({t.getId(), a.rclass, a.forall});
      }
      return;
    }
    switch (t.getKind()) {
      case Kind::CONST_BOOLEAN: return;
      case Kind::NOT: bool_walk(t[0], flip(pol), need); return;
      case Kind::AND:
      case Kind::OR:
        for (size_t i = 0; i < t.getNumChildren(); ++i) bool_walk(t[i], pol, need);
        return;
      case Kind::IMPLIES:
        bool_walk(t[0], flip(pol), need);
        bool_walk(t[1], pol, need);
        return;
      case Kind::ITE:
        bool_walk(t[0], kBoth, need);
        bool_walk(t[1], pol, need);
        bool_walk(t[2], pol, need);
        return;
      case Kind::EQUAL:
      case Kind::XOR:
      case Kind::DISTINCT:
        if (t[0].getSort().isBoolean()) {
          for (size_t i = 0; i < t.getNumChildren(); ++i) bool_walk(t[i], kBoth, need);
          return;
        }
        break;
      default: break;
    }
    // An atom: comparisons of values, a Bool tensor read, ...
    for (int r : mentions(t)) need.insert({t.getId(), r, 2});
    if (is_read(t)) {
      record(t);
      return;
    }
    for (size_t i = 0; i < t.getNumChildren(); ++i) walk(t[i], kBoth, need);
  }

  void value_walk(const Term& t, Need& need) {
    int& seen = visited_[t];
    if (seen) return;
    seen = kBoth;
    if (is_read(t)) {
      record(t);
      return;
    }
    for (size_t i = 0; i < t.getNumChildren(); ++i) walk(t[i], kBoth, need);
  }

  // A read of an input tensor (the other uninterpreted functions, exp at float types, are walked
  // into like any operator: their arguments hold reads and conditions).
  bool is_read(const Term& t) const { return t.getKind() == Kind::APPLY_UF && e_.uf_tensor.count(t[0]); }

  void record(const Term& t) { accesses[e_.uf_tensor.at(t[0])].insert(t); }

  // Non-single rclasses whose axis constants occur in t outside reads and outside registered
  // per-rclass conditions.
  const std::set<int>& mentions(const Term& t) {
    if (auto it = mention_cache_.find(t); it != mention_cache_.end()) return it->second;
    std::set<int> r;
    if (is_read(t) || e_.registry.count(t)) {
      // accounted for elsewhere
    } else if (auto it = e_.axis_const_rclass.find(t); it != e_.axis_const_rclass.end()) {
      if (!rule_.rclasses[it->second].single) r.insert(it->second);
    } else {
      for (size_t i = 0; i < t.getNumChildren(); ++i) {
        const auto& c = mentions(t[i]);
        r.insert(c.begin(), c.end());
      }
    }
    return mention_cache_[t] = r;
  }

  static int flip(int pol) { return ((pol & kPos) ? kNeg : 0) | ((pol & kNeg) ? kPos : 0); }

  const enc::Encoder& e_;
  const Rule& rule_;
  std::unordered_map<Term, int> visited_;
  std::unordered_map<Term, std::set<int>> mention_cache_;
};

}  // namespace

Bounds infer(const Rule& rule, DType dtype, cvc5::Solver& solver) {
  size_t n = rule.rclasses.size();
  enc::Encoder e(solver, rule, dtype, std::vector<int>(n, 1));
  enc::Query q = e.build();
  Walker w(e, rule);
  w.skip.insert(q.theorems.begin(), q.theorems.end());

  // The query is hyp ∧ lhs_access ∧ ¬(g_1 ∧ ... ∧ g_m). A model falsifies at least one goal (its
  // cause); the hypotheses and that one goal must keep their truth value on fewer axes.
  Walker::Need hyp;
  w.reset();
  w.walk(q.hyp, kPos, hyp);
  w.walk(q.lhs_access, kPos, hyp);
  std::vector<Walker::Need> causes;
  for (const auto& g : q.goals) {
    Walker::Need c;
    w.reset();
    w.walk(g, kNeg, c);
    causes.push_back(c);
  }
  Bounds out;
  out.k.assign(n, 1);
  out.conditions.assign(n, 0);
  out.access_pairs.assign(n, 0);
  for (const auto& c : causes) {
    Walker::Need all = hyp;
    all.insert(c.begin(), c.end());
    std::vector<int> cnt(n, 0);
    for (const auto& [t, r, kind] : all) cnt[r]++;
    for (size_t r = 0; r < n; ++r) out.conditions[r] = std::max(out.conditions[r], cnt[r]);
  }
  for (const auto& [ti, reads] : w.accesses) {
    int m = static_cast<int>(reads.size());
    std::set<int> rcs;
    for (const auto& [k, sz] : rule.tensors[ti].shape) rcs.insert(k.rclass);
    for (int r : rcs) out.access_pairs[r] += m * (m - 1) / 2;
  }
  for (size_t r = 0; r < n; ++r)
    out.k[r] = rule.rclasses[r].single ? 1 : std::max(1, out.conditions[r] + out.access_pairs[r]);
  return out;
}

}  // namespace tr::bound
