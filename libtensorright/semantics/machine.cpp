// Machine element values (machine.h, docs/machine-types.md). The integer results for division
// and remainder by zero, MIN / -1 and MIN % -1, and the NaN rules of max, min and clamp, follow
// XLA's HLO evaluator (xla/hlo/evaluator/hlo_evaluator_typed_visitor.h).
#include "libtensorright/semantics/machine.h"

#include <cstdio>
#include <stdexcept>

namespace tr::mach {

namespace {

BigInt pow2(unsigned long k) {
  BigInt r;
  mpz_ui_pow_ui(r.get_mpz_t(), 2, k);
  return r;
}

uint64_t to_u64(const BigInt& v) { return static_cast<uint64_t>(mpz_get_ui(v.get_mpz_t())); }

BigInt from_u64(uint64_t v) {
  BigInt r;
  mpz_import(r.get_mpz_t(), 1, -1, sizeof v, 0, 0, &v);
  return r;
}

struct Fmt {
  int eb, sb, w, bias;
  uint64_t exp_all() const { return (uint64_t{1} << eb) - 1; }
  uint64_t exp_field(uint64_t bits) const { return (bits >> (sb - 1)) & exp_all(); }
  uint64_t mant(uint64_t bits) const { return bits & ((uint64_t{1} << (sb - 1)) - 1); }
  uint64_t sign(bool neg) const { return neg ? uint64_t{1} << (w - 1) : 0; }
};

Fmt fmt(DType t) {
  if (!is_float(t)) throw std::logic_error(std::string("not a float type: ") + to_string(t));
  int eb = exponent_bits(t);
  return Fmt{eb, significand_bits(t), bit_width(t), (1 << (eb - 1)) - 1};
}

// -1, 0, 1 as n compares with d * 2^e (n, d > 0).
int cmp_pow2(const BigInt& n, const BigInt& d, long e) {
  if (e >= 0) return cmp(n, BigInt(d << static_cast<unsigned long>(e)));
  return cmp(BigInt(n << static_cast<unsigned long>(-e)), d);
}

}  // namespace

uint64_t mask(DType t) {
  int w = bit_width(t);
  return w >= 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
}

// ---- fixed-width integers ----

BigInt int_value(DType t, uint64_t bits) {
  bits &= mask(t);
  BigInt v = from_u64(bits);
  int w = bit_width(t);
  if (is_signed_fixed(t) && (bits >> (w - 1)) & 1) v -= pow2(static_cast<unsigned long>(w));
  return v;
}

uint64_t wrap(DType t, const BigInt& v) {
  BigInt r;
  mpz_fdiv_r_2exp(r.get_mpz_t(), v.get_mpz_t(), static_cast<mp_bitcnt_t>(bit_width(t)));
  return to_u64(r);
}

BigInt min_value(DType t) {
  return is_signed_fixed(t) ? BigInt(-pow2(static_cast<unsigned long>(bit_width(t) - 1))) : BigInt(0);
}

BigInt max_value(DType t) {
  int w = bit_width(t);
  return is_signed_fixed(t) ? BigInt(pow2(static_cast<unsigned long>(w - 1)) - 1)
                            : BigInt(pow2(static_cast<unsigned long>(w)) - 1);
}

bool fits(DType t, const BigInt& v) { return min_value(t) <= v && v <= max_value(t); }

// ---- floats ----

bool is_nan(DType t, uint64_t bits) {
  Fmt f = fmt(t);
  return f.exp_field(bits) == f.exp_all() && f.mant(bits) != 0;
}
bool is_inf(DType t, uint64_t bits) {
  Fmt f = fmt(t);
  return f.exp_field(bits) == f.exp_all() && f.mant(bits) == 0;
}
bool is_zero(DType t, uint64_t bits) {
  Fmt f = fmt(t);
  return f.exp_field(bits) == 0 && f.mant(bits) == 0;
}
bool sign_bit(DType t, uint64_t bits) { return (bits >> (bit_width(t) - 1)) & 1; }
uint64_t nan_bits(DType t) {
  Fmt f = fmt(t);
  return (f.exp_all() << (f.sb - 1)) | (uint64_t{1} << (f.sb - 2));
}
uint64_t inf_bits(DType t, bool negative) {
  Fmt f = fmt(t);
  return f.sign(negative) | (f.exp_all() << (f.sb - 1));
}
uint64_t zero_bits(DType t, bool negative) { return fmt(t).sign(negative); }
uint64_t max_finite_bits(DType t, bool negative) {
  Fmt f = fmt(t);
  return f.sign(negative) | ((f.exp_all() - 1) << (f.sb - 1)) | ((uint64_t{1} << (f.sb - 1)) - 1);
}

Rational float_value(DType t, uint64_t bits) {
  Fmt f = fmt(t);
  uint64_t e = f.exp_field(bits), m = f.mant(bits);
  if (e == f.exp_all()) throw std::logic_error("float_value of an infinity or NaN");
  BigInt sig = from_u64(e == 0 ? m : m | (uint64_t{1} << (f.sb - 1)));
  long ex = (e == 0 ? 1 - f.bias : static_cast<long>(e) - f.bias) - (f.sb - 1);
  if (sign_bit(t, bits)) sig = -sig;
  if (ex >= 0) return Rational(BigInt(sig << static_cast<unsigned long>(ex)));
  return Rational(sig, pow2(static_cast<unsigned long>(-ex)));
}

uint64_t round_to(DType t, const Rational& x, bool negative_zero) {
  Fmt f = fmt(t);
  if (x.sign() == 0) return zero_bits(t, negative_zero);
  bool neg = x.sign() < 0;
  BigInt n = abs(x.num()), d = x.den();
  const long emin = 1 - f.bias, emax = f.bias;
  long e = static_cast<long>(mpz_sizeinbase(n.get_mpz_t(), 2)) - static_cast<long>(mpz_sizeinbase(d.get_mpz_t(), 2));
  if (cmp_pow2(n, d, e) < 0) e -= 1;  // now 2^e <= n/d < 2^(e+1)
  if (e < emin) e = emin;             // subnormal: the quantum of the smallest exponent
  long k = f.sb - 1 - e;
  BigInt N = n, D = d;
  if (k >= 0) N <<= static_cast<unsigned long>(k);
  else D <<= static_cast<unsigned long>(-k);
  BigInt q, r;
  mpz_fdiv_qr(q.get_mpz_t(), r.get_mpz_t(), N.get_mpz_t(), D.get_mpz_t());
  int c = cmp(BigInt(r * 2), D);
  if (c > 0 || (c == 0 && mpz_odd_p(q.get_mpz_t()))) q += 1;
  if (q == pow2(static_cast<unsigned long>(f.sb))) {
    q = pow2(static_cast<unsigned long>(f.sb - 1));
    e += 1;
  }
  if (e > emax) return inf_bits(t, neg);
  uint64_t qm = to_u64(q), hidden = uint64_t{1} << (f.sb - 1);
  uint64_t bits = qm < hidden ? qm : ((static_cast<uint64_t>(e + f.bias) << (f.sb - 1)) | (qm - hidden));
  return f.sign(neg) | bits;
}

// ---- operations ----

namespace {

uint64_t fadd(DType t, uint64_t a, uint64_t b) {
  if (is_nan(t, a) || is_nan(t, b)) return nan_bits(t);
  bool ia = is_inf(t, a), ib = is_inf(t, b);
  if (ia && ib) return sign_bit(t, a) == sign_bit(t, b) ? a : nan_bits(t);
  if (ia) return a;
  if (ib) return b;
  if (is_zero(t, a) && is_zero(t, b)) return zero_bits(t, sign_bit(t, a) && sign_bit(t, b));
  return round_to(t, float_value(t, a) + float_value(t, b));  // an exact zero sum is +0
}

uint64_t fmul(DType t, uint64_t a, uint64_t b) {
  if (is_nan(t, a) || is_nan(t, b)) return nan_bits(t);
  bool s = sign_bit(t, a) != sign_bit(t, b);
  bool ia = is_inf(t, a), ib = is_inf(t, b);
  if (ia || ib) return (ia && is_zero(t, b)) || (ib && is_zero(t, a)) ? nan_bits(t) : inf_bits(t, s);
  return round_to(t, float_value(t, a) * float_value(t, b), s);
}

uint64_t fdiv(DType t, uint64_t a, uint64_t b) {
  if (is_nan(t, a) || is_nan(t, b)) return nan_bits(t);
  bool s = sign_bit(t, a) != sign_bit(t, b);
  bool ia = is_inf(t, a), ib = is_inf(t, b), zb = is_zero(t, b);
  if ((ia && ib) || (zb && is_zero(t, a))) return nan_bits(t);
  if (ia) return inf_bits(t, s);
  if (ib) return zero_bits(t, s);
  if (zb) return inf_bits(t, s);
  return round_to(t, float_value(t, a) / float_value(t, b), s);
}

// C's fmod: x - y * trunc(x / y), exact, with the sign of x.
uint64_t fmod(DType t, uint64_t a, uint64_t b) {
  if (is_nan(t, a) || is_nan(t, b) || is_inf(t, a) || is_zero(t, b)) return nan_bits(t);
  if (is_inf(t, b) || is_zero(t, a)) return a;
  Rational x = float_value(t, a), y = float_value(t, b);
  Rational r = x - y * Rational((x / y).trunc());
  return round_to(t, r, sign_bit(t, a));
}

uint64_t idiv(DType t, uint64_t a, uint64_t b) {
  BigInt x = int_value(t, a), y = int_value(t, b);
  if (y == 0) return mask(t);  // all ones: -1 when signed, the maximum when unsigned
  if (is_signed_fixed(t) && y == -1 && x == min_value(t)) return a;
  BigInt q;
  mpz_tdiv_q(q.get_mpz_t(), x.get_mpz_t(), y.get_mpz_t());
  return wrap(t, q);
}

uint64_t irem(DType t, uint64_t a, uint64_t b) {
  BigInt x = int_value(t, a), y = int_value(t, b);
  if (y == 0) return a;
  BigInt r;
  mpz_tdiv_r(r.get_mpz_t(), x.get_mpz_t(), y.get_mpz_t());  // MIN % -1 = 0
  return wrap(t, r);
}

}  // namespace

uint64_t add(DType t, uint64_t a, uint64_t b) {
  if (is_float(t)) return fadd(t, a, b);
  return (a + b) & mask(t);
}
uint64_t sub(DType t, uint64_t a, uint64_t b) {
  if (is_float(t)) return fadd(t, a, neg(t, b));
  return (a - b) & mask(t);
}
uint64_t mul(DType t, uint64_t a, uint64_t b) {
  if (is_float(t)) return fmul(t, a, b);
  return (a * b) & mask(t);
}
uint64_t div(DType t, uint64_t a, uint64_t b) { return is_float(t) ? fdiv(t, a, b) : idiv(t, a, b); }
uint64_t rem(DType t, uint64_t a, uint64_t b) { return is_float(t) ? fmod(t, a, b) : irem(t, a, b); }
uint64_t neg(DType t, uint64_t a) {
  if (is_float(t)) return a ^ fmt(t).sign(true);
  return (~a + 1) & mask(t);
}
uint64_t abs(DType t, uint64_t a) {
  if (is_float(t)) return a & ~fmt(t).sign(true);
  if (is_signed_fixed(t) && int_value(t, a) < 0) return neg(t, a);  // abs(MIN) wraps to MIN
  return a & mask(t);
}

std::optional<int> compare(DType t, uint64_t a, uint64_t b) {
  if (!is_float(t)) {
    BigInt x = int_value(t, a), y = int_value(t, b);
    return x < y ? -1 : y < x ? 1 : 0;
  }
  if (is_nan(t, a) || is_nan(t, b)) return std::nullopt;
  auto rank = [&](uint64_t v) { return is_inf(t, v) ? (sign_bit(t, v) ? -1 : 1) : 0; };
  int ra = rank(a), rb = rank(b);
  if (ra != rb) return ra < rb ? -1 : 1;
  if (ra != 0) return 0;
  Rational x = float_value(t, a), y = float_value(t, b);
  return x < y ? -1 : y < x ? 1 : 0;
}

// XLA: if isnan(lhs) return lhs; if isnan(rhs) return rhs; std::max(lhs, rhs) = lhs < rhs ? rhs : lhs.
uint64_t max(DType t, uint64_t a, uint64_t b) {
  if (is_float(t)) {
    if (is_nan(t, a)) return a;
    if (is_nan(t, b)) return b;
  }
  return compare(t, a, b).value() < 0 ? b : a;
}
// std::min(lhs, rhs) = rhs < lhs ? rhs : lhs.
uint64_t min(DType t, uint64_t a, uint64_t b) {
  if (is_float(t)) {
    if (is_nan(t, a)) return a;
    if (is_nan(t, b)) return b;
  }
  return compare(t, b, a).value() < 0 ? b : a;
}

bool same(DType t, uint64_t a, uint64_t b) {
  if (is_float(t) && is_nan(t, a) && is_nan(t, b)) return true;
  return (a & mask(t)) == (b & mask(t));
}

Rational exact(double v) {
  mpq_class q(v);
  return Rational(BigInt(q.get_num()), BigInt(q.get_den()));
}

std::optional<uint64_t> from_rational(DType t, const Rational& x) {
  if (is_float(t)) return round_to(t, x);
  if (!x.is_integer() || !fits(t, x.num())) return std::nullopt;
  return wrap(t, x.num());
}

std::optional<uint64_t> literal_bits(DType t, const Literal& l) {
  switch (l.kind) {
    case Literal::Kind::Bool: return std::nullopt;
    case Literal::Kind::NaN: return is_float(t) ? std::optional<uint64_t>(nan_bits(t)) : std::nullopt;
    case Literal::Kind::PosInf:
    case Literal::Kind::NegInf:
      if (!is_float(t)) return std::nullopt;
      return inf_bits(t, l.kind == Literal::Kind::NegInf);
    case Literal::Kind::Int:
    case Literal::Kind::Real: {
      Rational x(BigInt(l.num), BigInt(l.den));
      if (is_float(t)) return round_to(t, x, l.neg_zero);
      return from_rational(t, x);
    }
  }
  return std::nullopt;
}

namespace {
// The exact value of a decimal in C's %e form ("-1.2345e-07").
Rational parse_e(const std::string& s) {
  size_t epos = s.find('e');
  std::string mant = s.substr(0, epos);
  long ex = std::stol(s.substr(epos + 1));
  std::string digits;
  long frac = 0;
  bool neg = false, dot = false;
  for (char c : mant) {
    if (c == '-') neg = true;
    else if (c == '.') dot = true;
    else {
      digits += c;
      if (dot) ++frac;
    }
  }
  BigInt n(digits);
  if (neg) n = -n;
  long p = ex - frac;
  BigInt ten;
  mpz_ui_pow_ui(ten.get_mpz_t(), 10, static_cast<unsigned long>(p < 0 ? -p : p));
  return p >= 0 ? Rational(BigInt(n * ten)) : Rational(n, ten);
}
}  // namespace

std::string literal_text(DType t, uint64_t bits) {
  if (!is_float(t)) return int_value(t, bits).get_str();
  if (is_nan(t, bits)) return "nan";
  if (is_inf(t, bits)) return sign_bit(t, bits) ? "-inf" : "inf";
  if (is_zero(t, bits)) return sign_bit(t, bits) ? "-0.0" : "0.0";
  double v = float_value(t, bits).to_double();  // exact: every format here fits in binary64
  char buf[64];
  std::string out;
  for (int p = 1; p <= 17; ++p) {  // the shortest decimal that rounds back to these bits
    std::snprintf(buf, sizeof buf, "%.*e", p - 1, v);
    if (round_to(t, parse_e(buf)) == bits) {
      std::snprintf(buf, sizeof buf, "%.*g", p, v);
      out = buf;
      break;
    }
  }
  if (out.find_first_of(".e") == std::string::npos) out += ".0";
  return out;
}

std::string str(DType t, uint64_t bits) {
  if (!is_float(t)) return literal_text(t, bits);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%0*llx", bit_width(t) / 4, static_cast<unsigned long long>(bits & mask(t)));
  return literal_text(t, bits) + " (" + hex + ")";
}

}  // namespace tr::mach
