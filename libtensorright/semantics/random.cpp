// Random instances for differential and property testing of rules.
#include <algorithm>
#include <climits>
#include <functional>
#include <set>

#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"

namespace tr {

namespace {

void collect_maps(const IExpr& e, std::set<int>& out) {
  if (e.kind == IK::Map) out.insert(e.id);
  for (const auto& a : e.args)
    if (a) collect_maps(*a, out);
}

// Maps that are some tensor's size directly: drawn from 0.. so inputs are mostly valid.
std::set<int> size_maps(const Rule& rule) {
  std::set<int> s;
  for (const auto& t : rule.tensors)
    for (const auto& [k, e] : t.shape)
      if (e && e->kind == IK::Map) s.insert(e->id);
  return s;
}

// Per-axis equations `m == E` found in All(...) conjuncts of the preconditions: drawing m from E
// (instead of at random) makes instances of rules such as "st == lo && en == sz + lo" likely. The
// preconditions are still checked afterwards, so this only changes the distribution.
using Bounds = std::map<int, std::pair<int64_t, int64_t>>;
void collect_equations(const IExpr& e, bool per_axis, std::map<int, IExprP>& defs, Bounds& bounds, const Rule& rule) {
  if (e.kind == IK::All) {
    if (!e.args.empty() && e.args[0]) collect_equations(*e.args[0], true, defs, bounds, rule);
    return;
  }
  if (e.kind == IK::And) {
    for (const auto& a : e.args)
      if (a) collect_equations(*a, per_axis, defs, bounds, rule);
    return;
  }
  if (!per_axis || e.args.size() != 2 || !e.args[0] || !e.args[1]) return;
  if (e.kind != IK::Eq) {
    // `m < c`, `m >= c`, ... with an integer literal c: narrow m's range.
    bool map_left = e.args[0]->kind == IK::Map && e.args[1]->kind == IK::Int;
    bool map_right = e.args[1]->kind == IK::Map && e.args[0]->kind == IK::Int;
    if (!map_left && !map_right) return;
    int m = (map_left ? e.args[0] : e.args[1])->id;
    auto cv = to_int64((map_left ? e.args[1] : e.args[0])->value);
    if (!cv || *cv == INT64_MIN || *cv == INT64_MAX) return;  // no bound a drawn map value could meet
    int64_t c = *cv;
    IK k = e.kind;
    if (map_right) k = k == IK::Lt ? IK::Gt : k == IK::Le ? IK::Ge : k == IK::Gt ? IK::Lt : k == IK::Ge ? IK::Le : k;
    auto& [lo, hi] = bounds.try_emplace(m, INT64_MIN, INT64_MAX).first->second;
    if (k == IK::Lt) hi = std::min(hi, c - 1);
    if (k == IK::Le) hi = std::min(hi, c);
    if (k == IK::Gt) lo = std::max(lo, c + 1);
    if (k == IK::Ge) lo = std::max(lo, c);
    return;
  }
  for (int side = 0; side < 2; ++side) {
    const IExprP& lhs = e.args[side];
    const IExprP& rhs = e.args[1 - side];
    if (!lhs || !rhs || lhs->kind != IK::Map) continue;
    int m = lhs->id;
    if (defs.count(m) || rule.maps[m].derived) continue;
    std::set<int> deps;
    collect_maps(*rhs, deps);
    if (deps.count(m)) continue;
    defs[m] = rhs;
    return;
  }
}

// A machine value: mostly small integers, often a value at an edge of the type (its minimum and
// maximum, ±0, ±inf, NaN, the smallest subnormal, the largest finite value, 1.5).
Value random_machine(DType t, std::mt19937_64& rng, const RandomConfig& cfg) {
  std::uniform_int_distribution<int64_t> v(cfg.value_lo, cfg.value_hi);
  int pick = std::uniform_int_distribution<int>(0, 9)(rng);
  if (is_fixed(t)) {
    BigInt x = pick == 0 ? mach::min_value(t) : pick == 1 ? mach::max_value(t) : BigInt(static_cast<long>(v(rng)));
    return Value::machine(t, mach::wrap(t, x));
  }
  bool neg = rng() & 1;
  switch (pick) {
    case 0: return Value::machine(t, mach::zero_bits(t, neg));
    case 1: return Value::machine(t, mach::inf_bits(t, neg));
    case 2: return Value::machine(t, mach::nan_bits(t));
    case 3: return Value::machine(t, mach::max_finite_bits(t, neg));
    case 4: return Value::machine(t, mach::zero_bits(t, neg) | 1);  // the smallest subnormal
    case 5: return Value::machine(t, mach::round_to(t, Rational(v(rng) * 2 + 1, 2)));
    default: return Value::machine(t, mach::round_to(t, Rational(v(rng))));
  }
}

Value random_value(DType t, std::mt19937_64& rng, const RandomConfig& cfg) {
  if (is_machine(t)) return random_machine(t, rng, cfg);
  std::uniform_int_distribution<int64_t> v(cfg.value_lo, cfg.value_hi);
  switch (t) {
    case DType::Bool: return Value::boolean(rng() & 1);
    case DType::Int: return Value::integer(v(rng));
    case DType::Real: {
      // Mostly integers (so that equalities are hit), sometimes a fraction.
      int64_t den = std::uniform_int_distribution<int64_t>(1, 3)(rng);
      return Value::real(Rational(v(rng), den));
    }
    default: return Value::integer(0);
  }
}

}  // namespace

std::optional<Instance> random_instance(const Rule& rule, DType t, std::mt19937_64& rng, const RandomConfig& cfg) {
  const std::set<int> sizes = size_maps(rule);
  std::map<int, IExprP> defs;  // map id -> definition (derived maps, then precondition equations)
  for (size_t m = 0; m < rule.maps.size(); ++m)
    if (rule.maps[m].derived) defs[static_cast<int>(m)] = rule.maps[m].derived;
  Bounds bounds;  // map id -> [lo, hi] from literal comparisons in the preconditions
  for (const auto& p : rule.pre)
    if (p.cond) collect_equations(*p.cond, false, defs, bounds, rule);
  for (int attempt = 0; attempt < cfg.attempts; ++attempt) {
    // Three regimes, in turn: the configured ranges; non-negative maps (most operator attributes
    // must be); tiny non-negative maps at rank 1 (where chains of attribute conditions meet).
    const int regime = attempt % 3;
    const int max_rank = regime == 2 ? 1 : cfg.max_rank;
    const int64_t map_lo = regime == 0 ? cfg.map_lo : 0, map_hi = regime == 2 ? std::min<int64_t>(cfg.map_hi, 3) : cfg.map_hi;
    Instance inst;
    inst.dtype = t;
    for (size_t r = 0; r < rule.rclasses.size(); ++r)
      inst.rank[static_cast<int>(r)] =
          rule.rclasses[r].single ? 1 : std::uniform_int_distribution<int>(1, std::max(1, max_rank))(rng);

    // Free maps first, then defined maps in dependency order.
    auto draw = [&](int m) {
      const MapDecl& d = rule.maps[m];
      int64_t lo = (d.nonneg || sizes.count(m)) ? 0 : map_lo, hi = std::max(lo, map_hi);
      if (auto b = bounds.find(m); b != bounds.end()) {
        auto [blo, bhi] = b->second;
        lo = std::max(lo, blo);
        hi = std::min(hi, bhi);
        if (lo > hi) {  // the regime's range misses the bounds: draw near them instead
          lo = blo != INT64_MIN ? blo : bhi - 3;
          hi = bhi != INT64_MAX ? bhi : blo + 3;
          if (lo > hi) hi = lo;
        }
      }
      std::uniform_int_distribution<int64_t> dist(lo, hi);
      auto& v = inst.maps[m];
      for (int j = 0; j < inst.rank.at(d.rclass); ++j) v.push_back(dist(rng));
    };
    std::vector<int> derived;
    for (size_t m = 0; m < rule.maps.size(); ++m) {
      // Equation-defined maps are sometimes drawn freely, so that other solutions also occur.
      bool eq_only = !rule.maps[m].derived && (rng() % 8 == 0);
      if (defs.count(static_cast<int>(m)) && !eq_only)
        derived.push_back(static_cast<int>(m));
      else
        draw(static_cast<int>(m));
    }
    for (size_t s = 0; s < rule.scalars.size(); ++s)
      inst.scalars[static_cast<int>(s)] = random_value(rule.scalars[s].etype.resolve(t), rng, cfg);

    bool ok = true;
    while (ok && !derived.empty()) {
      bool progress = false;
      for (auto it = derived.begin(); it != derived.end();) {
        std::set<int> deps;
        collect_maps(*defs.at(*it), deps);
        bool ready = true;
        for (int dep : deps) ready = ready && inst.maps.count(dep);
        if (!ready) {
          ++it;
          continue;
        }
        const MapDecl& d = rule.maps[*it];
        auto& v = inst.maps[*it];
        for (int j = 0; j < inst.rank.at(d.rclass) && ok; ++j) {
          Value x = eval_iexpr(*defs.at(*it), inst, j);
          // e.g. a real scalar, or a value beyond int64: no map value
          auto xi = x.kind == Value::Kind::Int ? to_int64(x.i) : std::nullopt;
          if (!xi) ok = false;
          else v.push_back(*xi);
        }
        it = derived.erase(it);
        progress = true;
      }
      if (!progress) {  // a cycle among equations: draw one of them freely
        draw(derived.front());
        derived.erase(derived.begin());
      }
    }
    if (!ok) continue;

    // Inputs: every element of every declared tensor (skip the draw if a size is negative or the
    // tensors are too big to fill).
    int64_t total = 0;
    for (size_t ti = 0; ti < rule.tensors.size() && ok; ++ti) {
      const TensorDecl& d = rule.tensors[ti];
      Shape s;
      int64_t count = 1;
      for (const auto& [k, e] : d.shape) {
        auto& v = s[k];
        for (int j = 0; j < inst.rank.at(k.rclass); ++j) {
          Value x = eval_iexpr(*e, inst, j);
          auto xi = x.kind == Value::Kind::Int ? to_int64(x.i) : std::nullopt;
          if (!xi || *xi < 0) ok = false;
          v.push_back(xi.value_or(0));
          count *= std::max<int64_t>(0, v.back());
          if (count > cfg.max_elements) ok = false;
        }
      }
      total += count;
      if (!ok || total > cfg.max_elements) {
        ok = false;
        break;
      }
      auto& data = inst.inputs[static_cast<int>(ti)];
      DType dt = d.etype.resolve(t);
      Evaluated shape_only;  // enumerate indices through a throwaway Evaluated
      shape_only.defined = true;
      shape_only.shape = s;
      for (const Index& i : shape_only.indices()) data.elems[i] = random_value(dt, rng, cfg);
    }
    if (!ok) continue;
    try {
      if (preconditions_hold(rule, inst)) return inst;
    } catch (const EvalOverflow&) {
      // a precondition overflowed on this draw: draw again
    }
  }
  return std::nullopt;
}

}  // namespace tr

