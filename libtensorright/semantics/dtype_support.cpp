// Whether a rule has a meaning at one dtype (semantics.h, dtype_problem): the checker types a rule
// once for all its dtypes, but a literal can exist in one element type and not in another.
#include <set>

#include "libtensorright/semantics/machine.h"
#include "libtensorright/semantics/semantics.h"

namespace tr {

namespace {

class Scan {
 public:
  Scan(const Rule& r, DType t) : r_(r), t_(t) {}
  std::optional<std::string> problem;

  void node(const Node& n) {
    if (problem || !seen_.insert(&n).second) return;
    if (n.op == Op::Literal) literal(n);
    for (const auto& [k, e] : n.shape) iexpr(*e);
    for (const auto& [name, m] : n.attrs)
      for (const auto& [k, e] : m) iexpr(*e);
    for (const auto& a : n.args) node(*a);
  }
  void iexpr(const IExpr& e) {
    if (problem) return;
    if (e.kind == IK::Scalar && is_float(r_.scalars.at(static_cast<size_t>(e.id)).etype.resolve(t_)))
      problem = "scalar '" + r_.scalars.at(static_cast<size_t>(e.id)).name + "' of type " + to_string(t_) +
                " is used in a condition at " + e.loc.str() +
                " (conditions are over mathematical numbers, which NaN and ±inf are not; use `assume`)";
    for (const auto& a : e.args)
      if (a) iexpr(*a);
  }

 private:
  void literal(const Node& n) {
    DType t = n.etype.resolve(t_);
    const Literal& l = n.lit;
    if (is_machine(t)) {
      if (l.kind != Literal::Kind::Bool && !mach::literal_bits(t, l))
        problem = "literal " + text(l) + " at " + n.loc.str() + " is not a value of " + to_string(t);
    } else if (l.kind == Literal::Kind::NaN) {
      problem = "nan at " + n.loc.str() + " is not a value of " + std::string(to_string(t));
    }
  }
  static std::string text(const Literal& l) {
    switch (l.kind) {
      case Literal::Kind::PosInf: return "inf";
      case Literal::Kind::NegInf: return "-inf";
      case Literal::Kind::NaN: return "nan";
      case Literal::Kind::Real: return l.num.get_str() + "/" + l.den.get_str();
      default: return l.num.get_str();
    }
  }
  const Rule& r_;
  DType t_;
  std::set<const Node*> seen_;
};

}  // namespace

std::optional<std::string> dtype_problem(const Rule& rule, DType t) {
  Scan s(rule, t);
  s.node(*rule.lhs);
  s.node(*rule.rhs);
  for (const auto& a : rule.assume) s.node(*a.cond);
  for (const auto& p : rule.pre)
    if (p.cond) s.iexpr(*p.cond);
  for (const auto& td : rule.tensors)
    for (const auto& [k, e] : td.shape) s.iexpr(*e);
  return s.problem;
}

}  // namespace tr
