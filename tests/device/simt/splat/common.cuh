// Host stand-in for the device prologue (libsplat/device/common.cuh) that runs device code on the
// CPU as SIMT: a block is blockDim.x std::threads, threadIdx is thread-local, __syncthreads a
// block-wide std::barrier, __syncwarp and the shuffles a barrier of the warp's 32 threads (the
// shuffles exchange through a slot per lane), `__shared__` arrays are statics (blocks run one after
// the other) and dynamic_smem() a buffer simt_grid fills with a poison byte before each block.
// Exact float arithmetic stands in for the special function unit (ex2.approx, rcp.approx). No PTX.
// Used by test_decode.cpp (decode_pass and fused_combine against float64).
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) alignas(n)

typedef unsigned int u32;
typedef unsigned short u16;
typedef long long i64;

struct bf16_t { u16 x; };
struct f16_t { u16 x; };
struct uint4 { u32 x, y, z, w; };
struct float2 { float x, y; };

struct SimtDim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local SimtDim3 threadIdx;
inline SimtDim3 blockIdx, blockDim, gridDim;

inline float __uint_as_float(u32 u) { float f; std::memcpy(&f, &u, 4); return f; }
inline u32 __float_as_uint(float f) { u32 u; std::memcpy(&u, &f, 4); return u; }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
template <class X> inline X __ldg(const X* p) {  // the device code reads floats as uint4 and bf16 pairs as u32
  X r;
  std::memcpy(&r, static_cast<const void*>(p), sizeof(X));
  return r;
}
inline int min(int a, int b) { return a < b ? a : b; }
inline i64 min(i64 a, i64 b) { return a < b ? a : b; }

inline float to_f(float v) { return v; }
inline float to_f(bf16_t v) { return __uint_as_float(((u32)v.x) << 16); }
inline float to_f(f16_t v) {  // the host compiler's IEEE half (GCC 12 on x86-64)
  _Float16 h;
  std::memcpy(&h, &v.x, 2);
  return (float)h;
}
template <class T> inline T from_f(float x);
template <> inline float from_f<float>(float x) { return x; }
template <> inline bf16_t from_f<bf16_t>(float x) {  // round to nearest even (finite inputs)
  const u32 u = __float_as_uint(x);
  return bf16_t{(u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16)};
}
template <> inline f16_t from_f<f16_t>(float x) {  // round to nearest even
  const _Float16 h = (_Float16)x;
  f16_t r;
  std::memcpy(&r.x, &h, 2);
  return r;
}
inline float fast_exp2(float x) { return std::exp2(x); }
inline float fast_rcp(float x) { return 1.f / x; }
inline float neg_inf() { return -INFINITY; }

// The module's head layout: SPLAT_KV_GROUP is a variable here, so that one test serves every group.
inline int simt_kv_group = 1;
#define SPLAT_KV_GROUP simt_kv_group
#define SPLAT_VARLEN 0
#define SPLAT_LSE 1
inline i64 kv_head(i64 bh) { return bh / SPLAT_KV_GROUP; }
inline i64 q_head(i64 bh) { return bh; }
enum : int { kQStep = 1, kKvStep = 1 };
struct Head {  // online_softmax.cuh's softmax_end (not run here) names it
  i64 bh, q0, k0;
  int len;
  float* lse;
};
template <int SEQ> inline i64 head_q0(const Head& hv) { return q_head(hv.bh) * SEQ; }
template <int SEQ, int KV> inline Head make_head(i64 bh, const int*, float* lse = nullptr) { return {bh, 0, 0, SEQ, lse}; }
template <int SEQ> inline void store_lse(const Head&, i64, float, float) {}
inline float row_lse(float ref, float l) { return l > 0.f ? (ref + std::log2(l)) * 0.693147180559945309f : neg_inf(); }
inline void pdl_launch_dependents() {}
inline void pdl_wait() {}
// cp.async as a copy (the SIMT threads' barriers order it like cp.async.wait_group + __syncwarp).
inline void cp_async16(void* dst, const void* src, int src_bytes) {
  std::memcpy(dst, src, (size_t)src_bytes);
  std::memset(static_cast<unsigned char*>(dst) + src_bytes, 0, (size_t)(16 - src_bytes));
}
inline void cp_async_commit() {}
template <int N> inline void cp_async_wait() {}
template <class P, class S> inline P load_as(const S* p) {
  P r;
  std::memcpy(&r, static_cast<const void*>(p), sizeof(P));
  return r;
}

// ---- SIMT ----
struct SimtWarp {
  std::barrier<> bar{32};
  uint64_t slot[32] = {};
};
struct SimtBlock {
  explicit SimtBlock(unsigned n) : bar((std::ptrdiff_t)n) {
    for (unsigned w = 0; w < (n + 31) / 32; ++w) warps.push_back(std::make_unique<SimtWarp>());
  }
  std::barrier<> bar;
  std::vector<std::unique_ptr<SimtWarp>> warps;
};
inline SimtBlock* simt_block = nullptr;
inline std::vector<unsigned char> simt_smem;
inline unsigned char* dynamic_smem() { return simt_smem.data(); }
inline void __syncthreads() { simt_block->bar.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { simt_block->warps[threadIdx.x / 32]->bar.arrive_and_wait(); }
template <class V> inline V simt_shfl(V v, int src) {
  static_assert(sizeof(V) <= 8, "a shuffle moves at most 8 bytes here");
  SimtWarp& w = *simt_block->warps[threadIdx.x / 32];
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(V));
  w.slot[threadIdx.x % 32] = b;
  w.bar.arrive_and_wait();
  const uint64_t r = w.slot[src & 31];
  w.bar.arrive_and_wait();
  V out;
  std::memcpy(&out, &r, sizeof(V));
  return out;
}
template <class V> inline V __shfl_sync(unsigned, V v, int src) { return simt_shfl(v, src); }
template <class V> inline V __shfl_xor_sync(unsigned, V v, int mask) { return simt_shfl(v, (int)(threadIdx.x % 32) ^ mask); }
template <int W> inline float lane_sum(float x) {
  for (int o = 1; o < W; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Runs f() as every block of a grid (gx, gy) of `threads` threads, one block after the other, with
// smem bytes of dynamic shared memory (poisoned: 0xff bytes are NaN floats).
template <class F> void simt_grid(unsigned gx, unsigned gy, unsigned threads, size_t smem, F&& f) {
  gridDim = {gx, gy, 1};
  blockDim = {threads, 1, 1};
  for (unsigned y = 0; y < gy; ++y)
    for (unsigned x = 0; x < gx; ++x) {
      blockIdx = {x, y, 0};
      simt_smem.assign(smem + 16, 0xff);
      SimtBlock block(threads);
      simt_block = &block;
      std::vector<std::thread> ts;
      for (unsigned t = 0; t < threads; ++t)
        ts.emplace_back([&f, t] {
          threadIdx = {t, 0, 0};
          f();
        });
      for (std::thread& t : ts) t.join();
      simt_block = nullptr;
    }
}
