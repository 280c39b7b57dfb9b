// Split-KV: the combine of a split tile's chunk states.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"
#include "splat/online_softmax.cuh"

// Combine of split-KV chunks: merges the partial states of a split tile's rows and writes O (last
// pass) or the handed-over state. Block b takes rows [RB (b % BPT), + RB) of split tile b / BPT
// (BPT blocks per tile: 64 / RB, or fewer when no split tile has more than BPT * RB rows) with WPR
// warps per row: the row's first warp reduces its (max, sum) over the
// chunks, then each of the row's warps sums every WPR-th chunk's O row (lanes over d) and the
// block adds the WPR partial rows. Why so parallel: one block per split tile, looping over all
// 64 x HD outputs and every chunk, took ~100 us on the H200 at longformer-16k (16 blocks in all),
// against ~145 us for the pass itself. Launched with 32 * RB * WPR threads (codegen's KernelDesc).
template <class T, int SEQ, int HD, int PERIOD, int NSLOTS, bool LAST, int RB, int WPR, bool PDL = false, int BPT = 64 / RB>
__device__ __forceinline__ void fused_combine(const SplitD* splits, T* o, float* ws, float* lse = nullptr) {
  static_assert(64 % RB == 0 && BPT >= 1 && BPT * RB <= 64, "row groups tile the 64 rows of a split tile");
  // The split (a constant table) is read before the wait, overlapping the chunks' pass.
  const SplitD sp = splits[blockIdx.x / BPT];
  if constexpr (PDL) pdl_wait();  // a programmatic launch: the chunks' pass has completed from here on
  constexpr int ND = (HD + 31) / 32;  // outputs per lane
  const int r0 = (int)(blockIdx.x % BPT) * RB;
  const i64 bh = blockIdx.y;
  const float* wsplit = split_region<SEQ, HD>(ws);
  const float* pml = split_ml(wsplit, NSLOTS, HD, 0);  // the slots' (m, l)
  // Slot row of chunk c for tile row r: slot0 + 64 c + r (O row at wsplit + HD slot, (m, l) at pml + 2 slot).
  const i64 slot0 = split_row(bh, NSLOTS, sp.slot_begin, 0);
  __shared__ float s_max[RB], s_ref[RB], s_sum[RB];
  __shared__ float s_part[RB][WPR][HD];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, rr = w / WPR, sub = w % WPR, r = r0 + rr;
  const bool live = sp.m_begin + r < sp.m_end;  // warp-uniform
  if (live && sub == 0) {
    float M = neg_inf();
    for (int c = lane; c < sp.slot_count; c += 32) M = fmaxf(M, pml[(slot0 + (i64)c * 64 + r) * 2]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    const float ref = softmax_ref(M);
    float L = 0.f;
    for (int c = lane; c < sp.slot_count; c += 32) {
      const i64 b = slot0 + (i64)c * 64 + r;
      L += pml[b * 2 + 1] * fast_exp2(pml[b * 2] - ref);
    }
    L = lane_sum<32>(L);
    if (lane == 0) {
      s_max[rr] = M;
      s_ref[rr] = ref;
      s_sum[rr] = L;
    }
  }
  __syncthreads();
  if (live) {
    const float ref = s_ref[rr];
    float acc[ND];
#pragma unroll
    for (int j = 0; j < ND; ++j) acc[j] = 0.f;
#pragma unroll 2
    for (int c = sub; c < sp.slot_count; c += WPR) {
      const i64 b = slot0 + (i64)c * 64 + r;
      const float wgt = fast_exp2(pml[b * 2] - ref);
#pragma unroll
      for (int j = 0; j < ND; ++j)
        if (32 * j + lane < HD) acc[j] += wsplit[b * HD + 32 * j + lane] * wgt;
    }
#pragma unroll
    for (int j = 0; j < ND; ++j)
      if (32 * j + lane < HD) s_part[rr][sub][32 * j + lane] = acc[j];
  }
  __syncthreads();
  for (int x = threadIdx.x; x < RB * HD; x += blockDim.x) {
    const int xr = x / HD, d = x % HD;
    const i64 m = sp.m_begin + r0 + xr;
    if (m >= sp.m_end) continue;
    const i64 i = sp.phase + (i64)PERIOD * m;
    float acc = 0.f;
#pragma unroll
    for (int k = 0; k < WPR; ++k) acc += s_part[xr][k][d];
    const float L = s_sum[xr];
    if (LAST) {
      o[(q_head(bh) * SEQ + i) * HD + d] = from_f<T>(L > 0.f ? acc / L : 0.f);
      if (SPLAT_LSE && d == 0 && lse != nullptr) lse[q_head(bh) * SEQ + i] = row_lse(s_ref[xr], L);
    } else {
      ws[(bh * SEQ + i) * HD + d] = acc;
      if (d == 0) {
        float* ml = state_ml(ws, SEQ, HD, bh, i);
        ml[0] = s_max[xr];
        ml[1] = L;
      }
    }
  }
}
