// The per-axis profile abstraction (profile.h; the argument is in docs/rank-bound.md, "Profiles").
#include "libtensorright/verify/profile.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace tr::profile {

using cvc5::Kind;
using cvc5::Term;

namespace {

// Thrown when the abstraction does not apply to a query (the caller falls back to rank tasks).
struct NotApplicable {
  std::string why;
};

void subterms(const Term& t, std::unordered_set<Term>& seen) {
  if (!seen.insert(t).second) return;
  for (size_t i = 0; i < t.getNumChildren(); ++i) subterms(t[i], seen);
}

// The top-level conjuncts of t, and every AND on the way down: each holds in every model of t.
void conjuncts(const Term& t, std::unordered_set<Term>& out) {
  if (!out.insert(t).second) return;
  if (t.getKind() == Kind::AND)
    for (size_t i = 0; i < t.getNumChildren(); ++i) conjuncts(t[i], out);
}

// One bit of an axis' profile: a condition body, or the equality of two read arguments of one
// tensor position. at[j] is its term on axis j.
struct Bit {
  std::vector<Term> at;
  bool equality = false;  // at[j] is EQUAL(argument, argument), not a body
};

// The per-axis view of one rclass in one query.
class AxisView {
 public:
  AxisView(cvc5::Solver& s, const enc::Encoder& e, int r, const std::unordered_set<Term>& in_query)
      : s_(s), e_(e), r_(r), n_(e.ranks[r]) {
    build_renaming();
    for (const auto& inst : e.agg_instances)
      if (inst.rclass == r) add_body(inst.bodies, in_query);
    add_read_arguments(in_query);
  }

  std::vector<Bit> bits;
  // Each body (on every axis) -> a fresh Boolean, each read argument -> a fresh Int.
  std::unordered_map<Term, Term> replace;

  // True when t mentions this rclass' constants of axis 0 only (or none of its constants).
  bool axis0_only(const Term& t) const {
    try {
      only_axis(t, 0);
      return true;
    } catch (const NotApplicable&) {
      return false;
    }
  }
  // The axis-0 constants of this rclass (maps and output index).
  std::vector<Term> axis0_constants() const {
    std::vector<Term> out;
    for (const auto& [t, j] : axis_of_)
      if (j == 0) out.push_back(t);
    std::sort(out.begin(), out.end(), [](const Term& a, const Term& b) { return a.getId() < b.getId(); });
    return out;
  }

  // Bit i on axis j in the abstract query (over the fresh variables).
  Term abstract_bit(size_t i, int j) const {
    const Term& t = bits[i].at[j];
    if (bits[i].equality) return s_.mkTerm(Kind::EQUAL, {sub(t[0]), sub(t[1])});
    return sub(t);
  }

 private:
  Term sub(const Term& t) const {
    auto it = replace.find(t);
    return it == replace.end() ? t : it->second;
  }

  bool mentions_axis(const Term& t) const {
    if (auto it = e_.axis_const_rclass.find(t); it != e_.axis_const_rclass.end()) return it->second == r_;
    for (size_t i = 0; i < t.getNumChildren(); ++i)
      if (mentions_axis(t[i])) return true;
    return false;
  }

  // Axis j's constants of this rclass -> axis 0's (maps and output index), for the uniformity check.
  void build_renaming() {
    from_.assign(n_, {});
    to_.assign(n_, {});
    auto add = [&](const std::vector<Term>& per_axis) {
      if (static_cast<int>(per_axis.size()) != n_) return;
      for (int j = 0; j < n_; ++j)
        if (e_.axis_const_rclass.count(per_axis[j])) axis_of_[per_axis[j]] = j;
      for (int j = 1; j < n_; ++j)
        if (e_.axis_const_rclass.count(per_axis[j])) {
          from_[j].push_back(per_axis[j]);
          to_[j].push_back(per_axis[0]);
        }
    };
    for (size_t m = 0; m < e_.rule.maps.size(); ++m)
      if (e_.rule.maps[m].rclass == r_) add(e_.map_consts[m]);
    for (const auto& [k, v] : e_.index)
      if (k.rclass == r_) add(v);
  }

