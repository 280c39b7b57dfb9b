// fp32 on tensor cores as three tf32 products (3xTF32, MmaTf32x3Engine): the split arithmetic on
// the host (cvt.rna.tf32 emulated), the engine selection (fp32 takes it wherever the layout
// applies) and NVRTC builds.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/nvrtc.h"
#include "nvrtc_cache.h"
#include "libsplat/pattern/pattern.h"

TEST_SUITE_BEGIN("unit");

namespace fs = std::filesystem;
using namespace splat;

namespace {

// cvt.rna.tf32.f32 by its definition: x rounded to 11 significant bits (10 explicit mantissa
// bits), ties away from zero (std::round), as a float with the low 13 mantissa bits zero.
float rna_tf32(float x) {
  if (x == 0.f || !std::isfinite(x)) return x;
  int e = 0;
  const double m = std::frexp(static_cast<double>(x), &e);  // |m| in [0.5, 1)
  return static_cast<float>(std::ldexp(std::round(std::ldexp(m, 11)), e - 11));
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

struct Split {
  float hi, lo;
};
// The engine's split_tf32: hi = rna(x), lo = rna(x - hi) (x - hi is exact in fp32).
Split split(float x) {
  const float hi = rna_tf32(x);
  return {hi, rna_tf32(x - hi)};
}

// One mma.m16n8k8 accumulation step of a dot product: the 8 products of tf32 values are exact in
// double; the sum is rounded once into the fp32 accumulator.
float mma_step(float acc, const float* a, const float* b) {
  double s = acc;
  for (int k = 0; k < 8; ++k) s += static_cast<double>(a[k]) * static_cast<double>(b[k]);
  return static_cast<float>(s);
}

enum class Mode { One, Three, TwoNoLoHi };

// Dot product of length n (a multiple of 8) in k-steps of 8, as the engine issues its mma:
// 1xTF32: hi*hi; 3xTF32: lo*hi, hi*lo, then hi*hi; TwoNoLoHi: a wrong split missing lo*hi.
float tf32_dot(const std::vector<float>& a, const std::vector<float>& b, Mode mode) {
  float acc = 0.f;
  for (size_t k0 = 0; k0 < a.size(); k0 += 8) {
    float ah[8], al[8], bh[8], bl[8];
    for (int k = 0; k < 8; ++k) {
      const Split sa = split(a[k0 + static_cast<size_t>(k)]), sb = split(b[k0 + static_cast<size_t>(k)]);
      ah[k] = sa.hi, al[k] = sa.lo, bh[k] = sb.hi, bl[k] = sb.lo;
    }
    if (mode == Mode::Three) acc = mma_step(acc, al, bh);
    if (mode != Mode::One) acc = mma_step(acc, ah, bl);
    acc = mma_step(acc, ah, bh);
  }
  return acc;
}

Problem problem(const std::string& pattern, int64_t L, const std::string& dtype, int64_t d = 64) {
  std::string doc = R"({"seq_len": )" + std::to_string(L) + R"(, "head_dim": )" + std::to_string(d) +
                    R"(, "heads": 16, "dtype": ")" + dtype + R"(", "pattern": )" + pattern + "}";
  return parse_problem_text(doc, "test");
}

GeneratedModule gen(const Problem& p, const std::string& tuning) {
  CodegenOptions co;
  co.pipeline = false;
  co.tuning = parse_tuning(tuning);
  return generate(p, analyze(p), co);
}

}  // namespace

TEST_CASE("3xTF32: cvt.rna.tf32 emulation (ties away, 10 mantissa bits)") {
  const float u = std::ldexp(1.f, -10);  // tf32 spacing at 1
  CHECK(rna_tf32(1.f) == 1.f);
  CHECK(rna_tf32(1.f + u / 2) == 1.f + u);      // tie: away from zero (round-to-even would give 1)
  CHECK(rna_tf32(-(1.f + u / 2)) == -(1.f + u));
  CHECK(rna_tf32(1.f + u / 4) == 1.f);
  CHECK(rna_tf32(1.f + 3 * u / 4) == 1.f + u);
  CHECK(rna_tf32(2.f - u / 4) == 2.f);          // carries into the exponent
  // Against the bit-level form the hardware uses (add half an ulp of tf32, clear 13 bits), and the
  // split recovers x to 2^-22 relative with an exact x - hi.
  std::mt19937 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t r = rng();
    const float x = std::ldexp(static_cast<float>(r >> 8) * std::ldexp(1.f, -24), static_cast<int>(r & 31) - 16) *
                    ((r & 32) ? -1.f : 1.f);
    if (x == 0.f || std::fabs(x) < 1e-30f) continue;
    CAPTURE(x);
    const float hi = rna_tf32(x);
    REQUIRE(bits(hi) == ((bits(x) + 0x1000u) & 0xffffe000u));
    REQUIRE((bits(hi) & 0x1fffu) == 0u);
    const Split s = split(x);
    REQUIRE((bits(s.lo) & 0x1fffu) == 0u);
    REQUIRE(static_cast<double>(x) - static_cast<double>(s.hi) == static_cast<double>(x - s.hi));
    REQUIRE(std::fabs(static_cast<double>(x) - (static_cast<double>(s.hi) + s.lo)) <= std::ldexp(std::fabs(x), -22));
  }
}

