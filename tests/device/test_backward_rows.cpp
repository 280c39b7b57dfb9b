// The backward's row kernels (libsplat/device/backward_rows.cuh) run on the CPU as SIMT threads
// (simt/splat/common.cuh), on the grid codegen gives them (geometry::bwd_rows_per_block rows a block
// of 128 threads): D = rowsum(dO * O) against float64 for every element type and head_dim shapes that
// take each path (whole 16-byte pieces a row: 1 to 32 lanes; else one element a lane), a ragged row
// count (the arrays end at the last row: a write past it is out of bounds, which the sanitizer build
// reports), the fast mode's zeroed dQ sums, and its
// dQ store.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "splat/common.cuh"  // the SIMT stand-in (tests/device/simt)
#include "splat/backward_rows.cuh"

TEST_SUITE_BEGIN("cpu-model");

namespace {

constexpr int kHeads = 2;

template <class T> std::vector<T> random_rows(size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<T> x(n);
  for (T& e : x) e = from_f<T>(u(gen));
  return x;
}

template <class T, int SEQ, int HD> void check_rows() {
  constexpr int rows = splat::geometry::bwd_rows_per_block(HD, (int)sizeof(T));
  const unsigned gx = (SEQ + rows - 1) / rows;
  const size_t n = (size_t)kHeads * SEQ * HD;
  const std::vector<T> o = random_rows<T>(n, 1), dout = random_rows<T>(n, 2);
  std::vector<float> delta((size_t)kHeads * SEQ, NAN), dq_sums(n, NAN);
  simt_grid(gx, kHeads, 128, 0, [&] { bwd_delta<T, SEQ, HD>(o.data(), dout.data(), delta.data(), nullptr, dq_sums.data()); });
  double worst = 0;
  for (size_t r = 0; r < delta.size(); ++r) {
    double want = 0, mag = 0;
    for (int x = 0; x < HD; ++x) {
      const double t = (double)to_f(o[r * HD + x]) * to_f(dout[r * HD + x]);
      want += t;
      mag += std::fabs(t);
    }
    worst = std::max(worst, std::fabs(delta[r] - want) / (mag + 1e-30));
  }
  CHECK(worst < 1e-6);  // fp32 sums of HD products, against their float64 sum
  size_t zeroed = 0;
  for (float x : dq_sums) zeroed += x == 0.f ? 1 : 0;
  CHECK(zeroed == n);

  std::vector<float> acc(n);
  for (size_t x = 0; x < n; ++x) acc[x] = (float)x * 0.25f - 3.f;
  std::vector<T> dq(n, from_f<T>(NAN));
  simt_grid(gx, kHeads, 128, 0, [&] { bwd_dq_store<T, SEQ, HD>(acc.data(), dq.data(), 0.5f, nullptr); });
  size_t same = 0;
  for (size_t x = 0; x < n; ++x) same += to_f(dq[x]) == to_f(from_f<T>(acc[x] * 0.5f)) ? 1 : 0;
  CHECK(same == n);
}

}  // namespace

TEST_CASE("backward row kernels: D = rowsum(dO * O) and the fast mode's dQ store, every lane-group shape") {
  SUBCASE("bf16: 16-byte pieces, 1 to 32 lanes a row") {
    check_rows<bf16_t, 37, 8>();    // 1 lane, 128 rows a block
    check_rows<bf16_t, 37, 64>();   // 8 lanes
    check_rows<bf16_t, 37, 96>();   // 12 pieces on 16 lanes
    check_rows<bf16_t, 5, 256>();   // 32 lanes, one block
  }
  SUBCASE("fp16 and fp32") {
    check_rows<f16_t, 70, 128>();
    check_rows<float, 37, 64>();    // 16 lanes
    check_rows<float, 9, 256>();    // 64 pieces on 32 lanes
    check_rows<float, 37, 36>();    // 9 pieces on 16 lanes
  }
  SUBCASE("rows of partial 16-byte pieces: one element a lane") {
    check_rows<bf16_t, 37, 36>();
    check_rows<float, 33, 10>();
  }
}

TEST_SUITE_END();
