// Folding term construction on top of cvc5::Solver (see encode.h).
#include <algorithm>
#include <unordered_set>

#include "libtensorright/encode/encode.h"

namespace tr::enc {

using cvc5::Kind;

Builder::Builder(cvc5::Solver& solver)
    : s(solver),
      Int(solver.getIntegerSort()),
      Real(solver.getRealSort()),
      Bool(solver.getBooleanSort()),
      T(solver.mkTrue()),
      F(solver.mkFalse()),
      zero(solver.mkInteger(0)) {}

Term Builder::integer(int64_t v) const { return s.mkInteger(v); }
Term Builder::real(int64_t num, int64_t den) const { return s.mkReal(num, den); }

std::optional<int64_t> Builder::int_value(const Term& t) {
  if (t.getKind() == Kind::CONST_INTEGER && t.isInt64Value()) return t.getInt64Value();
  return std::nullopt;
}
bool Builder::is_true(const Term& t) { return t.getKind() == Kind::CONST_BOOLEAN && t.getBooleanValue(); }
bool Builder::is_false(const Term& t) { return t.getKind() == Kind::CONST_BOOLEAN && !t.getBooleanValue(); }

Term Builder::to_real(const Term& t) const {
  if (t.getSort() == Real) return t;
  if (auto v = int_value(t)) return s.mkReal(*v);
  return s.mkTerm(Kind::TO_REAL, {t});
}

void Builder::unify(Term& a, Term& b) const {
  if (a.getSort() == Real && b.getSort() == Int) b = to_real(b);
  if (b.getSort() == Real && a.getSort() == Int) a = to_real(a);
}

Term Builder::and_(std::vector<Term> xs) const {
  std::vector<Term> out;
  std::unordered_set<Term> seen;
  for (auto& x : xs) {
    if (is_true(x)) continue;
    if (is_false(x)) return F;
    if (seen.insert(x).second) out.push_back(x);
  }
  if (out.empty()) return T;
  if (out.size() == 1) return out[0];
  return s.mkTerm(Kind::AND, out);
}

Term Builder::or_(std::vector<Term> xs) const {
  std::vector<Term> out;
  std::unordered_set<Term> seen;
  for (auto& x : xs) {
    if (is_false(x)) continue;
    if (is_true(x)) return T;
    if (seen.insert(x).second) out.push_back(x);
  }
  if (out.empty()) return F;
  if (out.size() == 1) return out[0];
  return s.mkTerm(Kind::OR, out);
}

Term Builder::not_(const Term& a) const {
  if (is_true(a)) return F;
  if (is_false(a)) return T;
  if (a.getKind() == Kind::NOT) return a[0];
  return s.mkTerm(Kind::NOT, {a});
}

Term Builder::implies(const Term& a, const Term& c) const {
  if (is_true(a)) return c;
  if (is_false(a) || is_true(c)) return T;
  if (is_false(c)) return not_(a);
  if (a == c) return T;
  return s.mkTerm(Kind::IMPLIES, {a, c});
}

Term Builder::iff(const Term& a, const Term& c) const {
  if (a == c) return T;
  if (is_true(a)) return c;
  if (is_true(c)) return a;
  if (is_false(a)) return not_(c);
  if (is_false(c)) return not_(a);
  return s.mkTerm(Kind::EQUAL, {a, c});
}

Term Builder::ite(const Term& c, const Term& a, const Term& e) const {
  if (is_true(c)) return a;
  if (is_false(c)) return e;
  Term x = a, y = e;
  unify(x, y);
  if (x == y) return x;
  if (x.getSort() == Bool) {
    if (is_true(x) && is_false(y)) return c;
    if (is_false(x) && is_true(y)) return not_(c);
    if (is_true(x)) return or_({c, y});
    if (is_false(y)) return and_({c, x});
  }
  return s.mkTerm(Kind::ITE, {c, x, y});
}

Term Builder::eq(Term a, Term c) const {
  unify(a, c);
  if (a == c) return T;
  if (a.getSort() == Bool) return iff(a, c);
  auto x = int_value(a), y = int_value(c);
  if (x && y) return *x == *y ? T : F;
  if (a.getKind() == Kind::CONST_RATIONAL && c.getKind() == Kind::CONST_RATIONAL)
    return a.getRealValue() == c.getRealValue() ? T : F;
  return s.mkTerm(Kind::EQUAL, {a, c});
}

Term Builder::lt(Term a, Term c) const {
  unify(a, c);
  if (a == c) return F;
  auto x = int_value(a), y = int_value(c);
  if (x && y) return *x < *y ? T : F;
  return s.mkTerm(Kind::LT, {a, c});
}

Term Builder::le(Term a, Term c) const {
  unify(a, c);
  if (a == c) return T;
  auto x = int_value(a), y = int_value(c);
  if (x && y) return *x <= *y ? T : F;
  return s.mkTerm(Kind::LEQ, {a, c});
}

namespace {
// Checked int64 arithmetic for folding: nullopt on overflow (the term is then left unfolded).
std::optional<int64_t> fold_add(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> fold_sub(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) return std::nullopt;
  return r;
}
std::optional<int64_t> fold_mul(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) return std::nullopt;
  return r;
}
}  // namespace

