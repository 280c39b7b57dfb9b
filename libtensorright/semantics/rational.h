#pragma once
// An exact rational with int64 numerator and denominator. Every operation is computed in 128 bits
// and checked: a result that does not fit throws EvalOverflow instead of wrapping, so a concrete
// evaluation is either exact or an explicit error.
#include <cstdint>
#include <stdexcept>
#include <string>

namespace tr {

// 128-bit intermediate for checked arithmetic (__extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 i128;

// Thrown when an exact Int or Real result does not fit in 64 bits.
struct EvalOverflow : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Checked int64 arithmetic (throws EvalOverflow).
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_sub(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
int64_t checked_neg(int64_t a);
// Floor division and modulus (result of mod has the sign of the divisor); b != 0.
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);

class Rational {
 public:
  Rational() = default;
  Rational(int64_t n) : num_(n) {}  // NOLINT: integers convert implicitly
  Rational(int64_t n, int64_t d);   // throws std::invalid_argument when d == 0

  int64_t num() const { return num_; }
  int64_t den() const { return den_; }
  bool is_integer() const { return den_ == 1; }
  int sign() const { return num_ > 0 ? 1 : num_ < 0 ? -1 : 0; }

  Rational operator+(const Rational& o) const;
  Rational operator-(const Rational& o) const;
  Rational operator*(const Rational& o) const;
  Rational operator/(const Rational& o) const;  // throws std::domain_error on division by zero
  Rational operator-() const;
  bool operator==(const Rational& o) const { return num_ == o.num_ && den_ == o.den_; }
  bool operator<(const Rational& o) const;
  bool operator<=(const Rational& o) const { return !(o < *this); }
  bool operator>(const Rational& o) const { return o < *this; }
  bool operator>=(const Rational& o) const { return !(*this < o); }

  double to_double() const { return static_cast<double>(num_) / static_cast<double>(den_); }
  // The best rational approximation of x with denominator <= max_den (continued fractions);
  // throws EvalOverflow when x is not finite or out of int64 range.
  static Rational approximate(double x, int64_t max_den = 1000000);
  std::string str() const;  // "n" or "n/d"

 private:
  static Rational make(i128 n, i128 d);  // reduce, normalise the sign, check the range
  int64_t num_ = 0, den_ = 1;
};

}  // namespace tr
