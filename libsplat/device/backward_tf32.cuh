// The backward pass's engine for fp32 storage (fp32 as 3xTF32, tf32 as plain tf32), mma.sync m16n8k8.
// The scheme, the driver, the statistics and the outputs are BwdMmaEngine's (backward.cuh); the
// products use MmaTf32Engine's fragment mapping (engine_tf32.cuh), which needs no shuffle:
//  * S = A.B^T (S and dP): k-step 2j has head columns 16j + 4t (slot t) and 16j + 4t + 1 (slot t+4),
//    k-step 2j+1 the next two; A's fragments come from the tile's rows in shared memory (two float4
//    per 16 columns), B's from the walked rows (one float4 per two k-steps).
//  * acc += P.B (dQ, dK, dV): 8 walked rows per k-step, slot t the row 2t and slot t+4 the row 2t+1,
//    exactly the columns S's accumulators hold, so P (or dS) feeds the mma as it is; n-tile dn holds
//    head columns 32(dn/4) + 4c + dn%4 (ocol), the B operand a float4 of head columns 32j + 4g.
// X3 (fp32): every operand x is split into hi = rna_tf32(x) and lo = rna_tf32(x - hi) and a product
// is a_lo*b_hi + a_hi*b_lo + a_hi*b_hi (mma1688_3xtf32, engine_tf32x3.cuh): about fp32 accuracy.
// Not X3 (tf32): one tf32 product.
#pragma once
#include "splat/backward.cuh"
#include "splat/engine_tf32x3.cuh"

// D += A*B for one m16n8k8 step, 3xTF32 (X3) or tf32; a and b unrounded fp32 values.
template <bool X3>
__device__ __forceinline__ void mma_f32(float* d, const float (&a)[4], float b0, float b1) {
  if constexpr (X3) {
    u32 ah[4], al[4], bh0, bl0, bh1, bl1;
#pragma unroll
    for (int e = 0; e < 4; ++e) split_tf32(a[e], ah[e], al[e]);
    split_tf32(b0, bh0, bl0);
    split_tf32(b1, bh1, bl1);
    mma1688_3xtf32(d, ah, al, bh0, bh1, bl0, bl1);
  } else {
    const u32 ah[4] = {to_tf32(a[0]), to_tf32(a[1]), to_tf32(a[2]), to_tf32(a[3])};
    mma1688_tf32(d, ah, to_tf32(b0), to_tf32(b1));
  }
}

// 64-row tiles as 4 warps x 16 rows; a thread owns rows g + 8h of its warp's (h < 2) and, in S and
// dP, the walked rows 8n + 2t + (e & 1) of each step (BwdMmaEngine's layout). Width HW: head_dim
// rounded up to 32 (tf32_width), the padding columns zero and never stored.
// FAST (dK/dV only): the fast mode, dQ added by atomics after each step (dq_step; BwdMmaEngine's).
template <int HD, int SEQ, int KV, bool DKV, int NSTAGES, bool X3, int STEP, bool FAST = false>
struct BwdTf32Engine {
  static constexpr int NT = 128, BR = 64, BC = 64, ROWS = 2;
  static constexpr int HW = splat::geometry::tf32_width(HD), LDA = HW + 16, LDX = HW + 4;
  static_assert(HD % 4 == 0 && HW <= 128, "rows of whole 16-byte chunks, head_dim at most 128");
  static_assert(STEP == 32 || STEP == 64, "32 or 64 walked rows per step");
  static constexpr bool FAST_DQ = FAST && DKV;
  static constexpr int CW = STEP, STAGES = NSTAGES, SMEM = splat::geometry::bwd_tf32_smem(STAGES, HD, DKV, FAST_DQ ? STEP : 0);
  static constexpr int ROWS_LEN = DKV ? KV : SEQ, KV_LEN = DKV ? SEQ : KV;
  static constexpr bool DKV_ = DKV;
  static constexpr int LDD = 68;  // FAST_DQ: dS^T rows (walked rows) of 64 keys + 4 floats
  static constexpr float kLog2e = BwdUnits::kLog2e;
  const BwdArgs* args;
  float* As;     // A1 rows then A2 rows (64 each, LDA floats)
  float* Xs;     // stages of X, then of Y (LDX floats a row)
  float* Ys;
  float* stats;  // dK/dV: per stage, the walked rows' lse (64) and D (64)
  int* idx;      // FAST_DQ: per stage, the walked rows' indices (-1 past the walk)
  float* dSt;    // FAST_DQ: a step's dS^T as [walked row][key]
  float* dq_g;   // FAST_DQ: this block's head's dQ sums (BwdArgs::dq_acc)
  const float* xg;
  const float* yg;
  const float* lse_g;
  const float* delta_g;
  float lrow[ROWS], drow[ROWS];
  float acc1[HW / 8][4];
  float acc2[DKV ? HW / 8 : 1][4];