// The split the engine uses reaches fp32 accuracy on length-64 dot products (head_dim 64, and the
// 64 keys of a P.V step); plain tf32 and a split missing one cross product do not.
TEST_CASE("3xTF32: dot products of length 64 within 1e-6 of float64; 1xTF32 is not") {
  std::mt19937 rng(12345);
  auto uni = [&](float lo, float hi) { return lo + (hi - lo) * static_cast<float>(rng() >> 8) * std::ldexp(1.f, -24); };
  double worst3 = 0, worst_wrong = 0, worst1 = 0, best1 = 1;
  int over1 = 0;  // 1xTF32 trials off by more than 1e-6
  const int trials = 2000;
  for (int t = 0; t < trials; ++t) {
    // Half the trials with signs (error relative to sum |a_k b_k|, the dot product's condition),
    // half positive (there the denominator is the dot product itself).
    const bool pos = t % 2 == 1;
    std::vector<float> a(64), b(64);
    for (size_t k = 0; k < 64; ++k) {
      a[k] = pos ? uni(0.f, 1.f) : uni(-1.f, 1.f);
      b[k] = pos ? uni(0.f, 1.f) : uni(-1.f, 1.f);
    }
    double ref = 0, mag = 0;
    for (size_t k = 0; k < 64; ++k) {
      ref += static_cast<double>(a[k]) * b[k];
      mag += std::fabs(static_cast<double>(a[k]) * b[k]);
    }
    const double e3 = std::fabs(tf32_dot(a, b, Mode::Three) - ref) / mag;
    const double e1 = std::fabs(tf32_dot(a, b, Mode::One) - ref) / mag;
    const double ew = std::fabs(tf32_dot(a, b, Mode::TwoNoLoHi) - ref) / mag;
    worst3 = std::max(worst3, e3);
    worst1 = std::max(worst1, e1);
    best1 = std::min(best1, e1);
    over1 += e1 > 1e-6;
    worst_wrong = std::max(worst_wrong, ew);
  }
  MESSAGE("3xTF32 worst " << worst3 << ", 1xTF32 worst " << worst1 << " best " << best1 << ", without lo*hi worst "
                          << worst_wrong);
  CHECK(worst3 <= 1e-6);
  CHECK(worst1 > 1e-5);          // plain tf32: up to 2^-11 per product
  CHECK(over1 > trials * 9 / 10);  // ... and off in almost every trial
  CHECK(worst_wrong > 1e-6);  // the test sees a missing cross product
}