  // Axis j's term must be axis 0's with the constants renamed (the encoder's uniformity, checked
  // rather than assumed): otherwise the profiles of axis 0 need not be those of axis j.
  void check_uniform(const std::vector<Term>& at) const {
    for (int j = 0; j < n_; ++j) only_axis(at[j], j);
    Term base = s_.simplify(at[0]);
    for (int j = 1; j < n_; ++j) {
      Term renamed = from_[j].empty() ? at[j] : at[j].substitute(from_[j], to_[j]);
      if (s_.simplify(renamed) != base)
        throw NotApplicable{"a per-axis term differs between axis 0 and axis " + std::to_string(j)};
    }
  }

  void add_body(const std::vector<Term>& bodies, const std::unordered_set<Term>& in_query) {
    if (static_cast<int>(bodies.size()) != n_) return;
    bool used = false, axis = false;
    for (const auto& b : bodies) {
      used = used || in_query.count(b);
      axis = axis || mentions_axis(b);
    }
    if (!used || !axis) return;
    if (auto it = body_bit_.find(bodies[0]); it != body_bit_.end()) {
      if (bits[it->second].at != bodies) throw NotApplicable{"one body with two per-axis forms"};
      return;
    }
    check_uniform(bodies);
    body_bit_[bodies[0]] = bits.size();
    bits.push_back({bodies, false});
    for (int j = 0; j < n_; ++j)
      if (!replace.count(bodies[j]))
        replace[bodies[j]] = s_.mkConst(s_.getBooleanSort(), "profile_b" + std::to_string(bits.size()) + "_" +
                                                                 std::to_string(j));
  }

  // Per tensor position of this rclass, the distinct arguments of the reads in the query; a bit
  // for each pair (their equality on the axis).
  void add_read_arguments(const std::unordered_set<Term>& in_query) {
    std::map<std::pair<int, size_t>, std::vector<std::vector<Term>>> args;  // (tensor, key) -> per-axis args
    for (const auto& a : e_.accesses) {
      if (!in_query.count(a.app)) continue;
      const auto& shape = e_.rule.tensors.at(a.tensor).shape;
      size_t p = 0, key = 0;
      for (const auto& [k, sz] : shape) {
        int n = e_.ranks[k.rclass];
        if (k.rclass == r_) {
          std::vector<Term> at(a.args.begin() + p, a.args.begin() + p + n);
          auto& list = args[{a.tensor, key}];
          bool seen = false;
          for (const auto& x : list) {
            if (x[0] != at[0]) continue;
            if (x != at) throw NotApplicable{"one read argument with two per-axis forms"};
            seen = true;
          }
          if (!seen) list.push_back(at);
        }
        p += n;
        key++;
      }
    }
    for (const auto& [pos, list] : args) {
      for (const auto& at : list) {
        check_uniform(at);
        if (!mentions_axis(at[0])) continue;  // a literal (an unmatched summation index): kept
        for (int j = 0; j < n_; ++j)
          if (!replace.count(at[j]))
            replace[at[j]] = s_.mkConst(s_.getIntegerSort(), "profile_a" + std::to_string(replace.size()));
      }
      for (size_t x = 0; x < list.size(); ++x)
        for (size_t y = x + 1; y < list.size(); ++y) {
          Bit b{{}, true};
          for (int j = 0; j < n_; ++j) b.at.push_back(s_.mkTerm(Kind::EQUAL, {list[x][j], list[y][j]}));
          bits.push_back(b);
        }
    }
  }

  // t mentions this rclass' constants of axis j only (and no constant the renaming does not know).
  void only_axis(const Term& t, int j) const {
    if (auto it = e_.axis_const_rclass.find(t); it != e_.axis_const_rclass.end() && it->second == r_) {
      auto a = axis_of_.find(t);
      if (a == axis_of_.end() || a->second != j)
        throw NotApplicable{"a per-axis term of axis " + std::to_string(j) + " mentions another axis"};
      return;
    }
    for (size_t i = 0; i < t.getNumChildren(); ++i) only_axis(t[i], j);
  }

  cvc5::Solver& s_;
  const enc::Encoder& e_;
  int r_, n_;
  std::unordered_map<Term, int> axis_of_;
  std::vector<std::vector<Term>> from_, to_;
  std::unordered_map<Term, size_t> body_bit_;
};

// The profiles axis 0 can have in a model of the query: every valuation of the bits that the
// fixed conjuncts (bodies that the query asserts on every axis) and the theorems allow. A search
// over the bits in order: each branch is a conjunction of literals, asked once; a model found on
// the way fixes the remaining bits of one branch, so each call either finds a new profile or
// closes a branch (unsat). Any other answer gives up: the set must be complete.
class Enumeration {
 public:
  Enumeration(cvc5::Solver& s, const AxisView& v, const Check& check, int max_profiles)
      : s_(s), v_(v), check_(check), max_(max_profiles) {}