Term Builder::add(Term a, Term c) const {
  unify(a, c);
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_add(*x, *y)) return integer(*r);
  if (x && *x == 0) return c;
  if (y && *y == 0) return a;
  return s.mkTerm(Kind::ADD, {a, c});
}

Term Builder::sub(Term a, Term c) const {
  unify(a, c);
  if (a == c) return a.getSort() == Real ? real(0) : zero;
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_sub(*x, *y)) return integer(*r);
  if (y && *y == 0) return a;
  return s.mkTerm(Kind::SUB, {a, c});
}

Term Builder::mul(Term a, Term c) const {
  unify(a, c);
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_mul(*x, *y)) return integer(*r);
  if ((x && *x == 0) || (y && *y == 0)) return zero;
  if (x && *x == 1) return c;
  if (y && *y == 1) return a;
  return s.mkTerm(Kind::MULT, {a, c});
}

Term Builder::neg(const Term& a) const {
  if (auto x = int_value(a))
    if (auto r = fold_sub(0, *x)) return integer(*r);
  if (a.getKind() == Kind::NEG) return a[0];
  return s.mkTerm(Kind::NEG, {a});
}

Term Builder::abs(const Term& a) const {
  if (auto x = int_value(a))
    if (auto r = (*x < 0 ? fold_sub(0, *x) : std::optional<int64_t>(*x))) return integer(*r);
  Term z = a.getSort() == Real ? real(0) : zero;
  return ite(lt(a, z), neg(a), a);
}

Term Builder::min(Term a, Term c) const { return ite(le(a, c), a, c); }
Term Builder::max(Term a, Term c) const { return ite(le(c, a), a, c); }

Term Builder::ediv(const Term& a, const Term& c) const {
  auto x = int_value(a), y = int_value(c);
  if (y && *y == 0) return zero;
  if (y && *y == 1) return a;
  if (x && y) {  // Euclidean: remainder in [0, |y|)
    int64_t q = *x / *y, r = *x % *y;
    if (r < 0) q += (*y > 0 ? -1 : 1);
    return integer(q);
  }
  Term d = s.mkTerm(Kind::INTS_DIVISION, {a, c});
  return y ? d : ite(eq(c, zero), zero, d);
}

Term Builder::emod(const Term& a, const Term& c) const {
  auto x = int_value(a), y = int_value(c);
  if (y && *y == 0) return a;
  if (y && (*y == 1 || *y == -1)) return zero;
  if (x && y) {
    int64_t r = *x % *y;
    if (r < 0) r += (*y > 0 ? *y : -*y);
    return integer(r);
  }
  Term m = s.mkTerm(Kind::INTS_MODULUS, {a, c});
  return y ? m : ite(eq(c, zero), a, m);
}

