// CUDA-core engine for fp32 (FMA, shared-memory tiles).
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"

// ================================================================================================
// Engine: CUDA cores (fp32 storage; any dtype with head_dim % 8 == 0). 128 threads as
// 16 x 8: a thread owns 4 rows x 8 keys of S and 4 rows x HD/8 columns of O. Q^T, K^T, V and P^T
// tiles in shared memory (float4 reads, conflict-free); one stage.
// ================================================================================================
template <class T, int HD, int SEQ, int KV, bool ALIAS, bool BATCH>
struct SimtEngine {
  static constexpr int NT = 128, BR = 64, BC = 64, PAD = 4, LDQ = BR + PAD, LDK = BC + PAD, DPT = HD / 8, ROWS = 4, STAGES = 1;
  // Keys of S and columns of O per thread interleaved by 32 so that the 8 lanes of a quarter
  // warp read 128 contiguous bytes (conflict-free 16-byte loads).
  static constexpr bool ILV = HD % 32 == 0;
  __device__ __forceinline__ static int key_of(int tx, int c) { return (c >> 2) * 32 + tx * 4 + (c & 3); }
  __device__ __forceinline__ static int col_of(int tx, int d) { return ILV ? (d >> 2) * 32 + tx * 4 + (d & 3) : tx * DPT + d; }
  // ALIAS: P^T reuses K^T's space (one more barrier per key tile, 17 KB less shared memory:
  // four blocks per SM instead of three).
  static constexpr int QT = HD * LDQ, KT = HD * LDK, VS = BC * HD, PT = BC * LDQ;
  static constexpr int KPT = ALIAS ? (KT > PT ? KT : PT) : KT + PT;
  static constexpr int SMEM = (QT + VS + KPT) * 4;
  float *Qt, *Kt, *Vs, *Pt;
  const T* kg;
  const T* vg;
  float m[4], l[4];
  float acc[4][DPT];

  __device__ __forceinline__ static int slot(int h) { return (threadIdx.x >> 3) * 4 + h; }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* q, const T* k, const T* v, const i64* row, i64 bh,
                                        bool first, const float* ws) {
    Qt = reinterpret_cast<float*>(smem);
    Vs = Qt + QT;
    Kt = Vs + VS;
    Pt = ALIAS ? Kt : Kt + KT;
    kg = k + bh * KV * HD;
    vg = v + bh * KV * HD;
    const T* qg = q + bh * SEQ * HD;
    const int tx = threadIdx.x & 7;
    // Q^T tile: the row of slot r is shared through shared memory (rows are known per thread).
    __shared__ i64 rows_s[64];
#pragma unroll
    for (int h = 0; h < 4; ++h)
      if (tx == 0) rows_s[slot(h)] = row[h];
    __syncthreads();
    for (int x = threadIdx.x; x < BR * (HD / 4); x += 128) {
      int r = x % BR, c = x / BR;
      float qv[4] = {0.f, 0.f, 0.f, 0.f};
      if (rows_s[r] >= 0) load4(qg + rows_s[r] * HD + c * 4, qv);
#pragma unroll
      for (int e = 0; e < 4; ++e) Qt[(c * 4 + e) * LDQ + r] = qv[e];
    }
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      m[h] = neg_inf();
      l[h] = 0.f;
      if (!first && row[h] >= 0) {
        const float* ml = state_ml(ws, SEQ, HD, bh, row[h]);
        m[h] = ml[0];
        l[h] = tx == 0 ? ml[1] : 0.f;
      }
#pragma unroll
      for (int d = 0; d < DPT; ++d) acc[h][d] = (!first && row[h] >= 0) ? ws[(bh * SEQ + row[h]) * HD + col_of(tx, d)] : 0.f;
    }
  }

  // K^T: key fastest (conflict-free transposed stores); V: column fastest (contiguous loads and
  // stores). BATCH: all global loads of a batch of 8 are issued before any shared store (one
  // L2/HBM latency per batch; 32 more live registers during the load).
  __device__ __forceinline__ void load(int, const WalkD& w, int u0, const int* table = nullptr) {
    constexpr int C4 = HD / 4, NK = BC * C4 / NT, NB = NK < 8 ? NK : 8;
    if (!BATCH) {
      for (int x = threadIdx.x; x < BC * C4; x += NT) {
        const int r = x % BC, c = x / BC;
        float kv[4] = {0.f, 0.f, 0.f, 0.f};
        if (u0 + r < w.count) load4(kg + walk_key(w, u0 + r, table) * HD + c * 4, kv);
#pragma unroll
        for (int e = 0; e < 4; ++e) Kt[(c * 4 + e) * LDK + r] = kv[e];
      }
      for (int x = threadIdx.x; x < BC * C4; x += NT) {
        const int c = x % C4, r = x / C4;
        float vv[4] = {0.f, 0.f, 0.f, 0.f};
        if (u0 + r < w.count) load4(vg + walk_key(w, u0 + r, table) * HD + c * 4, vv);
        *reinterpret_cast<float4*>(Vs + r * HD + c * 4) = make_float4(vv[0], vv[1], vv[2], vv[3]);
      }
      return;
    }
    {
      const int r = threadIdx.x % BC, c0 = threadIdx.x / BC;  // element x = tid + NT*k: c = c0 + 2k
      const bool ok = u0 + r < w.count;
      const T* src = kg + (ok ? walk_key(w, u0 + r, table) * HD : 0);
#pragma unroll
      for (int b = 0; b < NK; b += NB) {
        float kv[NB][4];
#pragma unroll
        for (int x = 0; x < NB; ++x) {
          kv[x][0] = kv[x][1] = kv[x][2] = kv[x][3] = 0.f;
          if (ok && b + x < NK) load4(src + (c0 + 2 * (b + x)) * 4, kv[x]);
        }
#pragma unroll
        for (int x = 0; x < NB; ++x)
          if (b + x < NK)
#pragma unroll
            for (int e = 0; e < 4; ++e) Kt[((c0 + 2 * (b + x)) * 4 + e) * LDK + r] = kv[x][e];
      }
    }
#pragma unroll
    for (int b = 0; b < NK; b += NB) {
      float vv[NB][4];
#pragma unroll
      for (int x = 0; x < NB; ++x) {
        const int e = threadIdx.x + NT * (b + x), c = e % C4, r = e / C4;
        vv[x][0] = vv[x][1] = vv[x][2] = vv[x][3] = 0.f;
        if (b + x < NK && u0 + r < w.count) load4(vg + walk_key(w, u0 + r, table) * HD + c * 4, vv[x]);
      }
#pragma unroll
      for (int x = 0; x < NB; ++x) {
        const int e = threadIdx.x + NT * (b + x), c = e % C4, r = e / C4;
        if (b + x < NK) *reinterpret_cast<float4*>(Vs + r * HD + c * 4) = make_float4(vv[x][0], vv[x][1], vv[x][2], vv[x][3]);
      }
    }
  }

  template <class Keep>
  __device__ __forceinline__ void compute(int, bool full, float scale_log2, Keep keep) {
    const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
    float s[4][8];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) s[r][c] = 0.f;
