// Tensor-core engine for tf32 (mma.sync m16n8k8, fp32 storage).
#pragma once
#include "splat/common.cuh"
#include "splat/geometry.cuh"
#include "splat/plan.cuh"
#include "splat/online_softmax.cuh"

// ================================================================================================
// Engine: tensor cores, tf32 (fp32 storage, head_dim % 4 == 0, <= 128; width HW: head_dim rounded
// up to 32, the padding columns zero and never stored). 64-row tiles as 4 warps x 16
// rows; key tiles of 64 fp32 keys gathered by cp.async into STAGES shared-memory stages;
// S = Q.K^T and O += P.V with mma.m16n8k8.tf32 (operands rounded by cvt.rna.tf32.f32 as the
// fragments are loaded), online softmax in fp32 (OnlineSoftmax; O normalised by an IEEE division). ldmatrix moves 16-bit pairs, so
// fragments come from plain shared loads. Both contractions are free in the order of their k
// slots, which are mapped so that every shared load is a conflict-free 16-byte vector:
//  * S, k-step 2j+s: slot t (a0/a1, b0) is head column 16j + 4t + 2s, slot t+4 (a2/a3, b1) the
//    next one. Lane (g, t) reads K row 8n+g, columns 16j + 4t .. +3 (one float4 per two
//    k-steps); K rows hold HW + 16 floats, so rows g and g+1 are 16 banks apart and a quarter
//    warp covers the 32 banks once.
//  * P.V, 8-key step: slot t is key 2t, slot t+4 key 2t+1 -- exactly the keys the S accumulators
//    hold (c0/c2: 2t, c1/c3: 2t+1), so P feeds the mma with no shuffle.
//  * O, n-tile dn, column c: head column 32(dn/4) + 4c + dn%4. The V operand of lane (g, t) is
//    then V[key][32j + 4g .. +3] (one float4 per four n-tiles); V rows hold HW + 4 floats (keys
//    2t and 2t+2 are 8 banks apart). A lane's O columns are 32j + 8t .. +7.
// A thread owns rows g and g+8 of its warp's 16 (h = 0, 1), like MmaEngine with MW = 1.
// ================================================================================================
// An engine's most derived type: Derived, or the engine itself when Derived is void.
template <class Derived, class Engine> struct EngineSelf { using type = Derived; };
template <class Engine> struct EngineSelf<void, Engine> { using type = Engine; };

// Derived: an engine that reuses this one with scores of its own (MmaTf32x3Engine), or void.
template <int HD, int SEQ, int KV, int NSTAGES, class Derived = void>
struct MmaTf32Engine : OnlineSoftmax<2, 4, false> {
  static constexpr int NT = 128, BR = 64, BC = 64, ROWS = 2, STAGES = NSTAGES;
  // Width HW: head_dim rounded up to 32 (geometry.cuh: tf32_width); rows of whole float4.
  static constexpr int HW = splat::geometry::tf32_width(HD), LDK = HW + 16, LDV = HW + 4;
  static_assert(HD % 4 == 0, "rows of whole 16-byte chunks");
  static constexpr int SMEM = splat::geometry::tf32_smem(STAGES, HD);  // BC keys of LDK + LDV floats a stage
  static constexpr int KV_LEN = KV;
  float* Ks;
  float* Vs;
  const float* kg;
  const float* vg;
  u32 qf[HW / 8][4];
  float acc[HW / 8][4];

  __device__ __forceinline__ static int slot(int h) {
    return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * h;
  }
  // Head column of O accumulator element e of n-tile dn (lane t = t4).
  __device__ __forceinline__ static int ocol(int dn, int e, int t4) {
    return (dn >> 2) * 32 + (2 * t4 + (e & 1)) * 4 + (dn & 3);
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const float* q, const float* k, const float* v,
                                        const i64* row, const Head& hv, bool first, const float* ws) {
    const i64 bh = hv.bh;
    Ks = reinterpret_cast<float*>(smem);
    Vs = Ks + STAGES * BC * LDK;
    kg = k + head_k_elems<KV, HD>(hv);
    vg = v + head_k_elems<KV, HD>(hv);
    const float* qg = q + head_q_elems<SEQ, HD>(hv);
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < HW / 16; ++j) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row[h] >= 0 && (HD == HW || 16 * j + 4 * t4 < HD)) x = *reinterpret_cast<const float4*>(qg + row[h] * (kQStep * HD) + 16 * j + 4 * t4);
        qf[2 * j][h] = to_tf32(x.x);
        qf[2 * j][h + 2] = to_tf32(x.y);
        qf[2 * j + 1][h] = to_tf32(x.z);
        qf[2 * j + 1][h + 2] = to_tf32(x.w);
      }
    init_state<SEQ, HD>(row, bh, first, ws);
