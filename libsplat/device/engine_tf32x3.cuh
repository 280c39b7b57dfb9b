// Tensor-core engine for fp32 as three tf32 products (3xTF32).
#pragma once
#include "splat/engine_tf32.cuh"

// ================================================================================================
// Engine: fp32 on tensor cores as three tf32 products (3xTF32; fp32 storage, head_dim % 4 == 0,
// <= 128, padded to MmaTf32Engine's width).
// Every operand x is split into hi = rna_tf32(x) and lo = rna_tf32(x - hi) (x - hi is exact in
// fp32: hi is x with its 13 low mantissa bits rounded away), and a*b ~= a_hi*b_hi + a_hi*b_lo +
// a_lo*b_hi with fp32 accumulation: |x - hi - lo| <= 2^-22 |x| and the dropped a_lo*b_lo is at
// most 2^-22 |a*b|, so a product is within about 3 * 2^-22 |a*b| (plain tf32: 2^-10) and both
// contractions are about as accurate as fp32 FMA chains (docs/splatc-kernels.md, 3xTF32).
// The two small products go into the accumulator before the big one (they are not absorbed by
// it). Layouts, fragment mapping, cp.async stages and the online softmax are MmaTf32Engine's
// (this engine derives from it): only begin (Q's hi and lo fragments, kept in registers) and the
// two contractions (three mma per product) differ. head_dim > 96: Q's lo fragments live in shared
// memory after the stages (QLS; [k-step][thread] 16-byte slots, conflict-free): with them in
// registers too, O (64) and Q (128) left no room at d = 128 and ptxas spilled 230-410 bytes
// (H200, fp32 d = 128: 1.09-1.25x faster with them in shared memory).
// ================================================================================================
__device__ __forceinline__ void split_tf32(float x, u32& hi, u32& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - __uint_as_float(hi));
}
// D += A*B with A = a_hi + a_lo, B = b_hi + b_lo (one m16n8k8 step): small products first.
__device__ __forceinline__ void mma1688_3xtf32(float* d, const u32* ah, const u32* al, u32 bh0, u32 bh1, u32 bl0,
                                               u32 bl1) {
  mma1688_tf32(d, al, bh0, bh1);
  mma1688_tf32(d, ah, bl0, bl1);
  mma1688_tf32(d, ah, bh0, bh1);
}

template <int HD, int SEQ, int KV, int NSTAGES>
struct MmaTf32x3Engine : MmaTf32Engine<HD, SEQ, KV, NSTAGES, MmaTf32x3Engine<HD, SEQ, KV, NSTAGES>> {
  using Base = MmaTf32Engine<HD, SEQ, KV, NSTAGES, MmaTf32x3Engine<HD, SEQ, KV, NSTAGES>>;
  using Base::BC;
  using Base::LDK;
  using Base::LDV;
  using Base::Ks;
  using Base::Vs;
  using Base::qf;
  using Base::acc;
  // Where the stages leave room (227 KB per block; three stages at d = 128 do not).
  static constexpr bool QLS = splat::geometry::tf32x3_q_lo_shared(NSTAGES, HD);
  static constexpr int SMEM = splat::geometry::tf32x3_smem(NSTAGES, HD);
  u32 ql[QLS ? 1 : Base::HW / 8][4];  // lo parts of Q's fragments (qf: hi parts); QLS: in shared memory
  u32 qls;                      // QLS: shared address of this thread's slot of k-step 0