  __device__ __forceinline__ static int slot(int h) { return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * h; }
  // Head column of accumulator element e of n-tile dn (MmaTf32Engine::ocol).
  __device__ __forceinline__ static int ocol(int dn, int e, int t4) { return (dn >> 2) * 32 + (2 * t4 + (e & 1)) * 4 + (dn & 3); }
  __device__ __forceinline__ void bind(const void* extra) { args = static_cast<const BwdArgs*>(extra); }
  __device__ __forceinline__ static i64 q_rows(const Head& hv) { return head_q0<SEQ>(hv); }
  __device__ __forceinline__ static i64 k_rows(const Head& hv) { return head_k0<KV>(hv); }
  static constexpr int ASTEP = DKV ? kKvStep : kQStep, XSTEP = DKV ? kQStep : kKvStep;  // BwdMmaEngine's

  // The warp's 16 rows of A1 and A2 into shared memory (bwd_stage_rows, backward.cuh).
  __device__ __forceinline__ void stage_rows(const float* a1, const float* a2, const i64* row) {
    bwd_stage_rows<float, float, HD, HW, LDA, ASTEP>(As, a1, a2, row);
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const float* a1, const float* x, const float*, const i64* row,
                                        const Head& hv, bool first, const float*) {
    As = reinterpret_cast<float*>(smem);
    Xs = As + 2 * BR * LDA;
    Ys = Xs + STAGES * BC * LDX;
    stats = Ys + STAGES * BC * LDX;
    if constexpr (FAST_DQ) {
      idx = reinterpret_cast<int*>(stats + STAGES * 2 * BC);
      dSt = reinterpret_cast<float*>(idx + STAGES * BC);
      dq_g = args->dq_acc + hv.bh * (i64)SEQ * HD;
    }
    bwd_begin_rows<float, HD, SEQ>(*this, a1, x, row, hv);
    const int t4 = threadIdx.x & 3;
    constexpr int W = DKV ? 2 * HD : HD;
    const float* ws = args->acc_ws + (bwd_acc_slot<DKV>(hv.bh) * ROWS_LEN) * W;
#pragma unroll
    for (int d = 0; d < HW / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 i = row[e >> 1];
        const int col = ocol(d, e, t4);
        const bool load = !first && i >= 0 && (HD == HW || col < HD);
        acc1[d][e] = load ? ws[i * W + col] : 0.f;
        if constexpr (DKV) acc2[d][e] = load ? ws[i * W + HD + col] : 0.f;
      }
  }

