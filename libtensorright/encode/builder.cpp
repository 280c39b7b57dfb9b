// Folding term construction on top of cvc5::Solver (see encode.h).
#include <algorithm>
#include <functional>
#include <iterator>
#include <unordered_set>

#include "libtensorright/encode/encode.h"

namespace tr::enc {

using cvc5::Kind;

namespace {
bool accumulate(Builder::Poly& p, const Builder::Poly& q, int64_t sign);
}  // namespace

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
// cvc5 takes exact values of any size as decimal strings ("-12", "7/3").
Term Builder::integer(const mpz_class& v) const {
  return v.fits_slong_p() ? s.mkInteger(static_cast<int64_t>(v.get_si())) : s.mkInteger(v.get_str());
}
Term Builder::real(const mpz_class& num, const mpz_class& den) const {
  mpq_class q(num, den);
  q.canonicalize();
  return s.mkReal(q.get_str());
}

std::optional<int64_t> Builder::int_value(const Term& t) {
  if (t.getKind() == Kind::CONST_INTEGER && t.isInt64Value()) return t.getInt64Value();
  return std::nullopt;
}
bool Builder::is_true(const Term& t) { return t.getKind() == Kind::CONST_BOOLEAN && t.getBooleanValue(); }
bool Builder::is_false(const Term& t) { return t.getKind() == Kind::CONST_BOOLEAN && !t.getBooleanValue(); }

Term Builder::to_real(const Term& t) const {
  if (t.getSort() == Real) return t;
  if (auto v = int_value(t)) return s.mkReal(*v);
  if (t.getKind() == Kind::CONST_INTEGER) return s.mkReal(t.getIntegerValue());  // beyond int64
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

// The constant difference a - c of two Int terms, when it is one.
std::optional<int64_t> Builder::const_diff(const Term& a, const Term& c) const {
  if (a.getSort() != Int || c.getSort() != Int) return std::nullopt;
  auto pa = poly(a), pc = poly(c);
  if (!pa || !pc || !accumulate(*pa, *pc, -1)) return std::nullopt;
  if (pa->empty()) return 0;
  if (pa->size() == 1 && pa->begin()->first.empty()) return pa->begin()->second;
  return std::nullopt;
}

Term Builder::eq(Term a, Term c) const {
  unify(a, c);
  if (a == c) return T;
  if (a.getSort() == Bool) return iff(a, c);
  if (auto d = const_diff(a, c)) return *d == 0 ? T : F;
  auto x = int_value(a), y = int_value(c);
  if (x && y) return *x == *y ? T : F;
  if (a.getKind() == Kind::CONST_RATIONAL && c.getKind() == Kind::CONST_RATIONAL)
    return a.getRealValue() == c.getRealValue() ? T : F;
  return s.mkTerm(Kind::EQUAL, {a, c});
}

Term Builder::lt(Term a, Term c) const {
  unify(a, c);
  if (a == c) return F;
  if (auto d = const_diff(a, c)) return *d < 0 ? T : F;
  auto x = int_value(a), y = int_value(c);
  if (x && y) return *x < *y ? T : F;
  return s.mkTerm(Kind::LT, {a, c});
}

Term Builder::le(Term a, Term c) const {
  unify(a, c);
  if (a == c) return T;
  if (auto d = const_diff(a, c)) return *d <= 0 ? T : F;
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

// p += sign * q; false on int64 overflow.
bool accumulate(Builder::Poly& p, const Builder::Poly& q, int64_t sign) {
  for (const auto& [m, c] : q) {
    auto d = fold_mul(c, sign);
    if (!d) return false;
    auto sum = fold_add(p[m], *d);
    if (!sum) return false;
    if (*sum == 0)
      p.erase(m);
    else
      p[m] = *sum;
  }
  return true;
}

Builder::Mono merge(const Builder::Mono& a, const Builder::Mono& b) {
  Builder::Mono m;
  std::merge(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(m));
  return m;
}

// Euclidean division and modulus of literals (y != 0): remainder in [0, |y|).
int64_t euclid_div(int64_t x, int64_t y) {
  int64_t q = x / y, r = x % y;
  if (r < 0) q += (y > 0 ? -1 : 1);
  return q;
}
int64_t euclid_mod(int64_t x, int64_t y) {
  int64_t r = x % y;
  if (r < 0) r += (y > 0 ? y : -y);
  return r;
}
}  // namespace

// ---- polynomial normal form of Int terms -----------------------------------------------------------

std::optional<Builder::Poly> Builder::poly(const Term& t) const {
  if (t.getSort() != Int) return std::nullopt;
  if (auto it = poly_cache_.find(t); it != poly_cache_.end()) return it->second;
  Poly p;
  switch (t.getKind()) {
    case Kind::CONST_INTEGER: {
      auto v = int_value(t);
      if (!v) return std::nullopt;
      if (*v != 0) p[{}] = *v;
      break;
    }
    case Kind::ADD:
    case Kind::SUB:
      for (size_t i = 0; i < t.getNumChildren(); ++i) {
        auto c = poly(t[i]);
        if (!c || !accumulate(p, *c, t.getKind() == Kind::SUB && i > 0 ? -1 : 1)) return std::nullopt;
      }
      break;
    case Kind::NEG: {
      auto c = poly(t[0]);
      if (!c || !accumulate(p, *c, -1)) return std::nullopt;
      break;
    }
    case Kind::MULT: {
      p[{}] = 1;
      for (size_t i = 0; i < t.getNumChildren(); ++i) {
        auto c = poly(t[i]);
        if (!c) return std::nullopt;
        auto r = times(p, *c);
        if (!r) return std::nullopt;
        p = std::move(*r);
      }
      break;
    }
    default: p[{t}] = 1; break;
  }
  poly_cache_[t] = p;
  return p;
}

std::optional<Builder::Poly> Builder::times(const Poly& a, const Poly& b) const {
  Poly r;
  if (a.size() * b.size() > 256) return std::nullopt;  // keep the product as it is written
  for (const auto& [ma, ca] : a)
    for (const auto& [mb, cb] : b) {
      auto c = fold_mul(ca, cb);
      if (!c) return std::nullopt;
      auto m = mono_times(merge(ma, mb), *c);
      if (!m || !accumulate(r, *m, 1)) return std::nullopt;
    }
  return r;
}

// coef * m, where x * ite(x = 0, 0, Y) = x * Y for an atom x of the monomial (both sides are 0 when
// x = 0). This removes the zero-divisor guard of `div` under a multiple of its divisor, so that
// p * ((a + p) div p) and p * (a div p) + p become the same polynomial.
std::optional<Builder::Poly> Builder::mono_times(const Mono& m, int64_t coef) const {
  for (size_t i = 0; i < m.size(); ++i) {
    const Term& a = m[i];
    if (a.getKind() != Kind::ITE || !int_value(a[1]) || *int_value(a[1]) != 0) continue;
    const Term& c = a[0];
    if (c.getKind() != Kind::EQUAL) continue;
    Term x;
    if (int_value(c[1]) && *int_value(c[1]) == 0) x = c[0];
    else if (int_value(c[0]) && *int_value(c[0]) == 0) x = c[1];
    else continue;
    bool has_x = false;
    for (size_t j = 0; j < m.size(); ++j)
      if (j != i && m[j] == x) has_x = true;
    if (!has_x) continue;
    auto y = poly(a[2]);
    if (!y) continue;
    Mono rest = m;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    Poly out;
    for (const auto& [my, cy] : *y) {
      auto c2 = fold_mul(coef, cy);
      if (!c2) return std::nullopt;
      auto part = mono_times(merge(rest, my), *c2);
      if (!part || !accumulate(out, *part, 1)) return std::nullopt;
    }
    return out;
  }
  Poly out;
  if (coef != 0) out[m] = coef;
  return out;
}

Term Builder::from_poly(const Poly& p) const {
  if (p.empty()) return zero;
  std::vector<Term> sum;
  for (const auto& [m, c] : p) {
    if (m.empty()) {
      sum.push_back(integer(c));
      continue;
    }
    std::vector<Term> f;
    if (c != 1) f.push_back(integer(c));
    f.insert(f.end(), m.begin(), m.end());
    sum.push_back(f.size() == 1 ? f[0] : s.mkTerm(Kind::MULT, f));
  }
  Term t = sum.size() == 1 ? sum[0] : s.mkTerm(Kind::ADD, sum);
  poly_cache_.emplace(t, p);
  return t;
}

Term Builder::assume(const Term& t, const std::vector<std::pair<Term, bool>>& facts) const {
  if (facts.empty()) return t;
  std::unordered_map<Term, Term> memo;
  std::function<Term(const Term&)> go = [&](const Term& x) -> Term {
    for (const auto& [f, v] : facts)
      if (x == f) return v ? T : F;
    if (x.getNumChildren() == 0) return x;
    if (auto it = memo.find(x); it != memo.end()) return it->second;
    std::vector<Term> ch;
    bool changed = false;
    for (size_t i = 0; i < x.getNumChildren(); ++i) {
      ch.push_back(go(x[i]));
      changed = changed || !(ch.back() == x[i]);
    }
    Term r = x;
    if (changed) {
      switch (x.getKind()) {
        case Kind::ITE: r = ite(ch[0], ch[1], ch[2]); break;
        case Kind::AND: r = and_(ch); break;
        case Kind::OR: r = or_(ch); break;
        case Kind::NOT: r = not_(ch[0]); break;
        case Kind::IMPLIES: r = implies(ch[0], ch[1]); break;
        case Kind::EQUAL: r = ch.size() == 2 ? eq(ch[0], ch[1]) : s.mkTerm(Kind::EQUAL, ch); break;
        case Kind::LT: r = lt(ch[0], ch[1]); break;
        case Kind::LEQ: r = le(ch[0], ch[1]); break;
        case Kind::ADD:
          r = ch[0];
          for (size_t i = 1; i < ch.size(); ++i) r = add(r, ch[i]);
          break;
        case Kind::SUB:
          r = ch[0];
          for (size_t i = 1; i < ch.size(); ++i) r = sub(r, ch[i]);
          break;
        case Kind::MULT:
          r = ch[0];
          for (size_t i = 1; i < ch.size(); ++i) r = mul(r, ch[i]);
          break;
        case Kind::NEG: r = neg(ch[0]); break;
        default:  // indexed operators (bit-vector extracts, conversions) keep their indices
          r = x.hasOp() && x.getOp().isIndexed() ? s.mkTerm(x.getOp(), ch) : s.mkTerm(x.getKind(), ch);
          break;
      }
    }
    memo.emplace(x, r);
    return r;
  };
  return go(t);
}

Term Builder::raw_divmod(const Term& a0, const Term& c, bool mod,
                         const std::vector<std::pair<Term, bool>>& facts) const {
  Term a = assume(a0, facts);
  auto pa = poly(a), pc = poly(c);
  if (pa && pc && pc->size() == 1) {
    const auto& [cm, ck] = *pc->begin();
    Poly q, r;
    for (const auto& [m, k] : *pa) {
      bool divisible = ck != 0 && !(ck == -1 && k == INT64_MIN) && k % ck == 0 &&
                       std::includes(m.begin(), m.end(), cm.begin(), cm.end());
      if (divisible) {
        Mono rest;
        std::set_difference(m.begin(), m.end(), cm.begin(), cm.end(), std::back_inserter(rest));
        q[rest] = k / ck;
      } else {
        r[m] = k;
      }
    }
    if (!q.empty()) {
      Term rt = from_poly(r);
      auto rv = int_value(rt), cv = int_value(c);
      Term part;
      if (rv && *rv == 0) part = zero;
      else if (rv && cv && !(*rv == INT64_MIN && *cv == -1))
        part = integer(mod ? euclid_mod(*rv, *cv) : euclid_div(*rv, *cv));
      else part = s.mkTerm(mod ? Kind::INTS_MODULUS : Kind::INTS_DIVISION, {rt, c});
      return mod ? part : add(from_poly(q), part);
    }
  }
  return s.mkTerm(mod ? Kind::INTS_MODULUS : Kind::INTS_DIVISION, {a, c});
}

// Sums of fixed-width integers (encode.cpp, reduce.cpp) reuse the ring operations of the Int
// encoding: on bit-vectors they are the modular ones, and the identities the sum encoding relies on
// (commutativity, associativity, distributivity) hold modulo 2^w. Floats never get here: their
// sums are compared element by element only (docs/machine-types.md).
std::optional<Term> Builder::machine_arith(Kind k, const std::vector<Term>& args) const {
  cvc5::Sort so = args[0].getSort();
  if (so.isFloatingPoint()) throw InternalError("ring arithmetic of the Int encoding on a floating-point term");
  if (!so.isBitVector()) return std::nullopt;
  return s.mkTerm(k, args);
}

Term Builder::add(Term a, Term c) const {
  if (auto m = machine_arith(Kind::BITVECTOR_ADD, {a, c})) return *m;
  unify(a, c);
  if (a.getSort() == Int)
    if (auto pa = poly(a), pc = poly(c); pa && pc)
      if (accumulate(*pa, *pc, 1)) return from_poly(*pa);
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_add(*x, *y)) return integer(*r);
  if (x && *x == 0) return c;
  if (y && *y == 0) return a;
  return s.mkTerm(Kind::ADD, {a, c});
}

Term Builder::sub(Term a, Term c) const {
  if (auto m = machine_arith(Kind::BITVECTOR_SUB, {a, c})) return *m;
  unify(a, c);
  if (a == c) return a.getSort() == Real ? real(0) : zero;
  if (a.getSort() == Int)
    if (auto pa = poly(a), pc = poly(c); pa && pc)
      if (accumulate(*pa, *pc, -1)) return from_poly(*pa);
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_sub(*x, *y)) return integer(*r);
  if (y && *y == 0) return a;
  return s.mkTerm(Kind::SUB, {a, c});
}