  std::vector<std::vector<bool>> run(const std::unordered_set<Term>& fixed, const std::vector<Term>& theorems) {
    s_.push();
    for (const auto& b : v_.bits) {
      bool all = true;
      for (const auto& t : b.at) all = all && fixed.count(t);
      free_.push_back(!all);
      if (all) s_.assertFormula(b.at[0]);
    }
    for (const auto& t : theorems)  // valid; the other axes' instances would only burden the search
      if (v_.axis0_only(t)) s_.assertFormula(t);
    for (const auto& c : v_.axis0_constants()) {
      probe_.push_back(s_.mkTerm(Kind::LEQ, {s_.mkInteger(-kProbe), c}));
      probe_.push_back(s_.mkTerm(Kind::LEQ, {c, s_.mkInteger(kProbe)}));
    }
    sample();
    try {
      std::vector<bool> prefix;
      explore(prefix, {});
    } catch (...) {
      s_.pop();
      throw;
    }
    s_.pop();
    return out_;
  }

 private:
  // Profiles of small concrete axes (a fixed pseudo-random sequence: the same on every run),
  // evaluated by the solver's simplifier: each one that satisfies the fixed bits is a profile
  // without a search for a model.
  void sample() {
    std::vector<Term> cs = v_.axis0_constants();
    if (cs.empty()) return;
    static const int kValues[] = {0, 1, 2, 3, 1, 2, 4, 5, -1, 0, 7, -2, 1, 3, 10, 6};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int n = 0; n < kSamples; ++n) {
      std::vector<Term> vals;
      for (size_t i = 0; i < cs.size(); ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        vals.push_back(s_.mkInteger(kValues[(x >> 33) % 16]));
      }
      std::vector<bool> p;
      bool ok = true;
      for (size_t i = 0; i < v_.bits.size() && ok; ++i) {
        Term t = s_.simplify(v_.bits[i].at[0].substitute(cs, vals));
        ok = t.getKind() == Kind::CONST_BOOLEAN && (free_[i] || t.getBooleanValue());
        if (ok) p.push_back(t.getBooleanValue());
      }
      if (ok && std::find(samples_.begin(), samples_.end(), p) == samples_.end()) samples_.push_back(p);
    }
  }

  void explore(std::vector<bool>& prefix, std::vector<bool> model) {
    if (model.empty())
      for (const auto& p : samples_)
        if (std::equal(prefix.begin(), prefix.end(), p.begin())) {
          model = p;
          break;
        }
    if (model.empty()) {
      bool probed = false;
      s_.push();
      for (size_t i = 0; i < prefix.size(); ++i)
        s_.assertFormula(prefix[i] ? v_.bits[i].at[0] : s_.mkTerm(Kind::NOT, {v_.bits[i].at[0]}));
      Answer r = check_("enumerating the profiles of an axis");
      if (r.isUnknown() && !probe_.empty()) {
        // Models of nonlinear constraints are hard to find unbounded: look among small values
        // (a model found there is a model; anything else leaves the branch undecided).
        s_.push();
        for (const auto& t : probe_) s_.assertFormula(t);
        Answer pr = check_("looking for a profile among small values");
        if (pr.isSat()) {
          r = pr;
          probed = true;
        } else {
          s_.pop();
        }
      }
      if (r.isSat())
        for (const auto& b : v_.bits) model.push_back(s_.getValue(b.at[0]).getBooleanValue());
      if (r.isSat() && probed) s_.pop();
      s_.pop();
      if (r.isUnsat()) return;
      if (!r.isSat())
        throw NotApplicable{"the profile enumeration was not decided within the budget (" +
                            std::to_string(v_.bits.size()) + " bits, " + std::to_string(out_.size()) +
                            " profiles found)"};
    }
    size_t i = prefix.size();
    if (i == v_.bits.size()) {
      if (static_cast<int>(out_.size()) >= max_) throw NotApplicable{"more than " + std::to_string(max_) + " profiles"};
      out_.push_back(prefix);
      return;
    }
    prefix.push_back(model[i]);
    explore(prefix, model);
    prefix.back() = !model[i];
    if (free_[i]) explore(prefix, {});
    prefix.pop_back();
  }