  // Q's lo fragment of k-step kk.
  __device__ __forceinline__ void qlo(int kk, u32 (&a)[4]) const {
    if constexpr (QLS) {
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3]) : "r"(qls + kk * 128 * 16));
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) a[e] = ql[kk][e];
    }
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const float* q, const float* k, const float* v,
                                        const i64* row, const Head& hv, bool first, const float* ws) {
    // Pointers, Q's hi fragments (rna_tf32, as MmaTf32Engine rounds them), (m, l) and O.
    Base::begin(smem, q, k, v, row, hv, first, ws);
    // The lo fragments from the same Q elements (the loads are the base's: same addresses).
    const float* qg = q + head_q_elems<SEQ, HD>(hv);
    const int t4 = threadIdx.x & 3;
    // QLS: this thread's slots; only this thread reads them, so no barrier is needed.
    if constexpr (QLS) qls = smem_addr(smem + Base::SMEM) + threadIdx.x * 16;
#pragma unroll
    for (int j = 0; j < Base::HW / 16; ++j) {
      float4 x[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        x[h] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row[h] >= 0 && (HD == Base::HW || 16 * j + 4 * t4 < HD)) x[h] = *reinterpret_cast<const float4*>(qg + row[h] * (kQStep * HD) + 16 * j + 4 * t4);
      }
      // k-steps 2j and 2j + 1; fragment element e is row e % 2, column pair e / 2 (the base's qf).
      const u32 la[4] = {to_tf32(x[0].x - __uint_as_float(qf[2 * j][0])), to_tf32(x[1].x - __uint_as_float(qf[2 * j][1])),
                         to_tf32(x[0].y - __uint_as_float(qf[2 * j][2])), to_tf32(x[1].y - __uint_as_float(qf[2 * j][3]))};
      const u32 lb[4] = {to_tf32(x[0].z - __uint_as_float(qf[2 * j + 1][0])), to_tf32(x[1].z - __uint_as_float(qf[2 * j + 1][1])),
                         to_tf32(x[0].w - __uint_as_float(qf[2 * j + 1][2])), to_tf32(x[1].w - __uint_as_float(qf[2 * j + 1][3]))};
      if constexpr (QLS) {
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(qls + 2 * j * 128 * 16), "r"(la[0]), "r"(la[1]), "r"(la[2]),
                     "r"(la[3]) : "memory");
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(qls + (2 * j + 1) * 128 * 16), "r"(lb[0]), "r"(lb[1]),
                     "r"(lb[2]), "r"(lb[3]) : "memory");
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          ql[2 * j][e] = la[e];
          ql[2 * j + 1][e] = lb[e];
        }
      }
    }
  }

  // S += Q.K^T (MmaTf32Engine::compute zeroes S): k outer, key n-tiles inner (8 independent
  // accumulator chains); MmaTf32Engine's slot order (k-step 2j: K columns 16j + 4t, +1; k-step
  // 2j+1: 16j + 4t + 2, +3).
  __device__ __forceinline__ void scores(int buf, float (&s)[BC / 8][4]) const {
    const float* Kb = Ks + buf * BC * LDK;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int j = 0; j < Base::HW / 16; ++j) {
      u32 la[4], lb[4];
      qlo(2 * j, la);
      qlo(2 * j + 1, lb);
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        const float4 x = *reinterpret_cast<const float4*>(Kb + (8 * n + g) * LDK + 16 * j + 4 * t4);
        u32 h0, l0, h1, l1, h2, l2, h3, l3;
        split_tf32(x.x, h0, l0);
        split_tf32(x.y, h1, l1);
        split_tf32(x.z, h2, l2);
        split_tf32(x.w, h3, l3);
        mma1688_3xtf32(s[n], qf[2 * j], la, h0, h1, l0, l1);
        mma1688_3xtf32(s[n], qf[2 * j + 1], lb, h2, h3, l2, l3);
      }
    }
  }

  // O += P.V, one 8-key step per S n-tile kb (slot t: key 2t, slot t+4: key 2t+1); P is split
  // once per step, V per element.
  __device__ __forceinline__ void accumulate(int buf, const float (&s)[BC / 8][4]) {
    const float* Vb = Vs + buf * BC * LDV;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int kb = 0; kb < BC / 8; ++kb) {
      u32 ah[4], al[4];
      split_tf32(s[kb][0], ah[0], al[0]);
      split_tf32(s[kb][2], ah[1], al[1]);
      split_tf32(s[kb][1], ah[2], al[2]);
      split_tf32(s[kb][3], ah[3], al[3]);
      const float* v0 = Vb + (8 * kb + 2 * t4) * LDV + 4 * g;
#pragma unroll
      for (int j = 0; j < Base::HW / 32; ++j) {
        const float4 x0 = *reinterpret_cast<const float4*>(v0 + 32 * j);
        const float4 x1 = *reinterpret_cast<const float4*>(v0 + LDV + 32 * j);
        u32 h0, l0, h1, l1;
        split_tf32(x0.x, h0, l0);
        split_tf32(x1.x, h1, l1);
        mma1688_3xtf32(acc[4 * j], ah, al, h0, h1, l0, l1);
        split_tf32(x0.y, h0, l0);
        split_tf32(x1.y, h1, l1);
        mma1688_3xtf32(acc[4 * j + 1], ah, al, h0, h1, l0, l1);
        split_tf32(x0.z, h0, l0);
        split_tf32(x1.z, h1, l1);
        mma1688_3xtf32(acc[4 * j + 2], ah, al, h0, h1, l0, l1);
        split_tf32(x0.w, h0, l0);
        split_tf32(x1.w, h1, l1);
        mma1688_3xtf32(acc[4 * j + 3], ah, al, h0, h1, l0, l1);
      }
    }
  }
};