Term Builder::mul(Term a, Term c) const {
  if (auto m = machine_arith(Kind::BITVECTOR_MULT, {a, c})) return *m;
  unify(a, c);
  if (a.getSort() == Int)
    if (auto pa = poly(a), pc = poly(c); pa && pc)
      if (auto r = times(*pa, *pc)) return from_poly(*r);
  auto x = int_value(a), y = int_value(c);
  if (x && y)
    if (auto r = fold_mul(*x, *y)) return integer(*r);
  if ((x && *x == 0) || (y && *y == 0)) return zero;
  if (x && *x == 1) return c;
  if (y && *y == 1) return a;
  return s.mkTerm(Kind::MULT, {a, c});
}

Term Builder::neg(const Term& a) const {
  if (auto m = machine_arith(Kind::BITVECTOR_NEG, {a})) return *m;
  if (a.getSort() == Int)
    if (auto pa = poly(a)) {
      Poly r;
      if (accumulate(r, *pa, -1)) return from_poly(r);
    }
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
  if (x && y && !(*x == INT64_MIN && *y == -1)) return integer(euclid_div(*x, *y));
  if (y) return raw_divmod(a, c, false, {});
  Term cz = eq(c, zero);
  Term q = ite(cz, zero, raw_divmod(a, c, false, {{cz, false}}));
  divs.push_back({a, c, q});
  return q;
}