  cvc5::Solver& s_;
  const AxisView& v_;
  const Check& check_;
  int max_;
  static constexpr int kProbe = 16;
  static constexpr int kSamples = 500;
  std::vector<std::vector<bool>> samples_;
  std::vector<bool> free_;
  std::vector<Term> probe_;  // -kProbe <= c <= kProbe for the axis-0 constants
  std::vector<std::vector<bool>> out_;
};

// Decides one query through the abstraction: true when the abstract query is unsatisfiable.
bool prove_query(cvc5::Solver& s, const enc::Encoder& e, const Term& query, const std::vector<Term>& theorems,
                 const Check& check, int max_profiles, std::string& detail) {
  std::unordered_set<Term> in_query, fixed;
  subterms(query, in_query);
  conjuncts(query, fixed);
  std::vector<Term> from, to, axis_constraints;
  std::unordered_set<int> abstracted;
  std::unordered_set<Term> seen;
  for (const auto& t : theorems)  // valid: true in every model
    if (seen.insert(t).second) {
      from.push_back(t);
      to.push_back(s.mkTrue());
    }
  for (size_t r = 0; r < e.rule.rclasses.size(); ++r) {
    if (e.rule.rclasses[r].single) continue;
    AxisView v(s, e, static_cast<int>(r), in_query);
    auto profiles = Enumeration(s, v, check, max_profiles).run(fixed, theorems);
    abstracted.insert(static_cast<int>(r));
    detail += (detail.empty() ? "" : ", ") + e.rule.rclasses[r].name + ": " + std::to_string(profiles.size());
    for (const auto& [t, x] : v.replace)
      if (seen.insert(t).second) {  // a term another rclass replaced keeps that variable
        from.push_back(t);
        to.push_back(x);
      }
    for (int j = 0; j < e.ranks[r]; ++j) {
      std::vector<Term> any;
      for (const auto& p : profiles) {
        std::vector<Term> cube;
        for (size_t i = 0; i < p.size(); ++i) {
          Term b = v.abstract_bit(i, j);
          cube.push_back(p[i] ? b : s.mkTerm(Kind::NOT, {b}));
        }
        any.push_back(cube.empty() ? s.mkTrue() : cube.size() == 1 ? cube[0] : s.mkTerm(Kind::AND, cube));
      }
      axis_constraints.push_back(any.empty() ? s.mkFalse() : any.size() == 1 ? any[0] : s.mkTerm(Kind::OR, any));
    }
  }
  Term abstract = query.substitute(from, to);
  std::unordered_set<Term> left;
  subterms(abstract, left);
  for (const auto& t : left)
    if (auto it = e.axis_const_rclass.find(t); it != e.axis_const_rclass.end() && abstracted.count(it->second))
      throw NotApplicable{"an axis constant occurs outside the conditions and reads"};
  axis_constraints.push_back(abstract);
  s.push();
  for (const auto& c : axis_constraints) s.assertFormula(c);
  Answer r = check("solving the profile abstraction");
  s.pop();
  return r.isUnsat();
}

}  // namespace

Outcome prove(cvc5::Solver& s, const enc::Encoder& e, const enc::Query& q, const Check& check, int max_profiles) {
  Outcome out;
  try {
    std::string d1, d2;
    if (!q.shape_query.isNull() && !prove_query(s, e, q.shape_query, {}, check, max_profiles, d2)) {
      out.detail = "the abstract tensor-level query is satisfiable or undecided";
      return out;
    }
    // With the tensor-level query proved, its goals hold wherever the hypotheses do: the element
    // query keeps them as facts (fixed on every axis) and denies the element goal only.
    Term element = q.query;
    if (!q.shape_query.isNull()) {
      std::vector<Term> parts{q.hyp, q.lhs_access};
      parts.insert(parts.end(), q.shape_goals.begin(), q.shape_goals.end());
      parts.push_back(s.mkTerm(Kind::NOT, {q.eq_goal}));
      element = s.mkTerm(Kind::AND, parts);
    }
    if (!prove_query(s, e, element, q.theorems, check, max_profiles, d1)) {
      out.detail = "the abstract query is satisfiable or undecided";
      return out;
    }
    out.proved = true;
    out.detail = "profiles per axis: " + d1;
  } catch (const NotApplicable& n) {
    out.detail = n.why;
  } catch (const Stop&) {
    out.detail = "stopped by the caller's resource limit";
  }
  return out;
}

}  // namespace tr::profile
