#pragma once
// Machine element values (docs/machine-types.md): fixed-width two's complement integers and IEEE-754
// binary floats, as XLA's HLO evaluator computes them. A value is its bit pattern (the low
// bit_width(t) bits of a uint64_t). Float arithmetic is exact rational arithmetic followed by one
// rounding to nearest, ties to even, so every format (binary16, bfloat16, binary32, binary64) is
// handled by the same code, subnormals included.
#include <cstdint>
#include <optional>
#include <string>

#include "libtensorright/check/ir.h"
#include "libtensorright/semantics/rational.h"

namespace tr::mach {

uint64_t mask(DType t);  // the low bit_width(t) bits

// ---- fixed-width integers ----
BigInt int_value(DType t, uint64_t bits);               // signed or unsigned by type
uint64_t wrap(DType t, const BigInt& v);                 // v modulo 2^width
bool fits(DType t, const BigInt& v);                     // v is a value of t
BigInt min_value(DType t);
BigInt max_value(DType t);

// ---- floats ----
bool is_nan(DType t, uint64_t bits);
bool is_inf(DType t, uint64_t bits);
bool is_zero(DType t, uint64_t bits);
bool sign_bit(DType t, uint64_t bits);
uint64_t nan_bits(DType t);                // the canonical quiet NaN
uint64_t inf_bits(DType t, bool negative);
uint64_t zero_bits(DType t, bool negative);
uint64_t max_finite_bits(DType t, bool negative);
Rational float_value(DType t, uint64_t bits);  // finite values only
// x rounded to t (nearest, ties to even; beyond the largest finite value: infinity). A zero x
// gives +0, or -0 when negative_zero.
uint64_t round_to(DType t, const Rational& x, bool negative_zero = false);

// ---- operations on values of one machine type (fixed or float) ----
uint64_t add(DType t, uint64_t a, uint64_t b);
uint64_t sub(DType t, uint64_t a, uint64_t b);
uint64_t mul(DType t, uint64_t a, uint64_t b);
uint64_t div(DType t, uint64_t a, uint64_t b);  // ints: truncating; XLA's x/0 and MIN/-1
uint64_t rem(DType t, uint64_t a, uint64_t b);  // ints: sign of the dividend, x%0 = x; floats: fmod
uint64_t neg(DType t, uint64_t a);
uint64_t abs(DType t, uint64_t a);
uint64_t max(DType t, uint64_t a, uint64_t b);  // XLA: a NaN operand wins (the first), else std::max
uint64_t min(DType t, uint64_t a, uint64_t b);
// Three-way comparison by value (signed or unsigned; floats: -0 == +0); nullopt when unordered (NaN).
std::optional<int> compare(DType t, uint64_t a, uint64_t b);
// The final comparison of a rule: the same bits, or (floats) both NaN.
bool same(DType t, uint64_t a, uint64_t b);

Rational exact(double v);  // the exact value of a finite double

// The value of an exact number in t: ints must be integral and fit (nullopt otherwise); floats
// are rounded.
std::optional<uint64_t> from_rational(DType t, const Rational& x);

// A literal of the rule language as a value of t: ints must fit, floats are rounded; `-0.0` is -0,
// `inf`/`-inf`/`nan` exist in float types only (nullopt otherwise, or when an int does not fit).
std::optional<uint64_t> literal_bits(DType t, const Literal& l);

// "-3" for ints; "-0 (0x8000)", "1.5 (0x3e00)", "nan (0x7e00)", "inf (0x7c00)" for floats.
std::string str(DType t, uint64_t bits);
// The value alone, as the rule language writes it ("-0.0", "1.5", "nan", "-inf", "-3").
std::string literal_text(DType t, uint64_t bits);

}  // namespace tr::mach