Term Builder::emod(const Term& a, const Term& c) const {
  auto x = int_value(a), y = int_value(c);
  if (y && *y == 0) return a;
  if (y && (*y == 1 || *y == -1)) return zero;
  if (x && y) return integer(euclid_mod(*x, *y));
  if (y) return raw_divmod(a, c, true, {});
  Term cz = eq(c, zero);
  return ite(cz, a, raw_divmod(a, c, true, {{cz, false}}));
}

// floor(a / c): equals Euclidean division for c > 0, and ediv(-a, -c) for c < 0.
Term Builder::floor_div(const Term& a, const Term& c) const {
  auto y = int_value(c);
  if (y) {
    if (*y == 0) return zero;
    if (*y > 0) return ediv(a, c);
    return ediv(neg(a), neg(c));
  }
  Term cp = lt(zero, c), cn = lt(c, zero), cz = eq(c, zero);
  Term pos = raw_divmod(a, c, false, {{cp, true}, {cn, false}, {cz, false}});
  Term negd = raw_divmod(neg(a), neg(c), false, {{cn, true}, {cp, false}, {cz, false}});
  return ite(cp, pos, ite(cn, negd, zero));
}

// Truncated remainder: |a| mod |c| with the sign of a; a % 0 = a.
Term Builder::trunc_rem(const Term& a, const Term& c) const {
  auto x = int_value(a), y = int_value(c);
  if (y && *y == 0) return a;
  if (y && *y == -1) return zero;
  if (x && y) return integer(*x % *y);
  std::vector<std::pair<Term, bool>> facts;
  if (!y) facts.push_back({eq(c, zero), false});
  Term m = raw_divmod(a, c, true, facts);
  Term mn = raw_divmod(neg(a), c, true, facts);
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
      if (!(c1 == c2)) continue;
      // a1 - a2 = c as polynomials (the dividends are in normal form).
      auto p1 = poly(a1), p2 = poly(a2), pc = poly(c1);
      if (!p1 || !p2 || !pc || !accumulate(*p1, *p2, -1) || *p1 != *pc) continue;
      Term same_sign = or_({and_({le(zero, a1), le(zero, a2)}), and_({lt(a1, zero), lt(a2, zero)})});
      out.push_back(implies(same_sign, eq(r1, r2)));
    }
  return out;
}