#pragma unroll 8
    for (int kk = 0; kk < HD; ++kk) {
      float4 qv = *reinterpret_cast<const float4*>(Qt + kk * LDQ + ty * 4);
      float4 k0 = *reinterpret_cast<const float4*>(Kt + kk * LDK + tx * 4);
      float4 k1 = *reinterpret_cast<const float4*>(Kt + kk * LDK + 32 + tx * 4);
      float qa[4] = {qv.x, qv.y, qv.z, qv.w};
      float ka[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) s[r][c] = fmaf(qa[r], ka[c], s[r][c]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) s[r][c] *= scale_log2;
    if (!full) {  // uniform branch: interior key tiles skip the mask
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c)
          if (!keep(r, key_of(tx, c))) s[r][c] = neg_inf();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float mx = neg_inf();
#pragma unroll
      for (int c = 0; c < 8; ++c) mx = fmaxf(mx, s[r][c]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_new = fmaxf(m[r], mx);
      const float ref = m_new == neg_inf() ? 0.f : m_new;
      const float alpha = fast_exp2(m[r] - ref);
      m[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        float p = fast_exp2(s[r][c] - ref);
        s[r][c] = p;
        sum += p;
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int d = 0; d < DPT; ++d) acc[r][d] *= alpha;
    }
    if (ALIAS) __syncthreads();  // every warp is done reading K^T before P^T overwrites it
#pragma unroll
    for (int c = 0; c < 8; ++c)
      *reinterpret_cast<float4*>(Pt + key_of(tx, c) * LDQ + ty * 4) = make_float4(s[0][c], s[1][c], s[2][c], s[3][c]);
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BC; ++kk) {
      float4 pv = *reinterpret_cast<const float4*>(Pt + kk * LDQ + ty * 4);
      float pa[4] = {pv.x, pv.y, pv.z, pv.w};
      float va[DPT];
#pragma unroll
      for (int d = 0; d < DPT; d += 4) {
        float4 x = *reinterpret_cast<const float4*>(Vs + kk * HD + col_of(tx, d));
        va[d] = x.x; va[d + 1] = x.y; va[d + 2] = x.z; va[d + 3] = x.w;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int d = 0; d < DPT; ++d) acc[r][d] = fmaf(pa[r], va[d], acc[r][d]);
    }
  }

  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    const int tx = threadIdx.x & 7;
#pragma unroll
    for (int r = 0; r < 4; ++r) l[r] = lane_sum<8>(l[r]);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const i64 base = (bh * nslots + split_slot) * 64 + slot(r);
#pragma unroll
      for (int d = 0; d < DPT; ++d) wsplit[base * HD + col_of(tx, d)] = acc[r][d];
      if (tx == 0) {
        float* ml = wsplit + (i64)gridDim.y * nslots * 64 * HD + base * 2;  // slot row base's (m, l)
        ml[0] = m[r];
        ml[1] = l[r];
      }
    }
  }

  __device__ __forceinline__ void end(const i64* row, i64 bh, bool last, T* o, float* ws) {
    const int tx = threadIdx.x & 7;
#pragma unroll
    for (int r = 0; r < 4; ++r) l[r] = lane_sum<8>(l[r]);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const i64 i = row[r];
      if (i < 0) continue;
      if (last) {
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
#pragma unroll
        for (int d = 0; d < DPT; ++d) o[(bh * SEQ + i) * HD + col_of(tx, d)] = from_f<T>(acc[r][d] * inv);
      } else {
#pragma unroll
        for (int d = 0; d < DPT; ++d) ws[(bh * SEQ + i) * HD + col_of(tx, d)] = acc[r][d];
        if (tx == 0) {
          float* ml = state_ml(ws, SEQ, HD, bh, i);
          ml[0] = m[r];
          ml[1] = l[r];
        }
      }
    }
  }
};

