#include "libtensorright/semantics/rational.h"

#include <cmath>
#include <limits>
#include <numeric>

namespace tr {

namespace {
constexpr i128 kMax = std::numeric_limits<int64_t>::max();
constexpr i128 kMin = std::numeric_limits<int64_t>::min();

int64_t fit(i128 v, const char* what) {
  if (v > kMax || v < kMin) throw EvalOverflow(std::string("integer overflow in ") + what);
  return static_cast<int64_t>(v);
}

i128 gcd128(i128 a, i128 b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b != 0) {
    i128 t = a % b;
    a = b;
    b = t;
  }
  return a;
}
}  // namespace

int64_t checked_add(int64_t a, int64_t b) { return fit(static_cast<i128>(a) + b, "addition"); }
int64_t checked_sub(int64_t a, int64_t b) { return fit(static_cast<i128>(a) - b, "subtraction"); }
int64_t checked_mul(int64_t a, int64_t b) {
  return fit(static_cast<i128>(a) * b, "multiplication");
}
int64_t checked_neg(int64_t a) { return fit(-static_cast<i128>(a), "negation"); }

int64_t floor_div(int64_t a, int64_t b) {
  i128 q = static_cast<i128>(a) / b, r = static_cast<i128>(a) % b;
  if (r != 0 && ((r < 0) != (b < 0))) --q;  // C++ truncates; floor rounds toward -inf
  return fit(q, "division");
}

int64_t floor_mod(int64_t a, int64_t b) {
  i128 r = static_cast<i128>(a) % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return static_cast<int64_t>(r);
}

Rational::Rational(int64_t n, int64_t d) {
  if (d == 0) throw std::invalid_argument("rational with zero denominator");
  *this = make(n, d);
}

Rational Rational::make(i128 n, i128 d) {
  if (d < 0) {
    n = -n;
    d = -d;
  }
  i128 g = gcd128(n, d);
  if (g > 1) {
    n /= g;
    d /= g;
  }
  Rational r;
  r.num_ = fit(n, "rational arithmetic");
  r.den_ = fit(d, "rational arithmetic");
  return r;
}

Rational Rational::operator+(const Rational& o) const {
  return make(static_cast<i128>(num_) * o.den_ + static_cast<i128>(o.num_) * den_,
              static_cast<i128>(den_) * o.den_);
}
Rational Rational::operator-(const Rational& o) const { return *this + (-o); }
Rational Rational::operator*(const Rational& o) const {
  return make(static_cast<i128>(num_) * o.num_, static_cast<i128>(den_) * o.den_);
}
Rational Rational::operator/(const Rational& o) const {
  if (o.num_ == 0) throw std::domain_error("rational division by zero");
  return make(static_cast<i128>(num_) * o.den_, static_cast<i128>(den_) * o.num_);
}
Rational Rational::operator-() const { return make(-static_cast<i128>(num_), den_); }
bool Rational::operator<(const Rational& o) const {
  return static_cast<i128>(num_) * o.den_ < static_cast<i128>(o.num_) * den_;
}

Rational Rational::approximate(double x, int64_t max_den) {
  if (!std::isfinite(x) || std::fabs(x) > 9.0e18) throw EvalOverflow("real value out of range");
  // Continued-fraction convergents p/q of x, stopping before q exceeds max_den.
  i128 p0 = 0, q0 = 1, p1 = 1, q1 = 0;
  double rest = x;
  for (int step = 0; step < 64; ++step) {
    double a = std::floor(rest);
    if (std::fabs(a) > 9.0e18) break;
    i128 ai = static_cast<i128>(a);
    i128 p2 = ai * p1 + p0, q2 = ai * q1 + q0;
    if (q2 > max_den || p2 > kMax || p2 < kMin) break;
    p0 = p1;
    q0 = q1;
    p1 = p2;
    q1 = q2;
    double frac = rest - a;
    if (frac < 1e-15) break;
    rest = 1.0 / frac;
  }
  if (q1 == 0) throw EvalOverflow("real value out of range");
  return make(p1, q1);
}

std::string Rational::str() const {
  return den_ == 1 ? std::to_string(num_) : std::to_string(num_) + "/" + std::to_string(den_);
}

}  // namespace tr
