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

bool is_narrow_float(DType t) { return t == DType::F16 || t == DType::BF16; }

namespace {

// The binary32 bit pattern of a binary16 or bfloat16 value (every one is a binary32 value).
uint64_t widen_bits(DType t, uint64_t bits) {
  if (mach::is_nan(t, bits)) return mach::nan_bits(DType::F32);
  if (mach::is_inf(t, bits)) return mach::inf_bits(DType::F32, mach::sign_bit(t, bits));
  if (mach::is_zero(t, bits)) return mach::zero_bits(DType::F32, mach::sign_bit(t, bits));
  auto w = mach::from_rational(DType::F32, mach::float_value(t, bits));
  if (!w) throw InternalError(std::string("a ") + to_string(t) + " value that binary32 does not hold");
  return *w;
}

}  // namespace

cvc5::Sort machine_sort(cvc5::Solver& s, DType t) {
  // Symbols of every type hold its bit pattern (bit-vectors) except binary32 and binary64, which
  // cvc5 1.0.3 decides as floating-point terms; f16 and bf16 values are computed in binary32
  // terms (its other formats need the experimental --fp-exp): machine_value widens a symbol's bits.
  if (is_float(t) && !is_narrow_float(t))
    return s.mkFloatingPointSort(static_cast<uint32_t>(exponent_bits(t)), static_cast<uint32_t>(significand_bits(t)));
  return s.mkBitVectorSort(static_cast<uint32_t>(bit_width(t)));
}