// Nested Euclidean division: for d1, d2 >= 1 and any integers a, r,
//   (a div d1 + r) div d2 = (a + r*d1) div (d1*d2)
//   (a + r*d1) mod (d1*d2) = d1 * ((a div d1 + r) mod d2) + a mod d1.
// Proof: a = d1*q + s (0 <= s < d1) and q + r = d2*u + t (0 <= t < d2) give
// a + r*d1 = d1*d2*u + (d1*t + s) with 0 <= d1*t + s <= d1*(d2 - 1) + d1 - 1 < d1*d2, and Euclidean
// division by d1*d2 > 0 is unique. Instantiated for every pair of divisions in the query whose
// second dividend is the first quotient plus terms free of it (a dilation inside a dilation:
// conv's lhs_dilation over a pad's interior): the solver then sees the composed step d1*d2 that the
// other side of a rule writes directly, without having to find the nonlinear argument itself.
std::vector<Term> Builder::nested_div_lemmas() const {
  std::vector<Term> out;
  const std::vector<Div> found = divs;  // building the instances adds divisions
  for (const auto& d1 : found) {
    auto pq = poly(d1.q);
    if (!pq || pq->size() != 1 || pq->begin()->second != 1 || pq->begin()->first.size() != 1) continue;
    const Term& atom = pq->begin()->first.front();
    for (const auto& d2 : found) {
      auto rest = poly(d2.a);
      if (!rest || !accumulate(*rest, *pq, -1)) continue;
      bool free = std::none_of(rest->begin(), rest->end(), [&](const auto& mk) {
        return std::find(mk.first.begin(), mk.first.end(), atom) != mk.first.end();
      });
      if (!free) continue;  // d2's dividend is not d1's quotient (once) plus other terms
      Term r = from_poly(*rest);
      Term a = add(d1.a, mul(r, d1.c)), dd = mul(d1.c, d2.c);
      Term guard = and_({le(integer(1), d1.c), le(integer(1), d2.c)});
      Term fact = and_({eq(ediv(a, dd), d2.q), eq(emod(a, dd), add(mul(d1.c, emod(d2.a, d2.c)), emod(d1.a, d1.c)))});
      out.push_back(implies(guard, fact));
    }
  }
  return out;
}

