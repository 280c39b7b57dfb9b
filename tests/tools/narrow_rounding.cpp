// Checks, on the host's binary32 arithmetic, the steps by which trverify rounds binary32 results to
// binary16 and bfloat16 (`narrow` in libtensorright/encode/machine.cpp; docs/machine-types.md):
//
//   narrow_rounding [--stride N] [--pairs]
//
// Without --pairs: every binary32 bit pattern (every N-th with --stride) rounded by those steps must
// equal its exact rounding to nearest-even. With --pairs: for every pair of binary16 values and every
// pair of bfloat16 values (every N-th), a + b, a * b and a / b computed in binary32 and rounded by those
// steps must equal the same operation in binary64 rounded exactly (binary64 holds the sums and
// products exactly, and its 53 bits are over 2p + 2 for the quotients). Exit 1 on any difference.
// Compiled without floating-point contraction, so each operation rounds once, as cvc5's do.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Format {
  const char* name;
  int exp_bits, precision;
  int emin() const { return 2 - (1 << (exp_bits - 1)); }
  int emax() const { return (1 << (exp_bits - 1)) - 1; }
  double max_finite() const { return std::ldexp(std::ldexp(1.0, precision) - 1, emax() - precision + 1); }
};

float from_bits(uint32_t b) {
  float x;
  std::memcpy(&x, &b, 4);
  return x;
}

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
}

// The exact rounding (nearest, ties to even) of a double to the format: scale to the quantum, round
// to an integer (exact operations of binary64 at these ranges), scale back.
float exact_round(const Format& f, double v) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return static_cast<float>(v);
  int e;
  std::frexp(std::fabs(v), &e);
  int quantum = std::max(e - 1, f.emin()) - (f.precision - 1);
  double r = std::ldexp(std::nearbyint(std::ldexp(std::fabs(v), -quantum)), quantum);
  if (r > f.max_finite()) r = INFINITY;
  return static_cast<float>(std::copysign(r, v));
}

// The encoder's steps, in binary32 (volatile: each operation rounds to binary32 on its own).
float narrow(const Format& f, float x) {
  if (std::isnan(x) || std::isinf(x)) return x;
  const float ax = std::fabs(x);
  if (ax < std::ldexp(1.0f, f.emin())) {
    volatile float m = 1.5f * std::ldexp(1.0f, f.emin() - (f.precision - 1) + 23);
    volatile float t = x + m;
    float r = t - m;
    return r == 0 ? std::copysign(0.0f, x) : r;
  }
  const bool big = ax >= std::ldexp(1.0f, 64);
  volatile float y = big ? x * std::ldexp(1.0f, -64) : x;
  volatile float c = std::ldexp(1.0f, 24 - f.precision) + 1.0f;
  volatile float g = c * y;
  volatile float d = y - g;
  volatile float h = g + d;
  float r = big ? h * std::ldexp(1.0f, 64) : static_cast<float>(h);
  return std::fabs(r) > f.max_finite() ? std::copysign(INFINITY, x) : r;
}

bool same(float a, float b) { return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b); }

// The binary32 value of a 16-bit pattern of the format.
float widen(const Format& f, uint32_t b) {
  if (f.exp_bits == 8) return from_bits(b << 16);
  uint32_t e = (b >> 10) & 31, m = b & 1023;
  float v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp(static_cast<float>(m), -24)
                                                    : std::ldexp(static_cast<float>(m | 1024), static_cast<int>(e) - 25);
  return (b & 0x8000) ? -v : v;
}

uint64_t report(uint64_t bad, const char* what, const Format& f, float a, float b, float got, float want) {
  if (bad < 10)
    std::printf("%s %s: %a %a -> %a, exact %a\n", f.name, what, static_cast<double>(a), static_cast<double>(b),
                static_cast<double>(got), static_cast<double>(want));
  return bad + 1;
}

uint64_t check_rounding(const Format& f, uint64_t stride) {
  uint64_t bad = 0, n = 0;
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += stride, ++n) {
    float x = from_bits(static_cast<uint32_t>(i));
    float got = narrow(f, x), want = exact_round(f, static_cast<double>(x));
    if (!same(got, want)) bad = report(bad, "round", f, x, 0, got, want);
  }
  std::printf("%s: %llu binary32 values rounded, %llu differ\n", f.name, static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(bad));
  return bad;
}

uint64_t check_pairs(const Format& f, uint64_t stride) {
  uint64_t bad = 0, n = 0;
  for (uint64_t i = 0; i < (uint64_t{1} << 32); i += stride, ++n) {
    float a = widen(f, static_cast<uint32_t>(i >> 16)), b = widen(f, static_cast<uint32_t>(i & 0xffff));
    volatile float s = a + b, p = a * b, q = a / b;
    double da = a, db = b;
    if (!same(narrow(f, s), exact_round(f, da + db))) bad = report(bad, "+", f, a, b, narrow(f, s), exact_round(f, da + db));
    if (!same(narrow(f, p), exact_round(f, da * db))) bad = report(bad, "*", f, a, b, narrow(f, p), exact_round(f, da * db));
    if (!same(narrow(f, q), exact_round(f, da / db))) bad = report(bad, "/", f, a, b, narrow(f, q), exact_round(f, da / db));
  }
  std::printf("%s: %llu pairs, + * / each, %llu differ\n", f.name, static_cast<unsigned long long>(n),
              static_cast<unsigned long long>(bad));
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t stride = 1;
  bool pairs = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--pairs") {
      pairs = true;
    } else if (a == "--stride" && i + 1 < argc) {
      stride = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: narrow_rounding [--stride N] [--pairs]\n");
      return 2;
    }
  }
  if (stride == 0) stride = 1;
  uint64_t bad = 0;
  for (const Format& f : {Format{"f16", 5, 11}, Format{"bf16", 8, 8}}) bad += pairs ? check_pairs(f, stride) : check_rounding(f, stride);
  return bad ? 1 : 0;
}
