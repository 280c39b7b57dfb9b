// The backward's row kernels, a lane group per query row: D = rowsum(dO * O) before the dQ and dK/dV
// kernels (bwd_delta), and the fast mode's dQ store after them (bwd_dq_store). Plain CUDA (no
// inline PTX): tests/device runs them on the CPU as SIMT threads.
#pragma once
#include "splat/common.cuh"
#include "splat/geometry.cuh"

// acc plus the sum of a[x] * b[x] over the 16 bytes at a and b (8 bf16/fp16 or 4 fp32 elements).
template <class T> __device__ __forceinline__ float dot16(const T* a, const T* b, float acc) {
  const uint4 x = *reinterpret_cast<const uint4*>(a), y = *reinterpret_cast<const uint4*>(b);
  const u32 xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 4) {
      acc = fmaf(__uint_as_float(xs[k]), __uint_as_float(ys[k]), acc);
    } else {
      T lo_x, hi_x, lo_y, hi_y;
      lo_x.x = (u16)(xs[k] & 0xffffu); hi_x.x = (u16)(xs[k] >> 16);
      lo_y.x = (u16)(ys[k] & 0xffffu); hi_y.x = (u16)(ys[k] >> 16);
      acc = fmaf(to_f(lo_x), to_f(lo_y), fmaf(to_f(hi_x), to_f(hi_y), acc));
    }
  }
  return acc;
}

// The query row of this thread's lane group in bwd_delta and bwd_dq_store: G lanes a row
// (geometry::bwd_row_lanes), 128 / G rows a block, grid (ceil(SEQ * G / 128), batch*heads) (a packed
// batch: sequences*heads, the rows below the sequence's length).
template <class T, int HD> struct BwdRowLanes {
  static constexpr int G = splat::geometry::bwd_row_lanes(HD, (int)sizeof(T));
  static constexpr bool VEC = (HD * (int)sizeof(T)) % 16 == 0;  // whole 16-byte pieces
  static constexpr int EPP = 16 / (int)sizeof(T);                // elements a piece
  static __device__ __forceinline__ int lane() { return (int)(threadIdx.x % G); }
  static __device__ __forceinline__ i64 row() { return (i64)blockIdx.x * (128 / G) + threadIdx.x / G; }
};

// The forward saves the log-sum-exp in natural-log units; the backward's exponentials are exp2. (A
// class member: a namespace-scope constant is emitted as a global in the constant bank.)
struct BwdUnits {
  static constexpr float kLog2e = 1.4426950408889634f;
};

// D = rowsum(dO * O) of each query row, fp32 (BwdRowLanes: 16-byte loads, the group's lanes summed
// by shuffles; every lane of a warp takes part in them, rows past the end included).
// dq_zero (fast mode): the row's fp32 dQ sums, zeroed here for the dK/dV kernel's atomics.
// lse2 (the wgmma engine's modules, SPLAT_BWD_LSE2_AT): the row's log-sum-exp times log2(e), laid out
// as D, so that the dK/dV kernel stages it ready for exp2 (one multiply a row here instead of one
// per walked row and key tile there).
template <class T, int SEQ, int HD>
__device__ __forceinline__ void bwd_delta(const T* o, const T* dout, float* delta, const int* cu_seqlens,
                                          float* dq_zero = nullptr, const float* lse = nullptr, float* lse2 = nullptr) {
  using L = BwdRowLanes<T, HD>;
  const int lane = L::lane();
  const i64 bh = blockIdx.y, i = L::row();
  const Head hv = make_head<SEQ, SEQ>(bh, cu_seqlens);
  const bool live = i < hv.len;
  if (live && dq_zero != nullptr)
    for (int c = lane; c < HD; c += L::G) dq_zero[(bh * SEQ + i) * HD + c] = 0.f;
  const i64 base = live ? (head_q0<SEQ>(hv) + i * kQStep) * HD : 0;
  float sum = 0.f;
  if (live) {
    if constexpr (L::VEC) {
      for (int c = lane * L::EPP; c < HD; c += L::G * L::EPP) sum = dot16(o + base + c, dout + base + c, sum);
    } else {
      for (int c = lane; c < HD; c += L::G) sum = fmaf(to_f(o[base + c]), to_f(dout[base + c]), sum);
    }
  }
  sum = lane_sum<L::G>(sum);
  if (live && lane == 0) delta[bh * SEQ + i] = sum;
  if (live && lane == 0 && lse2 != nullptr) lse2[bh * SEQ + i] = lse[head_q0<SEQ>(hv) + i * kQStep] * BwdUnits::kLog2e;
}

// Fast mode: dQ = scale * the fp32 sums the dK/dV kernel's atomics made, in the element type; rows
// as bwd_delta's.
template <class T, int SEQ, int HD>
__device__ __forceinline__ void bwd_dq_store(const float* acc, T* dq, float scale, const int* cu_seqlens) {
  using L = BwdRowLanes<T, HD>;
  const i64 bh = blockIdx.y, i = L::row();
  const Head hv = make_head<SEQ, SEQ>(bh, cu_seqlens);
  if (i >= hv.len) return;
  const i64 dst = (head_q0<SEQ>(hv) + i * kQStep) * HD;
  for (int c = L::lane(); c < HD; c += L::G) dq[dst + c] = from_f<T>(acc[(bh * SEQ + i) * HD + c] * scale);
}