namespace tr {

RandomTestResult random_test(const Rule& rule, int trials, uint64_t seed, const RandomConfig& cfg) {
  RandomTestResult res;
  std::mt19937_64 rng(seed);
  for (DType t : rule.dtypes) {
    if (dtype_problem(rule, t)) continue;  // no meaning at t (its verdict is `unsupported`)
    // Instances on which the left side is undefined test nothing: draw up to 20x more of them.
    int defined = 0;
    for (int i = 0; i < 20 * trials && defined < trials; ++i) {
      auto inst = random_instance(rule, t, rng, cfg);
      if (!inst) break;  // the preconditions are (nearly) never satisfied by small random values
      try {
        {
          Evaluated l = eval(rule, rule.lhs, *inst);
          int64_t n = 1;
          for (const auto& [k, v] : l.shape)
            for (int64_t x : v) n = std::min<int64_t>(n * std::max<int64_t>(x, 0), cfg.max_checked + 1);
          if (l.defined && n > cfg.max_checked) continue;  // too big to check every index quickly
        }
        InstanceCheck c = check_instance(rule, *inst);
        ++res.instances;
        res.lhs_defined += c.lhs_defined;
        defined += c.lhs_defined;
        if (c.holds) continue;
        // An approximated real exp excuses a failure; at a float type exp is a fixed function
        // (libm's, rounded), and a proof there holds for every function (docs/machine-types.md).
        if (c.at.inexact && !is_float(t)) {
          ++res.inexact;
          continue;
        }
        res.failing = std::move(inst);
        res.check = std::move(c);
        return res;
      } catch (const EvalOverflow&) {
        // a size or index left int64 on this instance: not evidence either way
      }
    }
  }
  return res;
}

}  // namespace tr