// floor(a / c): equals Euclidean division for c > 0, and ediv(-a, -c) for c < 0.
Term Builder::floor_div(const Term& a, const Term& c) const {
  auto y = int_value(c);
  if (y) {
    if (*y == 0) return zero;
    if (*y > 0) return ediv(a, c);
    return ediv(neg(a), neg(c));
  }
  Term pos = s.mkTerm(Kind::INTS_DIVISION, {a, c});
  Term negd = s.mkTerm(Kind::INTS_DIVISION, {neg(a), neg(c)});
  return ite(lt(zero, c), pos, ite(lt(c, zero), negd, zero));
}

// Truncated remainder: |a| mod |c| with the sign of a; a % 0 = a.
Term Builder::trunc_rem(const Term& a, const Term& c) const {
  auto x = int_value(a), y = int_value(c);
  if (y && *y == 0) return a;
  if (x && y) return integer(*x % *y);
  Term m = s.mkTerm(Kind::INTS_MODULUS, {a, c});
  Term mn = s.mkTerm(Kind::INTS_MODULUS, {neg(a), c});
  Term r = ite(le(zero, a), m, neg(mn));
  if (y) return r;
  r = ite(eq(c, zero), a, r);
  rems.push_back({a, c, r});
  return r;
}

// rem(a + c, c) = rem(a, c) whenever a + c and a have the same sign (both >= 0 or both < 0; for
// c = 0 both sides are a): a theorem of truncated remainder, instantiated for every pair of
// remainders in the query with the same symbolic divisor whose dividends differ by it.
std::vector<Term> Builder::rem_lemmas() const {
  std::vector<Term> out;
  for (const auto& [a1, c1, r1] : rems)
    for (const auto& [a2, c2, r2] : rems) {
      if (!(c1 == c2) || a1.getKind() != Kind::ADD || a1.getNumChildren() != 2) continue;
      bool shifted = (a1[0] == a2 && a1[1] == c1) || (a1[1] == a2 && a1[0] == c1);
      if (!shifted) continue;
      Term same_sign = or_({and_({le(zero, a1), le(zero, a2)}), and_({lt(a1, zero), lt(a2, zero)})});
      out.push_back(implies(same_sign, eq(r1, r2)));
    }
  return out;
}

// x / y = x * inv(y) with inv(y) = 1/y, inv(0) = 0 (so x / 0 = 0). Sharing one inverse term per
// divisor lets the solver relate A / c and A * (1 / c) without nonlinear reasoning.
Term Builder::real_div(const Term& a0, const Term& c0) const {
  Term a = to_real(a0), c = to_real(c0);
  return mul(a, inverse(c));
}

Term Builder::inverse(const Term& c0) const {
  Term c = to_real(c0);
  Term z = real(0);
  if (c.getKind() == Kind::CONST_RATIONAL) {
    if (c.getRealValue() == "0" || c.getRealValue() == "0/1" || c.getRealValue() == "0.0") return z;
    return s.mkTerm(Kind::DIVISION, {real(1), c});
  }
  return ite(eq(c, z), z, s.mkTerm(Kind::DIVISION, {real(1), c}));
}

Term Builder::real_rem(const Term& a0, const Term& c0) const {
  Term a = to_real(a0), c = to_real(c0);
  Term z = real(0);
  Term q = s.mkTerm(Kind::DIVISION, {a, c});
  // trunc(q) = floor(q) for q >= 0, -floor(-q) otherwise.
  Term tq = ite(le(z, q), s.mkTerm(Kind::TO_INTEGER, {q}), neg(s.mkTerm(Kind::TO_INTEGER, {neg(q)})));
  Term r = sub(a, mul(c, to_real(tq)));
  return ite(eq(c, z), a, r);
}

}  // namespace tr::enc
