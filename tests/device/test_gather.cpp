// gather_kv (libsplat/device/plan.cuh), the K/V gather of the cp.async engines (mma.sync, TF32,
// 3xTF32), run on the CPU one simulated thread at a time (host/splat/common.cuh stands in for the
// device prologue): every 16-byte chunk of a key tile's K and V stage rows is copied by exactly one
// thread, from its key, with zeros past the walk and in the padding columns of an engine width
// wider than head_dim. A chunk copied by two threads is a shared-memory
// write-write race (compute-sanitizer racecheck found one at head_dim 96, where the 16-byte chunks of
// a row do not divide the threads).
#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "libsplat/device/plan.cuh"

TEST_SUITE_BEGIN("unit");

namespace {

struct Chunk {
  int copies = 0;
  const void* src = nullptr;
  int src_bytes = -1;
};

// All NT threads gather keys w.base + u*w.step, u in [u0, u0 + BC), of rows HD elements apart into
// stages of width HW with rows LDK and LDV elements apart; each chunk must be copied once, from the
// key's row (16 bytes) or, past the walk or the row (columns HD .. HW), with no bytes (zero fill).
template <int HD, int HW, int BC, int NT, class E>
void check_gather(const WalkD& w, int u0) {
  constexpr int EPC = 16 / (int)sizeof(E), CH = HW / EPC, LDK = HW + 8, LDV = HW + 4;
  CAPTURE(HD);
  CAPTURE(HW);
  CAPTURE(BC);
  CAPTURE(NT);
  CAPTURE(sizeof(E));
  CAPTURE(u0);
  CAPTURE(w.step);
  std::vector<E> ks(BC * LDK), vs(BC * LDV), kg(4096 * HD), vg(4096 * HD);
  std::map<const void*, Chunk> seen;
  int total = 0;
  for (unsigned t = 0; t < NT; ++t) {
    threadIdx.x = t;
    host_copies.clear();
    gather_kv<HD, HW, BC, NT, LDK, LDV>(ks.data(), vs.data(), kg.data(), vg.data(), w, u0, nullptr);
    for (const HostCopy& c : host_copies) {
      Chunk& ch = seen[c.dst];
      ++ch.copies;
      ch.src = c.src;
      ch.src_bytes = c.src_bytes;
      ++total;
    }
  }
  CHECK(total == 2 * BC * CH);
  for (int r = 0; r < BC; ++r)
    for (int c = 0; c < CH; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      const bool in_walk = u0 + r < w.count && c * EPC < HD;
      const int64_t key = (int64_t)w.base + (int64_t)(u0 + r) * w.step;
      for (int kv = 0; kv < 2; ++kv) {
        const E* dst = kv == 0 ? ks.data() + r * LDK + c * EPC : vs.data() + r * LDV + c * EPC;
        const E* src = (kv == 0 ? kg.data() : vg.data()) + key * HD + c * EPC;
        const auto it = seen.find(dst);
        REQUIRE(it != seen.end());
        CHECK(it->second.copies == 1);
        CHECK(it->second.src_bytes == (in_walk ? 16 : 0));
        if (in_walk) CHECK(it->second.src == src);
      }
    }
}

// One walk: a full tile, a tile that the walk ends inside, a stride-2 walk.
template <int HD, int HW, int BC, int NT, class E>
void check_walks() {
  check_gather<HD, HW, BC, NT, E>(WalkD{100, 1, 1000, 0, 0, 0}, 0);
  check_gather<HD, HW, BC, NT, E>(WalkD{100, 1, 1000, 0, 0, 0}, 1000 - BC / 2 - 3);
  check_gather<HD, HW, BC, NT, E>(WalkD{7, 2, 900, 0, 0, 0}, BC);
}

// HW: the engine's width (head_dim rounded up to 16 for 2-byte elements, to 32 for 4-byte ones).
template <int HD, class E, int HW = HD>
void check_shapes() {
  // The engines' threads (mma.sync: 128 / mw, mw = 1 or 2; TF32: 128) and key tiles (64; bc=128).
  check_walks<HD, HW, 64, 128, E>();
  check_walks<HD, HW, 128, 128, E>();
  check_walks<HD, HW, 64, 64, E>();
  check_walks<HD, HW, 128, 64, E>();
}

}  // namespace

TEST_CASE("gather_kv copies every chunk of a key tile once, for every head_dim and element size") {
  // 2-byte elements (bf16, fp16) and 4-byte ones (fp32, tf32); head_dim 96 leaves spare threads.
  check_shapes<16, uint16_t>();
  check_shapes<32, uint16_t>();
  check_shapes<64, uint16_t>();
  check_shapes<96, uint16_t>();
  check_shapes<128, uint16_t>();
  check_shapes<16, float>();
  check_shapes<32, float>();
  check_shapes<64, float>();
  check_shapes<96, float>();
  check_shapes<128, float>();
}

TEST_CASE("gather_kv zero-fills the padding columns of a head_dim narrower than the engine's width") {
  check_shapes<8, uint16_t, 16>();
  check_shapes<24, uint16_t, 32>();
  check_shapes<72, uint16_t, 80>();
  check_shapes<120, uint16_t, 128>();
  check_shapes<4, float, 32>();
  check_shapes<20, float, 32>();
  check_shapes<68, float, 96>();
  check_shapes<100, float, 128>();
}

TEST_SUITE_END();