// x / y = x * inv(y) with inv(y) = 1/y, inv(0) = 0 (so x / 0 = 0). Sharing one inverse term per
// divisor lets the solver relate A / c and A * (1 / c) without nonlinear reasoning.
Term Builder::real_div(const Term& a0, const Term& c0) const {
  Term a = to_real(a0), c = to_real(c0);
  return mul(a, inverse(c));
}

// 1/c with 1/0 = 0, pushed through products and exponentials so that equal quotients written
// differently become the same term. Each step is an identity of the total inverse inv over the
// reals: inv(a*b) = inv(a)*inv(b) (both 0 when a or b is 0), inv(inv(y)) = y, inv(-y) = -inv(y),
// inv(exp(x)) = exp(-x) (exp(x) > 0).
Term Builder::inverse(const Term& c0) const {
  Term c = to_real(c0);
  Term z = real(0);
  if (c.getKind() == Kind::CONST_RATIONAL) {
    if (c.getRealValue() == "0" || c.getRealValue() == "0/1" || c.getRealValue() == "0.0") return z;
    return s.mkTerm(Kind::DIVISION, {real(1), c});
  }
  switch (c.getKind()) {
    case Kind::MULT: {
      Term r = inverse(c[0]);
      for (size_t i = 1; i < c.getNumChildren(); ++i) r = mul(r, inverse(c[i]));
      return r;
    }
    case Kind::NEG: return neg(inverse(c[0]));
    case Kind::EXPONENTIAL: return exp(neg(c[0]));
    case Kind::ITE:  // c = inv(y) as built below
      if (c[1] == z && c[2].getKind() == Kind::DIVISION && c[2][0] == real(1) && c[0] == eq(c[2][1], z))
        return c[2][1];
      break;
    default: break;
  }
  return ite(eq(c, z), z, s.mkTerm(Kind::DIVISION, {real(1), c}));
}

// exp(a + b) = exp(a) * exp(b), exp(a - b) = exp(a) * exp(-b), exp(0) = 1.
Term Builder::exp(const Term& x0) const {
  Term x = to_real(x0);
  if (x.getKind() == Kind::CONST_RATIONAL && x == real(0)) return real(1);
  if (x.getKind() == Kind::ADD) {
    Term r = exp(x[0]);
    for (size_t i = 1; i < x.getNumChildren(); ++i) r = mul(r, exp(x[i]));
    return r;
  }
  if (x.getKind() == Kind::SUB && x.getNumChildren() == 2) return mul(exp(x[0]), exp(neg(x[1])));
  return s.mkTerm(Kind::EXPONENTIAL, {x});
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
