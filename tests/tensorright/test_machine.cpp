// Machine element values (semantics/machine.h) against the host's IEEE arithmetic: binary32 and
// binary64 through float and double (SSE: correctly rounded, nearest-even), binary16 through GCC's
// _Float16, on random bit patterns (every class: NaN, ±inf, ±0, subnormals, normals) and on the
// edge cases of each format. Fixed-width integers against int64/uint64 arithmetic, with XLA's
// values at x/0, x%0, MIN/-1 and MIN%-1 (xla/hlo/evaluator/hlo_evaluator_typed_visitor.h).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "libtensorright/semantics/machine.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;

namespace {

template <class F, class U>
U bits_of(F x) {
  U u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
template <class F, class U>
F from_bits(U u) {
  F x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// A random bit pattern of width w that hits every class often: a random sign, an exponent field
// drawn from its extremes (0, 1, max-1, max) or anywhere, and a random or extreme significand.
uint64_t draw(std::mt19937_64& rng, int eb, int sb) {
  uint64_t emax = (uint64_t{1} << eb) - 1, mmax = (uint64_t{1} << (sb - 1)) - 1;
  uint64_t e = rng() % 6 == 0 ? std::vector<uint64_t>{0, 1, emax - 1, emax}[rng() % 4] : rng() % (emax + 1);
  uint64_t m = rng() % 5 == 0 ? std::vector<uint64_t>{0, 1, mmax}[rng() % 3] : rng() & mmax;
  if (rng() % 7 == 0) e = emax / 2 + rng() % 4;  // near 1.0, where sums cancel
  return ((rng() & 1) << (eb + sb - 1)) | (e << (sb - 1)) | m;
}

// The same result in the sense of the rule's final comparison (NaNs equal, bits otherwise).
template <class F, class U>
void check_float(DType t, std::mt19937_64& rng, int eb, int sb, int n) {
  for (int i = 0; i < n; ++i) {
    U a = static_cast<U>(draw(rng, eb, sb)), b = static_cast<U>(draw(rng, eb, sb));
    F x = from_bits<F, U>(a), y = from_bits<F, U>(b);
    auto same = [&](uint64_t got, F want, const char* op) {
      CHECK_MESSAGE(mach::same(t, got, bits_of<F, U>(want)), op << " " << mach::str(t, a) << " " << mach::str(t, b)
                                                                 << ": got " << mach::str(t, got) << ", want "
                                                                 << mach::str(t, bits_of<F, U>(want)));
    };
    same(mach::add(t, a, b), static_cast<F>(x + y), "+");
    same(mach::sub(t, a, b), static_cast<F>(x - y), "-");
    same(mach::mul(t, a, b), static_cast<F>(x * y), "*");
    same(mach::div(t, a, b), static_cast<F>(x / y), "/");
    same(mach::rem(t, a, b), static_cast<F>(std::fmod(static_cast<double>(x), static_cast<double>(y))), "fmod");
    same(mach::neg(t, a), static_cast<F>(-x), "neg");
    auto c = mach::compare(t, a, b);
    if (std::isnan(static_cast<double>(x)) || std::isnan(static_cast<double>(y))) {
      CHECK(!c);
    } else {
      REQUIRE(c);
      CHECK(*c == (x < y ? -1 : y < x ? 1 : 0));
    }
    // XLA's max/min: a NaN operand wins, otherwise std::max / std::min.
    F mx = std::isnan(static_cast<double>(x)) ? x : std::isnan(static_cast<double>(y)) ? y : std::max(x, y);
    F mn = std::isnan(static_cast<double>(x)) ? x : std::isnan(static_cast<double>(y)) ? y : std::min(x, y);
    same(mach::max(t, a, b), mx, "max");
    same(mach::min(t, a, b), mn, "min");
  }
}

}  // namespace

TEST_CASE("machine floats: f32 and f64 agree with the host's IEEE arithmetic") {
  std::mt19937_64 rng(7);
  check_float<float, uint32_t>(DType::F32, rng, 8, 24, 20000);
  check_float<double, uint64_t>(DType::F64, rng, 11, 53, 20000);
}

TEST_CASE("machine floats: f16 agrees with GCC's _Float16") {
  std::mt19937_64 rng(11);
  check_float<_Float16, uint16_t>(DType::F16, rng, 5, 11, 20000);
}

TEST_CASE("machine floats: rounding at the edges of each format") {
  // binary16: the largest finite value, the tie above it (to even: infinity), subnormals.
  CHECK(mach::round_to(DType::F16, Rational(65504)) == 0x7bff);
  CHECK(mach::round_to(DType::F16, Rational(65519)) == 0x7bff);
  CHECK(mach::round_to(DType::F16, Rational(65520)) == 0x7c00);
  CHECK(mach::round_to(DType::F16, Rational(1, 1 << 24)) == 0x0001);
  CHECK(mach::round_to(DType::F16, Rational(1, int64_t{1} << 25)) == 0x0000);      // tie to even: 0
  CHECK(mach::round_to(DType::F16, Rational(-3, int64_t{1} << 26)) == 0x8001);     // 0.75 quantum: 1
  CHECK(mach::round_to(DType::F16, Rational(-1, int64_t{1} << 40)) == 0x8000);     // underflow keeps the sign
  // bfloat16: 8 significant bits; 1 + 2^-8 is a tie (to even: 1), 1 + 3*2^-8 rounds up.
  CHECK(mach::round_to(DType::BF16, Rational(257, 256)) == 0x3f80);
  CHECK(mach::round_to(DType::BF16, Rational(259, 256)) == 0x3f82);
  CHECK(mach::literal_text(DType::BF16, 0x3f82) == "1.016");
  // Decimal literals are rounded once: 0.1 in f32 is 0x3dcccccd.
  CHECK(mach::round_to(DType::F32, Rational(1, 10)) == 0x3dcccccd);
  CHECK(mach::round_to(DType::F64, Rational(1, 10)) == 0x3fb999999999999aULL);
  // Printing: the shortest decimal that reads back, and the bits.
  CHECK(mach::str(DType::F32, 0x80000000) == "-0.0 (0x80000000)");
  CHECK(mach::str(DType::F32, 0x3dcccccd) == "0.1 (0x3dcccccd)");
  CHECK(mach::str(DType::F16, 0x7e00) == "nan (0x7e00)");
  CHECK(mach::str(DType::F64, 0xfff0000000000000ULL) == "-inf (0xfff0000000000000)");
  CHECK(mach::literal_text(DType::F16, 0x0001) == "6e-08");  // the shortest that reads back
  CHECK(mach::literal_text(DType::F32, 0x3f800000) == "1.0");
}

TEST_CASE("machine floats: XLA's max and min are NaN-propagating and order-dependent at zero") {
  const DType t = DType::F32;
  uint64_t pz = 0, nz = 0x80000000, one = 0x3f800000, nan = mach::nan_bits(t);
  CHECK(mach::max(t, pz, nz) == pz);  // std::max(+0, -0): the first
  CHECK(mach::max(t, nz, pz) == nz);
  CHECK(mach::min(t, pz, nz) == pz);
  CHECK(mach::is_nan(t, mach::max(t, one, nan)));
  CHECK(mach::is_nan(t, mach::min(t, nan, one)));
}

TEST_CASE("machine integers: wraparound and XLA's division and remainder") {
  std::mt19937_64 rng(3);
  for (DType t : {DType::S8, DType::S16, DType::S32, DType::S64, DType::U8, DType::U16, DType::U32, DType::U64}) {
    CAPTURE(to_string(t));
    const uint64_t m = mach::mask(t);
    const BigInt lo = mach::min_value(t);
    for (int i = 0; i < 2000; ++i) {
      uint64_t a = rng() & m, b = rng() & m;
      if (i % 5 == 0) b = std::vector<uint64_t>{0, 1, m, mach::wrap(t, lo)}[rng() % 4];
      BigInt x = mach::int_value(t, a), y = mach::int_value(t, b);
      CHECK(mach::int_value(t, mach::add(t, a, b)) == mach::int_value(t, mach::wrap(t, x + y)));
      CHECK(mach::int_value(t, mach::mul(t, a, b)) == mach::int_value(t, mach::wrap(t, x * y)));
      CHECK(mach::sub(t, a, b) == mach::wrap(t, x - y));
      uint64_t q = mach::div(t, a, b), r = mach::rem(t, a, b);
      if (y == 0) {
        CHECK(q == m);  // signed: -1; unsigned: the maximum
        CHECK(r == a);
      } else if (y == -1 && x == lo && lo != 0) {
        CHECK(q == a);  // MIN / -1 = MIN
        CHECK(r == 0);
      } else {
        BigInt qq, rr;
        mpz_tdiv_qr(qq.get_mpz_t(), rr.get_mpz_t(), x.get_mpz_t(), y.get_mpz_t());
        CHECK(mach::int_value(t, q) == qq);
        CHECK(mach::int_value(t, r) == rr);
      }
      auto c = mach::compare(t, a, b);
      REQUIRE(c);
      CHECK(*c == (x < y ? -1 : y < x ? 1 : 0));
    }
    CHECK(mach::abs(t, mach::wrap(t, lo)) == mach::wrap(t, lo));  // abs(MIN) wraps
  }
  CHECK(mach::int_value(DType::S8, 0x80) == -128);
  CHECK(mach::int_value(DType::U8, 0x80) == 128);
  CHECK(!mach::fits(DType::S8, BigInt(128)));
  CHECK(mach::fits(DType::U64, BigInt("18446744073709551615")));
}
