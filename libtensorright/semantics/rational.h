#pragma once
// Exact numbers of the concrete evaluator: arbitrary-precision integers (GMP's mpz_class, named
// BigInt here) and rationals (a thin wrapper around mpq_class, always in lowest terms). Element
// arithmetic never overflows. Machine integers remain only where a value becomes a size, an index
// or an attribute (shapes are vectors of int64_t); there checked int64 arithmetic throws
// EvalOverflow instead of wrapping, so a concrete evaluation is either exact or an explicit error.
#include <gmpxx.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace tr {

using BigInt = mpz_class;

// Thrown when a value must become a machine number and does not fit: a size, index or attribute
// beyond int64, or an exp argument whose result leaves double's range.
struct EvalOverflow : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Checked int64 arithmetic on sizes and indices (throws EvalOverflow).
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_sub(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);
int64_t checked_neg(int64_t a);
// Floor division and modulus (result of mod has the sign of the divisor); b != 0.
int64_t floor_div(int64_t a, int64_t b);
int64_t floor_mod(int64_t a, int64_t b);
// The same on exact integers; b != 0 (throws std::domain_error otherwise).
BigInt floor_div(const BigInt& a, const BigInt& b);
BigInt floor_mod(const BigInt& a, const BigInt& b);
BigInt trunc_rem(const BigInt& a, const BigInt& b);  // sign of the dividend

// v as an int64_t, or nullopt when it does not fit.
std::optional<int64_t> to_int64(const BigInt& v);
// v as an int64_t; otherwise throws EvalOverflow "<what> <v> does not fit in 64 bits ...<where>"
// (a long v is shortened in the message).
int64_t to_int64(const BigInt& v, const std::string& what, const std::string& where = "");
// Parses an optionally signed decimal integer exactly ("-123"); throws std::invalid_argument.
BigInt parse_bigint(const std::string& s);

// A rational in lowest terms. The mpq_class is allocated only for a non-zero value, so that the
// many default and zero values of the evaluator (every Value has a Rational) cost no allocation.
class Rational {
 public:
  Rational() = default;
  Rational(int64_t n);                         // NOLINT: integers convert implicitly
  Rational(const BigInt& n);                   // NOLINT
  Rational(int64_t n, int64_t d);              // throws std::invalid_argument when d == 0
  Rational(const BigInt& n, const BigInt& d);  // throws std::invalid_argument when d == 0
  Rational(const Rational& o) : q_(o.q_ ? std::make_unique<mpq_class>(*o.q_) : nullptr) {}
  Rational(Rational&&) noexcept = default;
  Rational& operator=(const Rational& o);
  Rational& operator=(Rational&&) noexcept = default;
  ~Rational() = default;
  // Parses "n" or "n/d" (optionally signed, exact); throws std::invalid_argument.
  static Rational parse(const std::string& s);

  const mpq_class& mpq() const { return q_ ? *q_ : zero(); }
  BigInt num() const { return mpq().get_num(); }
  BigInt den() const { return mpq().get_den(); }
  bool is_integer() const { return mpq().get_den() == 1; }
  int sign() const { return q_ ? sgn(*q_) : 0; }

  Rational operator+(const Rational& o) const;
  Rational operator-(const Rational& o) const;
  Rational operator*(const Rational& o) const;
  Rational operator/(const Rational& o) const;  // throws std::domain_error on division by zero
  Rational operator-() const;
  bool operator==(const Rational& o) const { return cmp(mpq(), o.mpq()) == 0; }
  bool operator<(const Rational& o) const { return cmp(mpq(), o.mpq()) < 0; }
  bool operator<=(const Rational& o) const { return cmp(mpq(), o.mpq()) <= 0; }
  bool operator>(const Rational& o) const { return cmp(mpq(), o.mpq()) > 0; }
  bool operator>=(const Rational& o) const { return cmp(mpq(), o.mpq()) >= 0; }

  // The integer part, rounded toward zero.
  BigInt trunc() const;
  double to_double() const { return mpq().get_d(); }
  // The best rational approximation of x with denominator <= max_den (continued fractions);
  // throws EvalOverflow when x is not finite.
  static Rational approximate(double x, int64_t max_den = 1000000);
  std::string str() const;  // "n" or "n/d", every digit

 private:
  explicit Rational(std::unique_ptr<mpq_class> q);  // *q canonical
  // The result of f(out, a, b) (an mpq_* function), computed in place.
  static Rational apply(void (*f)(mpq_ptr, mpq_srcptr, mpq_srcptr), const Rational& a, const Rational& b);
  static const mpq_class& zero();
  std::unique_ptr<mpq_class> q_;  // null: the value 0
};

}  // namespace tr