#pragma unroll
    for (int d = 0; d < HW / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 i = row[e >> 1];
        acc[d][e] = (!first && i >= 0 && (HD == HW || ocol(d, e, t4) < HD)) ? ws[(bh * SEQ + i) * HD + ocol(d, e, t4)] : 0.f;
      }
  }

  // Keys base + u*step, u in [u0, u0 + BC), into stage buf (gather_kv).
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    gather_kv<HD, HW, BC, NT, LDK, LDV>(Ks + buf * BC * LDK, Vs + buf * BC * LDV, kg, vg, w, u0, table);
  }

  // One key tile: scores, online softmax (scores become probabilities in place), O += P.V; the
  // two contractions are the most derived engine's.
  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    auto* self = static_cast<typename EngineSelf<Derived, MmaTf32Engine>::type*>(this);
    float s[BC / 8][4];
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    self->scores(buf, s);
    softmax(s, full, scale_log2, keep);
    self->accumulate(buf, s);
  }

  // S += Q.K^T for the tile in stage buf (compute zeroes S).
  __device__ __forceinline__ void scores(int buf, float (&s)[BC / 8][4]) const {
    const float* Kb = Ks + buf * BC * LDK;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    // k outer, key n-tiles inner: 8 independent accumulator chains between dependent mma.
#pragma unroll
    for (int j = 0; j < HW / 16; ++j) {
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        const float4 x = *reinterpret_cast<const float4*>(Kb + (8 * n + g) * LDK + 16 * j + 4 * t4);
        mma1688_tf32(s[n], qf[2 * j], to_tf32(x.x), to_tf32(x.y));
        mma1688_tf32(s[n], qf[2 * j + 1], to_tf32(x.z), to_tf32(x.w));
      }
    }
  }

  // Masks, scales and exponentiates S in place (probabilities, not yet normalised) and rescales
  // O and the running sums to the new row maxima.
  template <class Keep>
  __device__ __forceinline__ void softmax(float (&s)[BC / 8][4], bool full, float scale_log2, Keep keep) {
    const int t4 = threadIdx.x & 3;
    // Masked scores become -inf; with a positive scale the row max is taken on raw scores and the
    // scale folds into the exponent (one FFMA + EX2 per score).
    const bool pos = scale_log2 > 0.f;
    if (!pos) {
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
    }
    if (!full) {  // uniform branch: interior key tiles skip the mask
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!keep(e >> 1, n * 8 + 2 * t4 + (e & 1))) s[n][e] = neg_inf();
    }
    const float mul = pos ? scale_log2 : 1.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = neg_inf();
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float ref;
      const float alpha = rebase(h, mx * mul, ref);
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        const float p0 = fast_exp2(fmaf(s[n][2 * h], mul, -ref)), p1 = fast_exp2(fmaf(s[n][2 * h + 1], mul, -ref));
        s[n][2 * h] = p0;
        s[n][2 * h + 1] = p1;
        sum += p0 + p1;
      }
      l[h] = l[h] * alpha + sum;
#pragma unroll
      for (int d = 0; d < HW / 8; ++d) {
        acc[d][2 * h] *= alpha;
        acc[d][2 * h + 1] *= alpha;
      }
    }
  }

  // O += P.V for the tile in stage buf, P the probabilities left in s by softmax().
  __device__ __forceinline__ void accumulate(int buf, const float (&s)[BC / 8][4]) {
    const float* Vb = Vs + buf * BC * LDV;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    // O += P.V, one 8-key step per S n-tile kb (slot t: key 2t, slot t+4: key 2t+1).
#pragma unroll
    for (int kb = 0; kb < BC / 8; ++kb) {
      const u32 a[4] = {to_tf32(s[kb][0]), to_tf32(s[kb][2]), to_tf32(s[kb][1]), to_tf32(s[kb][3])};
      const float* v0 = Vb + (8 * kb + 2 * t4) * LDV + 4 * g;
#pragma unroll
      for (int j = 0; j < HW / 32; ++j) {
        const float4 x0 = *reinterpret_cast<const float4*>(v0 + 32 * j);
        const float4 x1 = *reinterpret_cast<const float4*>(v0 + LDV + 32 * j);
        mma1688_tf32(acc[4 * j], a, to_tf32(x0.x), to_tf32(x1.x));
        mma1688_tf32(acc[4 * j + 1], a, to_tf32(x0.y), to_tf32(x1.y));
        mma1688_tf32(acc[4 * j + 2], a, to_tf32(x0.z), to_tf32(x1.z));
        mma1688_tf32(acc[4 * j + 3], a, to_tf32(x0.w), to_tf32(x1.w));
      }
    }
  }

  // Row h's values at head columns 32j + 4(2t + p) .. +3 (p = 0, 1), times f.
  __device__ __forceinline__ float4 ovec(int h, int j, int p, float f) const {
    const int e = 2 * h + p;
    return make_float4(acc[4 * j][e] * f, acc[4 * j + 1][e] * f, acc[4 * j + 2][e] * f, acc[4 * j + 3][e] * f);
  }

  // Row h of O times f (1: as it is), to the row at dst (its HD columns, not the width's padding).
  __device__ __forceinline__ void store_o(int h, float* dst, float f, int t4) const {
#pragma unroll
    for (int j = 0; j < HW / 32; ++j)
#pragma unroll
      for (int p = 0; p < 2; ++p)
        if (HD == HW || 32 * j + 4 * (2 * t4 + p) < HD) *reinterpret_cast<float4*>(dst + 32 * j + 4 * (2 * t4 + p)) = ovec(h, j, p, f);
  }
  __device__ __forceinline__ void store_acc(int h, float* dst, int t4) const { store_o(h, dst, 1.f, t4); }
  // Partial state of a split-KV chunk (OnlineSoftmax's split slots).
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    softmax_end_partial(*this, bh, nslots, split_slot, wsplit, HD);
  }
  __device__ __forceinline__ void end(const i64* row, const Head& hv, bool last, float* o, float* ws) {
    softmax_end<MmaTf32Engine, SEQ, HD>(*this, row, hv, last, o, ws);
  }
};
