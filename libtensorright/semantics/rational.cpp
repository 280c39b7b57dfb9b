#include "libtensorright/semantics/rational.h"

#include <cmath>
#include <limits>

namespace tr {

namespace {
// 128-bit intermediate for checked int64 arithmetic (__extension__ keeps -Wpedantic quiet).
__extension__ typedef __int128 i128;
constexpr i128 kMax = std::numeric_limits<int64_t>::max();
constexpr i128 kMin = std::numeric_limits<int64_t>::min();

int64_t fit(i128 v, const char* what) {
  if (v > kMax || v < kMin) throw EvalOverflow(std::string("integer overflow in ") + what + " of a size or index");
  return static_cast<int64_t>(v);
}

// A decimal integer with an optional leading '-': the only form accepted by parse_bigint (GMP
// itself would also accept white space and other bases).
bool plain_integer(const std::string& s) {
  size_t i = !s.empty() && s[0] == '-' ? 1 : 0;
  if (i == s.size()) return false;
  for (; i < s.size(); ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
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

BigInt floor_div(const BigInt& a, const BigInt& b) {
  if (b == 0) throw std::domain_error("integer division by zero");
  BigInt q;
  mpz_fdiv_q(q.get_mpz_t(), a.get_mpz_t(), b.get_mpz_t());
  return q;
}

BigInt floor_mod(const BigInt& a, const BigInt& b) {
  if (b == 0) throw std::domain_error("integer division by zero");
  BigInt r;
  mpz_fdiv_r(r.get_mpz_t(), a.get_mpz_t(), b.get_mpz_t());
  return r;
}

BigInt trunc_rem(const BigInt& a, const BigInt& b) {
  if (b == 0) throw std::domain_error("integer division by zero");
  BigInt r;
  mpz_tdiv_r(r.get_mpz_t(), a.get_mpz_t(), b.get_mpz_t());
  return r;
}

std::optional<int64_t> to_int64(const BigInt& v) {
  static_assert(sizeof(long) == sizeof(int64_t), "GMP's si conversions are used for int64_t");
  if (!v.fits_slong_p()) return std::nullopt;
  return static_cast<int64_t>(v.get_si());
}

int64_t to_int64(const BigInt& v, const std::string& what, const std::string& where) {
  if (auto r = to_int64(v)) return *r;
  std::string digits = v.get_str();
  if (digits.size() > 40) digits = digits.substr(0, 20) + "... (" + std::to_string(digits.size()) + " characters)";
  throw EvalOverflow(what + " " + digits + " does not fit in 64 bits (sizes and indices are machine integers)" +
                     where);
}

BigInt parse_bigint(const std::string& s) {
  if (!plain_integer(s)) throw std::invalid_argument("not an integer: '" + s + "'");
  return BigInt(s, 10);
}

Rational::Rational(std::unique_ptr<mpq_class> q) {
  if (sgn(*q) != 0) q_ = std::move(q);
}

Rational Rational::apply(void (*f)(mpq_ptr, mpq_srcptr, mpq_srcptr), const Rational& a, const Rational& b) {
  auto r = std::make_unique<mpq_class>();
  f(r->get_mpq_t(), a.mpq().get_mpq_t(), b.mpq().get_mpq_t());
  return Rational(std::move(r));
}

Rational Rational::operator+(const Rational& o) const { return apply(&mpq_add, *this, o); }
Rational Rational::operator-(const Rational& o) const { return apply(&mpq_sub, *this, o); }
Rational Rational::operator*(const Rational& o) const { return apply(&mpq_mul, *this, o); }
Rational Rational::operator-() const {
  Rational r(*this);
  if (r.q_) mpq_neg(r.q_->get_mpq_t(), r.q_->get_mpq_t());
  return r;
}

Rational::Rational(int64_t n) {
  if (n != 0) q_ = std::make_unique<mpq_class>(static_cast<long>(n));
}

Rational::Rational(const BigInt& n) {
  if (n != 0) q_ = std::make_unique<mpq_class>(n);
}

Rational::Rational(int64_t n, int64_t d) : Rational(BigInt(static_cast<long>(n)), BigInt(static_cast<long>(d))) {}

Rational::Rational(const BigInt& n, const BigInt& d) {
  if (d == 0) throw std::invalid_argument("rational with zero denominator");
  if (n == 0) return;
  q_ = std::make_unique<mpq_class>(n, d);
  q_->canonicalize();
}

Rational& Rational::operator=(const Rational& o) {
  if (this != &o) q_ = o.q_ ? std::make_unique<mpq_class>(*o.q_) : nullptr;
  return *this;
}

const mpq_class& Rational::zero() {
  static const mpq_class z;
  return z;
}

Rational Rational::parse(const std::string& s) {
  auto slash = s.find('/');
  if (slash == std::string::npos) return Rational(parse_bigint(s));
  return Rational(parse_bigint(s.substr(0, slash)), parse_bigint(s.substr(slash + 1)));
}

Rational Rational::operator/(const Rational& o) const {
  if (o.sign() == 0) throw std::domain_error("rational division by zero");
  return apply(&mpq_div, *this, o);
}

BigInt Rational::trunc() const {
  BigInt t;
  mpz_tdiv_q(t.get_mpz_t(), mpq().get_num_mpz_t(), mpq().get_den_mpz_t());
  return t;
}

Rational Rational::approximate(double x, int64_t max_den) {
  if (!std::isfinite(x)) throw EvalOverflow("a real value beyond the range of double cannot be approximated");
  // Continued-fraction convergents p/q of x, stopping before q exceeds max_den.
  BigInt p0 = 0, q0 = 1, p1 = 1, q1 = 0;
  double rest = x;
  for (int step = 0; step < 64; ++step) {
    double a = std::floor(rest);
    BigInt ai(a);  // exact: a is an integral double
    BigInt p2 = ai * p1 + p0, q2 = ai * q1 + q0;
    if (q2 > max_den) break;
    p0 = p1;
    q0 = q1;
    p1 = p2;
    q1 = q2;
    double frac = rest - a;
    if (frac < 1e-15) break;
    rest = 1.0 / frac;
  }
  if (q1 == 0) throw EvalOverflow("a real value cannot be approximated");
  return Rational(p1, q1);
}

std::string Rational::str() const {
  const mpq_class& q = mpq();
  return is_integer() ? q.get_num().get_str() : q.get_num().get_str() + "/" + q.get_den().get_str();
}

}  // namespace tr