Term machine_const(cvc5::Solver& s, DType t, uint64_t bits) {
  if (is_narrow_float(t)) {
    bits = widen_bits(t, bits);
    t = DType::F32;
  }
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

uint64_t machine_bits(DType t, const Term& v) {
  uint64_t bits = machine_bits(v);
  if (!is_narrow_float(t) || v.isBitVectorValue()) return bits;
  // a computed f16/bf16 value: a binary32 value that t holds exactly
  if (mach::is_nan(DType::F32, bits)) return mach::nan_bits(t);
  bool negative = mach::sign_bit(DType::F32, bits);
  if (mach::is_inf(DType::F32, bits)) return mach::inf_bits(t, negative);
  return mach::round_to(t, mach::float_value(DType::F32, bits), negative);
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

// x, the binary32 result of an operation on values of t (f16 or bf16), rounded to nearest-even in t
// and held as binary32 again. Small values (below t's least normal) by adding and subtracting
// 1.5 * 2^(23 + q), q the exponent of t's least subnormal, so that binary32's own rounding falls at
// t's quantum; the others by Veltkamp's split with C = 2^(24 - p) + 1 (its high part is x rounded to
// p bits), scaled by 2^-64 first where C * x could overflow; then t's overflow to infinity. The
// same steps on the host's binary32 give the exact rounding on all 2^32 binary32 inputs, for both
// formats (docs/machine-types.md).
Term narrow(const Builder& b, DType t, const Term& x) {
  const int p = significand_bits(t), emin = 2 - (1 << (exponent_bits(t) - 1));
  auto f32 = [&](const Rational& v) { return machine_const(b.s, DType::F32, *mach::from_rational(DType::F32, v)); };
  auto pow2 = [&](int e) {
    BigInt m = 1;
    m <<= static_cast<unsigned>(e >= 0 ? e : -e);
    return f32(e >= 0 ? Rational(m) : Rational(BigInt(1), m));
  };
  auto add = [&](const Term& u, const Term& v) { return mk(b, Kind::FLOATINGPOINT_ADD, {rne(b), u, v}); };
  auto mul = [&](const Term& u, const Term& v) { return mk(b, Kind::FLOATINGPOINT_MULT, {rne(b), u, v}); };
  Term negative = mk(b, Kind::FLOATINGPOINT_IS_NEG, {x});
  Term ax = mk(b, Kind::FLOATINGPOINT_ABS, {x});
  Term small = mk(b, Kind::FLOATINGPOINT_LT, {ax, pow2(emin)});
  // small: (x + M) - M, with M = 1.5 * 2^(23 + emin - p + 1): the sum's quantum is t's least subnormal.
  // normal: Veltkamp's split of y = x (or x * 2^-64 for bf16's |x| >= 2^64): g = C * y, h = g + (y - g),
  // then scaled back. The two branches share their two additions (a multiplexer costs less than an adder).
  Term m = mul(f32(Rational(3, 2)), pow2(emin - (p - 1) + 23));
  Term big = t == DType::F16 ? b.F : mk(b, Kind::FLOATINGPOINT_GEQ, {ax, pow2(64)});  // f16 results stay below 2^41
  Term y = b.ite(big, mul(x, pow2(-64)), x);
  Term g = mul(add(pow2(24 - p), pow2(0)), y);
  Term first = add(b.ite(small, x, y), b.ite(small, m, mk(b, Kind::FLOATINGPOINT_NEG, {g})));
  Term second = add(b.ite(small, first, g), b.ite(small, mk(b, Kind::FLOATINGPOINT_NEG, {m}), first));
  Term zero = b.ite(negative, machine_const(b.s, DType::F32, mach::zero_bits(DType::F32, true)), machine_const(b.s, DType::F32, 0));
  Term r = b.ite(small, b.ite(mk(b, Kind::FLOATINGPOINT_IS_ZERO, {second}), zero, second), b.ite(big, mul(second, pow2(64)), second));
  Term max_finite = f32(mach::float_value(t, mach::max_finite_bits(t, false)));
  Term inf = b.ite(negative, machine_const(b.s, DType::F32, mach::inf_bits(DType::F32, true)), machine_const(b.s, DType::F32, mach::inf_bits(DType::F32, false)));
  r = b.ite(mk(b, Kind::FLOATINGPOINT_GT, {mk(b, Kind::FLOATINGPOINT_ABS, {r}), max_finite}), inf, r);
  return b.ite(b.or_({is_nan(b, x), mk(b, Kind::FLOATINGPOINT_IS_INF, {x})}), x, r);
}

// The binary32 term of an f16/bf16 bit pattern (exact): bfloat16 is binary32's upper half; a
// binary16 exponent is rebiased by 112, and a subnormal's significand normalised at its leading one.
Term widen(const Builder& b, DType t, const Term& bits) {
  auto ex = [&](uint32_t hi, uint32_t lo, const Term& x) { return b.s.mkTerm(b.s.mkOp(Kind::BITVECTOR_EXTRACT, {hi, lo}), {x}); };
  auto cat = [&](std::vector<Term> xs) { return xs.size() == 1 ? xs[0] : b.s.mkTerm(Kind::BITVECTOR_CONCAT, xs); };
  auto bv = [&](uint32_t w, uint64_t v) { return b.s.mkBitVector(w, v); };
  Term f32;
  if (t == DType::BF16) {
    f32 = cat({bits, bv(16, 0)});
  } else {
    Term sign = ex(15, 15, bits), e = ex(14, 10, bits), m = ex(9, 0, bits);
    Term tail = cat({m, bv(13, 0)});
    Term normal = cat({sign, mk(b, Kind::BITVECTOR_ADD, {cat({bv(3, 0), e}), bv(8, 112)}), tail});
    Term special = cat({sign, bv(8, 255), tail});
    Term sub = cat({sign, bv(31, 0)});  // zero
    for (uint32_t k = 0; k < 10; ++k) {  // leading one at bit k of m: 2^(k - 24) * 1.(bits below k)
      Term frac = k == 0 ? bv(23, 0) : cat({ex(k - 1, 0, m), bv(23 - k, 0)});
      sub = b.ite(b.eq(ex(k, k, m), bv(1, 1)), cat({sign, bv(8, k + 103), frac}), sub);
    }
    f32 = b.ite(b.eq(e, bv(5, 31)), special, b.ite(b.eq(e, bv(5, 0)), sub, normal));
  }
  return b.s.mkTerm(b.s.mkOp(Kind::FLOATINGPOINT_TO_FP_FROM_IEEE_BV, {8, 24}), {f32});
}

Term rounded(const Builder& b, DType t, const Term& x) { return is_narrow_float(t) ? narrow(b, t, x) : x; }

}  // namespace

Term machine_value(const Builder& b, DType t, const Term& symbol) { return is_narrow_float(t) ? widen(b, t, symbol) : symbol; }

Term machine_binary(const Builder& b, DType t, Op op, const Term& a, const Term& c) {
  bool fl = is_float(t);
  switch (op) {
    // f16 and bf16: the binary32 operation, then rounded to t: the same as one rounding of the exact
    // result (binary32 has at least 2p + 2 significand bits; checked on every pair of values of
    // both types, tests/tools/narrow_rounding.cpp and docs/machine-types.md).
    case Op::Add: return fl ? rounded(b, t, mk(b, Kind::FLOATINGPOINT_ADD, {rne(b), a, c})) : mk(b, Kind::BITVECTOR_ADD, {a, c});
    case Op::Sub: return fl ? rounded(b, t, mk(b, Kind::FLOATINGPOINT_SUB, {rne(b), a, c})) : mk(b, Kind::BITVECTOR_SUB, {a, c});
    case Op::Mul: return fl ? rounded(b, t, mk(b, Kind::FLOATINGPOINT_MULT, {rne(b), a, c})) : mk(b, Kind::BITVECTOR_MULT, {a, c});
    case Op::Div: return fl ? rounded(b, t, mk(b, Kind::FLOATINGPOINT_DIV, {rne(b), a, c})) : int_div(b, t, a, c);
    case Op::Rem:
      // bvsrem/bvurem: the sign of the dividend, x % 0 = x, MIN % -1 = 0, as XLA.
      if (!fl) return mk(b, is_signed_fixed(t) ? Kind::BITVECTOR_SREM : Kind::BITVECTOR_UREM, {a, c});
      return fmod(b, t, a, c);  // exact (a value of t) whatever the format
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
