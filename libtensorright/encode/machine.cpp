// Machine element types in cvc5's bit-vector and floating-point theories (docs/machine-types.md).
// Every operation is the one of the concrete evaluator (semantics/machine.cpp), term for term:
// XLA's integer division and remainder at zero and MIN / -1, NaN-first max and min, IEEE
// comparisons. The SMT-LIB equality of two floating-point terms is the rule's final comparison:
// it identifies all NaNs and tells +0 from -0.
#include <stdexcept>

#include "libtensorright/encode/encode.h"
#include "libtensorright/semantics/machine.h"

namespace tr::enc {

using cvc5::Kind;

cvc5::Sort machine_sort(cvc5::Solver& s, DType t) {
  // cvc5 1.0.3 decides binary32 and binary64 only; other formats need its experimental mode
  // (--fp-exp), which has known crashes, above all for formats like bfloat16 (docs/machine-types.md).
  if (t == DType::F16 || t == DType::BF16)
    throw Unsupported(std::string(to_string(t)) + " cannot be encoded yet: cvc5 1.0.3 decides only f32 and f64");
  if (is_float(t)) return s.mkFloatingPointSort(static_cast<uint32_t>(exponent_bits(t)), static_cast<uint32_t>(significand_bits(t)));
  return s.mkBitVectorSort(static_cast<uint32_t>(bit_width(t)));
}

Term machine_const(cvc5::Solver& s, DType t, uint64_t bits) {
  Term bv = s.mkBitVector(static_cast<uint32_t>(bit_width(t)), bits & mach::mask(t));
  if (!is_float(t)) return bv;
  return s.mkFloatingPoint(static_cast<uint32_t>(exponent_bits(t)), static_cast<uint32_t>(significand_bits(t)), bv);
}

uint64_t machine_bits(const Term& v) {
  Term bv = v;
  if (v.isFloatingPointValue()) bv = std::get<2>(v.getFloatingPointValue());
  if (!bv.isBitVectorValue()) throw InternalError("a model value of a machine type is not a constant: " + v.toString());
  std::string digits = bv.getBitVectorValue(2);
  uint64_t bits = 0;
  for (char c : digits) bits = (bits << 1) | (c == '1' ? 1 : 0);
  return bits;
}

namespace {

Term mk(const Builder& b, Kind k, std::vector<Term> args) { return b.s.mkTerm(k, args); }

Term rne(const Builder& b) { return b.s.mkRoundingMode(cvc5::RoundingMode::ROUND_NEAREST_TIES_TO_EVEN); }

Term is_nan(const Builder& b, const Term& x) { return mk(b, Kind::FLOATINGPOINT_IS_NAN, {x}); }

// a < c by value: signed or unsigned for integers, IEEE for floats (false with a NaN).
Term less(const Builder& b, DType t, const Term& a, const Term& c) {
  if (is_float(t)) return mk(b, Kind::FLOATINGPOINT_LT, {a, c});
  return mk(b, is_signed_fixed(t) ? Kind::BITVECTOR_SLT : Kind::BITVECTOR_ULT, {a, c});
}

// C's fmod from SMT-LIB's fp.rem (the IEEE remainder, quotient rounded to nearest even): where the
// two differ the remainder has the wrong sign, and fmod = rem + |c| (or - |c|) exactly. fp.rem
// already gives NaN for an infinite dividend, a zero divisor or a NaN, and a for an infinite c.
Term fmod(const Builder& b, DType t, const Term& a, const Term& c) {
  Term r = mk(b, Kind::FLOATINGPOINT_REM, {a, c});
  Term ac = mk(b, Kind::FLOATINGPOINT_ABS, {c});
  Term a_neg = mk(b, Kind::FLOATINGPOINT_IS_NEG, {a});
  Term r_neg = mk(b, Kind::FLOATINGPOINT_IS_NEG, {r});
  Term special = b.or_({is_nan(b, r), mk(b, Kind::FLOATINGPOINT_IS_ZERO, {r}), mk(b, Kind::FLOATINGPOINT_IS_INF, {c})});
  Term fixed = b.ite(a_neg, mk(b, Kind::FLOATINGPOINT_SUB, {rne(b), r, ac}), mk(b, Kind::FLOATINGPOINT_ADD, {rne(b), r, ac}));
  (void)t;
  return b.ite(b.or_({special, b.iff(a_neg, r_neg)}), r, fixed);
}

Term int_div(const Builder& b, DType t, const Term& a, const Term& c) {
  uint32_t w = static_cast<uint32_t>(bit_width(t));
  Term zero = b.s.mkBitVector(w, 0), ones = b.s.mkBitVector(w, mach::mask(t));
  if (!is_signed_fixed(t)) return mk(b, Kind::BITVECTOR_UDIV, {a, c});  // x / 0 is all ones: the maximum
  // bvsdiv truncates and wraps MIN / -1 to MIN; only x / 0 differs from XLA's -1.
  return b.ite(b.eq(c, zero), ones, mk(b, Kind::BITVECTOR_SDIV, {a, c}));
}

}  // namespace

Term machine_binary(const Builder& b, DType t, Op op, const Term& a, const Term& c) {
  bool fl = is_float(t);
  switch (op) {
    case Op::Add: return fl ? mk(b, Kind::FLOATINGPOINT_ADD, {rne(b), a, c}) : mk(b, Kind::BITVECTOR_ADD, {a, c});
    case Op::Sub: return fl ? mk(b, Kind::FLOATINGPOINT_SUB, {rne(b), a, c}) : mk(b, Kind::BITVECTOR_SUB, {a, c});
    case Op::Mul: return fl ? mk(b, Kind::FLOATINGPOINT_MULT, {rne(b), a, c}) : mk(b, Kind::BITVECTOR_MULT, {a, c});
    case Op::Div: return fl ? mk(b, Kind::FLOATINGPOINT_DIV, {rne(b), a, c}) : int_div(b, t, a, c);
    case Op::Rem:
      // bvsrem/bvurem: the sign of the dividend, x % 0 = x, MIN % -1 = 0, as XLA.
      if (!fl) return mk(b, is_signed_fixed(t) ? Kind::BITVECTOR_SREM : Kind::BITVECTOR_UREM, {a, c});
      return fmod(b, t, a, c);
    case Op::Max:
    case Op::Min: {
      // XLA: a NaN operand wins (the first); then std::max(a, c) = a < c ? c : a,
      // std::min(a, c) = c < a ? c : a (so max(+0, -0) = +0 but max(-0, +0) = -0).
      Term pick_c = op == Op::Max ? less(b, t, a, c) : less(b, t, c, a);
      Term r = b.ite(pick_c, c, a);
      if (fl) r = b.ite(is_nan(b, a), a, b.ite(is_nan(b, c), c, r));
      return r;
    }
    default: throw InternalError(std::string("operator ") + to_string(op) + " on a machine type");
  }
}

Term machine_unary(const Builder& b, DType t, Op op, const Term& a) {
  bool fl = is_float(t);
  if (op == Op::Neg) return fl ? mk(b, Kind::FLOATINGPOINT_NEG, {a}) : mk(b, Kind::BITVECTOR_NEG, {a});
  if (op == Op::Abs) {
    if (fl) return mk(b, Kind::FLOATINGPOINT_ABS, {a});
    if (!is_signed_fixed(t)) return a;
    Term zero = b.s.mkBitVector(static_cast<uint32_t>(bit_width(t)), 0);
    return b.ite(less(b, t, a, zero), mk(b, Kind::BITVECTOR_NEG, {a}), a);  // abs(MIN) wraps to MIN
  }
  throw InternalError(std::string("operator ") + to_string(op) + " on a machine type");
}

Term machine_compare(const Builder& b, DType t, Op op, const Term& a, const Term& c) {
  if (is_float(t)) {
    // IEEE: every ordered comparison with a NaN is false, != is true; -0 == +0.
    switch (op) {
      case Op::Eq: return mk(b, Kind::FLOATINGPOINT_EQ, {a, c});
      case Op::Ne: return b.not_(mk(b, Kind::FLOATINGPOINT_EQ, {a, c}));
      case Op::Lt: return mk(b, Kind::FLOATINGPOINT_LT, {a, c});
      case Op::Le: return mk(b, Kind::FLOATINGPOINT_LEQ, {a, c});
      case Op::Gt: return mk(b, Kind::FLOATINGPOINT_GT, {a, c});
      case Op::Ge: return mk(b, Kind::FLOATINGPOINT_GEQ, {a, c});
      default: break;
    }
  } else {
    switch (op) {
      case Op::Eq: return b.eq(a, c);
      case Op::Ne: return b.not_(b.eq(a, c));
      case Op::Lt: return less(b, t, a, c);
      case Op::Le: return b.not_(less(b, t, c, a));
      case Op::Gt: return less(b, t, c, a);
      case Op::Ge: return b.not_(less(b, t, a, c));
      default: break;
    }
  }
  throw InternalError(std::string("comparison ") + to_string(op) + " on a machine type");
}

}  // namespace tr::enc