  // Walked rows base + u*step, u in [u0, u0 + BC), of X and Y into stage buf (and their lse and D).
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    gather_kv<HD, HW, BC, NT, LDX, LDX, XSTEP>(Xs + buf * BC * LDX, Ys + buf * BC * LDX, xg, yg, w, u0, table);
    if constexpr (DKV) bwd_load_stats<BC>(stats + buf * 2 * BC, lse_g, delta_g, w, u0, table, FAST_DQ ? idx + buf * BC : nullptr);
  }

  // s[CW/8][4] = A(a) . B^T over the CW walked rows from c0 of the stage at Bb.
  __device__ __forceinline__ void product_nt(int a, const float* Bb, int c0, float (&s)[CW / 8][4]) const {
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    const float* ar = As + (a * BR + (threadIdx.x >> 5) * 16 + g) * LDA + 4 * t4;
#pragma unroll
    for (int n = 0; n < CW / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll 2  // fully unrolled, d = 128 spilled 1.6-2.5 KB (fp32)
    for (int j = 0; j < HW / 16; ++j) {
      const float4 r0 = *reinterpret_cast<const float4*>(ar + 16 * j);
      const float4 r1 = *reinterpret_cast<const float4*>(ar + 8 * LDA + 16 * j);
      const float f0[4] = {r0.x, r1.x, r0.y, r1.y}, f1[4] = {r0.z, r1.z, r0.w, r1.w};
#pragma unroll
      for (int n = 0; n < CW / 8; ++n) {
        const float4 x = *reinterpret_cast<const float4*>(Bb + (c0 + 8 * n + g) * LDX + 16 * j + 4 * t4);
        mma_f32<X3>(s[n], f0, x.x, x.y);
        mma_f32<X3>(s[n], f1, x.z, x.w);
      }
    }
  }
  // acc += P . B over the CW walked rows from c0 of the stage at Bb (P in accumulator layout).
  __device__ __forceinline__ static void product_acc(const float (&p)[CW / 8][4], const float* Bb, int c0, float (&acc)[HW / 8][4]) {
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int kb = 0; kb < CW / 8; ++kb) {
      const float a[4] = {p[kb][0], p[kb][2], p[kb][1], p[kb][3]};
      const float* b0 = Bb + (c0 + 8 * kb + 2 * t4) * LDX + 4 * g;
#pragma unroll
      for (int j = 0; j < HW / 32; ++j) {
        const float4 x0 = *reinterpret_cast<const float4*>(b0 + 32 * j);
        const float4 x1 = *reinterpret_cast<const float4*>(b0 + LDX + 32 * j);
        mma_f32<X3>(acc[4 * j], a, x0.x, x1.x);
        mma_f32<X3>(acc[4 * j + 1], a, x0.y, x1.y);
        mma_f32<X3>(acc[4 * j + 2], a, x0.z, x1.z);
        mma_f32<X3>(acc[4 * j + 3], a, x0.w, x1.w);
      }
    }
  }

  // One key tile (bwd_key_tile, backward.cuh).
  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    bwd_key_tile(*this, Xs + buf * BC * LDX, Ys + buf * BC * LDX, stats + buf * 2 * BC, full, scale_log2, keep,
                 FAST_DQ ? idx + buf * BC : nullptr);
  }

  // FAST_DQ: dQ[walked rows of the step] += dS.K by atomics (BwdMmaEngine::dq_step's scheme, m16n8k8):
  // dS^T through shared memory as [walked row][key] floats; warp w computes walked rows 16 (w % RB)
  // .. + 16 and the n-tiles (8 head columns, natural order) of group w / RB, k-step ks over keys 8ks +
  // 2t and 8ks + 2t + 1 (slots t and t + 4: one float2 of dS^T, two rows of the staged K tile A1).
  __device__ __forceinline__ void dq_step(const float (&ds)[CW / 8][4], int c0, const int* rows) {
    constexpr int RB = CW / 16, CG = 4 / RB, NTT = HW / 8, NTH = (NTT + CG - 1) / CG, PC = NTH < 4 ? NTH : 4;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;
    bwd_store_dst<float, CW, LDD>(dSt, ds);
    __syncthreads();
    const int rb = w % RB, cg = w / RB;
    const int i0 = rows[c0 + rb * 16 + g], i1 = rows[c0 + rb * 16 + g + 8];
    const float* a_lo = dSt + (rb * 16 + g) * LDD + 2 * t4;
#pragma unroll
    for (int q0 = 0; q0 < NTH; q0 += PC) {
      float acc[PC][4];
#pragma unroll
      for (int q = 0; q < PC; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.f;
#pragma unroll 2
      for (int ks = 0; ks < BR / 8; ++ks) {
        const float2 r0 = *reinterpret_cast<const float2*>(a_lo + 8 * ks);
        const float2 r1 = *reinterpret_cast<const float2*>(a_lo + 8 * LDD + 8 * ks);
        const float a[4] = {r0.x, r1.x, r0.y, r1.y};
        const float* b = As + (8 * ks + 2 * t4) * LDA + g;
#pragma unroll
        for (int q = 0; q < PC; ++q) {
          const int nt = cg * NTH + q0 + q;
          if (q0 + q < NTH && nt < NTT) mma_f32<X3>(acc[q], a, b[nt * 8], b[LDA + nt * 8]);
        }
      }
      bwd_dq_add<HD, PC>(dq_g, acc, i0, i1, (cg * NTH + q0) * 8, NTH - q0);
    }
    __syncthreads();  // the next step rewrites dS^T
  }

  // Row h's accumulator values at head columns 32j + 4(2t + p) .. +3, times f.
  __device__ __forceinline__ static float4 vec(const float (&acc)[HW / 8][4], int h, int j, int p, float f) {
    const int e = 2 * h + p;
    return make_float4(acc[4 * j][e] * f, acc[4 * j + 1][e] * f, acc[4 * j + 2][e] * f, acc[4 * j + 3][e] * f);
  }
  // Row h of the accumulators to dst (its HD columns; dK/dV: acc2 at dst + HD), times f1 and f2.
  __device__ __forceinline__ void store_row(int h, float* dst, float* dst2, float f1, float f2) const {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int j = 0; j < HW / 32; ++j)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const int col = 32 * j + 4 * (2 * t4 + p);
        if (HD != HW && col >= HD) continue;
        *reinterpret_cast<float4*>(dst + col) = vec(acc1, h, j, p, f1);
        if constexpr (DKV) *reinterpret_cast<float4*>(dst2 + col) = vec(acc2, h, j, p, f2);
      }
  }

  // A split tile's chunk: its accumulators to its slot (row slot(h) of 64), summed by bwd_combine.
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float*) {
    constexpr int W = DKV ? 2 * HD : HD;
    float* dst = args->split_ws + ((bh * nslots + split_slot) * 64) * W;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) store_row(h, dst + slot(h) * W, dst + slot(h) * W + HD, 1.f, 1.f);
  }

  // The tile's rows: the outputs (dQ, or dK and dV) on the last pass (dQ and dK times the scale), else
  // the fp32 accumulators to the workspace (a later pass, or the grouped-query reduction, continues).
  __device__ __forceinline__ void end(const i64* row, const Head& hv, bool last, float*, float*) {
    constexpr int W = DKV ? 2 * HD : HD;
    float* ws = args->acc_ws + (bwd_acc_slot<DKV>(hv.bh) * ROWS_LEN) * W;
    const bool to_ws = !last || args->acc_out;
    const i64 orows = DKV ? k_rows(hv) : q_rows(hv);
    float* o1 = static_cast<float*>(args->out1) + orows * HD;
    float* o2 = static_cast<float*>(args->out2) + orows * HD;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const i64 i = row[h];
      if (i < 0) continue;
      if (to_ws)
        store_row(h, ws + i * W, ws + i * W + HD, 1.f, 1.f);
      else
        store_row(h, o1 + i * (ASTEP * HD), DKV ? o2 + i * (ASTEP * HD) : nullptr, args->scale, 1.f);
    }
  }
};
