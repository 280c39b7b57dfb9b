// Simpler machine values in a counterexample (semantics.h, shrink_machine_values).
#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"

namespace tr {

namespace {

// The values a reader understands at a glance, simplest first.
std::vector<uint64_t> candidates(DType t) {
  std::vector<uint64_t> c;
  if (is_fixed(t)) {
    for (long v : {0L, 1L, -1L, 2L, -2L}) c.push_back(mach::wrap(t, BigInt(v)));
    c.push_back(mach::wrap(t, mach::min_value(t)));
    c.push_back(mach::wrap(t, mach::max_value(t)));
    return c;
  }
  c = {mach::zero_bits(t, false), mach::zero_bits(t, true)};
  for (long v : {1L, -1L, 2L, -2L}) c.push_back(mach::round_to(t, Rational(v)));
  c.push_back(mach::round_to(t, Rational(1, 2)));
  c.push_back(mach::inf_bits(t, false));
  c.push_back(mach::inf_bits(t, true));
  c.push_back(mach::nan_bits(t));
  c.push_back(mach::max_finite_bits(t, false));
  c.push_back(mach::max_finite_bits(t, true));
  c.push_back(mach::zero_bits(t, false) | 1);  // the smallest subnormal
  return c;
}

size_t rank_of(const std::vector<uint64_t>& c, uint64_t bits) {
  for (size_t i = 0; i < c.size(); ++i)
    if (c[i] == bits) return i;
  return c.size();
}

bool still_refutes(const Rule& rule, const Instance& inst, const Index& idx) {
  try {
    return preconditions_hold(rule, inst) && check_at(rule, inst, idx).refutes();
  } catch (const EvalOverflow&) {
    return false;
  }
}

// Tries the simpler candidates for one value; keeps the first that still refutes.
void shrink_one(const Rule& rule, Instance& inst, const Index& idx, Value& v) {
  if (v.kind != Value::Kind::Machine) return;
  auto c = candidates(v.mt);
  size_t now = rank_of(c, v.bits);
  for (size_t i = 0; i < now; ++i) {
    Value old = v;
    v = Value::machine(old.mt, c[i]);
    if (still_refutes(rule, inst, idx)) return;
    v = old;
  }
}

}  // namespace

void shrink_machine_values(const Rule& rule, Instance& inst, const Index& idx) {
  for (int round = 0; round < 2; ++round) {
    for (auto& [id, v] : inst.scalars) shrink_one(rule, inst, idx, v);
    for (auto& [id, td] : inst.inputs)
      for (auto& [i, v] : td.elems) shrink_one(rule, inst, idx, v);
  }
}

}  // namespace tr