TEST_CASE("3xTF32: engine selection, launch configuration and manifest") {
  const std::string window = R"({"window": {"left": 256, "right": 256}})";
  const std::string longformer =
      R"({"union": [{"window": {"left": 256, "right": 256}}, {"global": {"tokens": [0, 1, 2, 3]}}]})";
  // fp32 always takes 3xTF32 where the layout applies (1.1-1.6x faster than CUDA cores): no key.
  CHECK_THROWS_WITH(parse_tuning("x3=0"), doctest::Contains("unknown key"));
  // tf32's layout (K rows HD + 16, V rows HD + 4 floats, 2 stages), 4 warps x 16 rows, 2 blocks per
  // SM at d = 64, 1 at d = 128.
  GeneratedModule m = gen(problem(window, 2048, "fp32"), "");
  CHECK(m.tensor_cores);
  CHECK(m.engine == "mma.sync 3xtf32");
  REQUIRE(m.fused.size() == 1);
  CHECK(m.selection.fused[0].engine.kind == EngineKind::MmaTf32x3);
  CHECK(m.selection.fused[0].engine.stages == 2);
  CHECK(m.selection.fused[0].engine.min_blocks == 2);
  CHECK(m.fused[0].block == 128);
  CHECK(m.fused[0].smem_dynamic == 2 * 64 * (80 + 68) * 4);
  GeneratedModule d128 = gen(problem(window, 2048, "fp32", 128), "");
  CHECK(d128.selection.fused[0].engine.min_blocks == 1);
  // Two stages, then Q's lo fragments (16 k-steps x 128 threads x 16 bytes) at d > 96.
  CHECK(d128.fused[0].smem_dynamic == 2 * 64 * (144 + 132) * 4 + 16 * 128 * 16);
  CHECK(gen(problem(window, 2048, "fp32", 96), "").fused[0].smem_dynamic == 2 * 64 * (112 + 100) * 4);
  CHECK(gen(problem(window, 2048, "tf32", 128), "").fused[0].smem_dynamic == 2 * 64 * (144 + 132) * 4);
  // Three stages leave no room for them: Q's lo fragments stay in registers (the engine's QLS).
  CHECK(gen(problem(window, 2048, "fp32", 128), "stages=3").fused[0].smem_dynamic == 3 * 64 * (144 + 132) * 4);
  GeneratedModule l = gen(problem(longformer, 4096, "fp32"), "stages=3");
  for (const KernelSpec& k : l.selection.fused)
    if (k.family() != KernelFamily::Combine) {
      CHECK(k.engine.kind == EngineKind::MmaTf32x3);
      CHECK(k.engine.stages == 3);
      CHECK(k.smem == 3 * 64 * (80 + 68) * 4);
    }
  // tf32 takes one tf32 product; bf16 is unaffected.
  CHECK(gen(problem(window, 2048, "tf32"), "").selection.engine.kind == EngineKind::MmaTf32);
  CHECK(gen(problem(window, 2048, "bf16"), "").engine == "mma.sync");
  // fp32 at head_dim 48 runs padded to 64; at 50 (rows not of whole 16 bytes) the fused kernel is
  // refused, with the JSON path.
  CHECK(gen(problem(window, 2048, "fp32", 48), "").selection.engine.kind == EngineKind::MmaTf32x3);
  CHECK_THROWS_WITH(gen(problem(window, 2048, "fp32", 50), ""), doctest::Contains("head_dim"));
  // The manifest says so.
  Problem p = problem(window, 2048, "fp32");
  nlohmann::json j = manifest(p, m, "cuda", "sm_90", {"t.cu", "manifest.json"});
  CHECK(j["tensor_cores"] == true);
  CHECK(j["engine"] == "mma.sync 3xtf32");
}

// The fp32 engine (3xTF32) builds (ptxas) for both architectures on the fp32 default patterns: one
// pass (window), two runs per row with split-KV tiles (longformer), two passes (strided); and at
// every head_dim it takes.
TEST_CASE("the 3xTF32 fp32 engine compiles to CUBIN for sm_80 and sm_90" * doctest::test_suite("nvrtc")) {
  for (const char* name : {"window-4k-fp32.json", "longformer-4k-fp32.json", "strided-4k-fp32.json"}) {
    Problem p = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / "patterns" / name).string());
    GeneratedModule m = gen(p, "");
    CHECK(m.tensor_cores);
    for (const char* arch : {"sm_80", "sm_90"}) {
      CAPTURE(name);
      CAPTURE(arch);
      CompileResult r = test_compile(m.source, p.name + ".cu", arch, CompileTarget::Cubin);
      CHECK(r.image.size() > 1000);
    }
  }
  for (int64_t d : {32, 96, 128}) {
    CAPTURE(d);
    GeneratedModule m = gen(problem(R"({"union": [{"window": {"left": 40, "right": 40}}, {"strided": {"stride": 64}}]})",
                                    512, "fp32", d),
                            "");
    CompileResult r = test_compile(m.source, "t.cu", "sm_80", CompileTarget::Cubin);
    CHECK(r.image.size() > 1000);
  }
}

TEST_SUITE_END();
