// The backward pass of attention (the FlashAttention-2 scheme) on the fused pass driver: D =
// rowsum(dO * O) first (bwd_delta), then two kernels that recompute P from the forward's saved
// log-sum-exp instead of storing it:
//   dQ kernel, walking the row plan (query row tiles, their kept keys):
//     S = Q.K^T, P = exp(scale*S - lse_i), dP = dO.V^T, dS = P * (dP - D_i), dQ += scale * dS.K
//   dK/dV kernel, walking the column plan (key row tiles, the query rows that keep them):
//     S^T = K.Q^T, P^T = exp(scale*S^T - lse_j), dP^T = V.dO^T, dS^T = P^T * (dP^T - D_j),
//     dV += P^T.dO, dK += scale * dS^T.Q
// Both are one engine: row operands A1, A2 of the tile and walked operands X, Y (dQ: Q, dO / K, V;
// dK/dV: K, V / Q, dO), S = A1.X^T and dP = A2.Y^T, acc1 += dS.X, and for dK/dV acc2 += P.Y; the
// log-sum-exp and D belong to the tile's rows (dQ) or to the walked rows (dK/dV, staged with X and Y).
// Each output row is summed in a fixed order (by one block; a split tile's chunks write partial sums
// that bwd_combine adds in slot order; grouped query heads are added in head order): no atomics, the
// same bits run to run. The fast mode instead adds dQ by atomics in the dK/dV kernel (dq_step) and
// runs no dQ kernel.
#pragma once
#include "splat/common.cuh"
#include "splat/geometry.cuh"
#include "splat/plan.cuh"
#include "splat/backward_rows.cuh"

// What the backward entry points hand the engine (fused_pass's extra, BwdMmaEngine::bind).
struct BwdArgs {
  const void* a2;      // dQ kernel: dO; dK/dV kernel: V (the tile's second row operand)
  const void* y;       // dQ kernel: V; dK/dV kernel: dO (the second walked operand)
  const float* lse;    // the forward's log-sum-exp per query row, [batch*heads][SEQ] (natural log)
  const float* delta;  // D per query row, [grid.y][SEQ] (bwd_delta); SPLAT_BWD_LSE2_AT: then the lse in log2 units
  void* out1;          // dQ, or dK (the output tensors, in the element type)
  void* out2;          // dV
  float* acc_ws;       // fp32 accumulators handed from pass to pass ([grid.y][rows][HD], dK/dV: [rows][2*HD];
                       // SPLAT_BWD_SHARED_KV: dK/dV's slots are query heads, bwd_acc_slot)
  float* split_ws;     // split tiles' chunk partials ([grid.y][slots][64][HD], dK/dV: [64][2*HD])
  float scale;         // the softmax scale (dQ and dK are scaled by it)
  bool acc_out;        // the last pass writes fp32 accumulators to acc_ws too (grouped-query heads: reduced after)
  float* dq_acc = nullptr;  // fast mode (dK/dV kernel): dQ's fp32 sums by atomics, [grid.y][SEQ][HD] (bwd_dq_store)
};

// Per-head patterns over grouped K/V heads (SPLAT_BWD_SHARED_KV): a K/V head's query heads may lie in
// several head groups, each a module of its own, so every group's dK/dV kernels leave their fp32
// accumulators in one region of the workspace that all groups share, slot q_head(bh) (the query head
// across the groups) rather than bh, and the last group's bwd_reduce_kv sums each K/V head's query
// heads in head order.
#ifndef SPLAT_BWD_SHARED_KV
#define SPLAT_BWD_SHARED_KV 0
#endif
template <bool DKV> __device__ __forceinline__ i64 bwd_acc_slot(i64 bh) { return DKV && SPLAT_BWD_SHARED_KV ? q_head(bh) : bh; }

// The joint launch's block (splat_bwd_p0, geometry::bwd_joint_block; BY_HEAD: bwd_joint_block_by_head):
// which pass, tile and head.
template <bool BY_HEAD = false> __device__ __forceinline__ splat::geometry::JointBlock<i64> bwd_joint_block(int nkv, int nq) {
  const i64 n = blockIdx.x + (i64)gridDim.x * blockIdx.y;
  if (BY_HEAD) return splat::geometry::bwd_joint_block_by_head<i64>(n, nkv, nq);
  return splat::geometry::bwd_joint_block<i64>(n, nkv, nq, gridDim.y);
}

// cp.async of 4 bytes (src_bytes 0: zero).
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}

// Grouped-query heads: dK and dV of K/V head kvh are the sums over its GROUP query heads' fp32
// accumulators ([batch*heads][KV][2*HD], dK then dV), in head order (the same bits run to run).
// Query-head slot y (of batch*heads): the GROUP slots of a K/V head take its elements in turn, blocks
// x of ceil(KV * HD / (blockDim.x * GROUP)). A packed batch (slots sequences*heads): the keys below
// the sequence's length, written at their tokens' rows.
template <class T, int KV, int HD, int GROUP>
__device__ __forceinline__ void bwd_reduce_kv_slot(const float* acc, T* dk, T* dv, float scale, const int* cu_seqlens, i64 y) {
  const i64 kvh = y / GROUP;
  const i64 x = ((y % GROUP) * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x;
  if (x >= (i64)KV * HD) return;
  const i64 j = x / HD, c = x % HD;
  i64 at = kvh * KV * HD + x;  // the element of dK and dV
  if constexpr (SPLAT_VARLEN) {  // query head kvh * GROUP of the packed batch (not a head group's slot)
    const i64 qh = kvh * GROUP, b = qh / SPLAT_HEADS, h = qh % SPLAT_HEADS, start = cu_seqlens[b];
    if (j >= cu_seqlens[b + 1] - start) return;
    at = ((start + j) * SPLAT_KV_HEADS + h / GROUP) * HD + c;
  }
  float sk = 0.f, sv = 0.f;
#pragma unroll 1
  for (int g = 0; g < GROUP; ++g) {
    const float* a = acc + ((kvh * GROUP + g) * KV + j) * (2 * HD);
    sk += a[c];
    sv += a[HD + c];
  }
  dk[at] = from_f<T>(sk * scale);
  dv[at] = from_f<T>(sv);
}
// grid (ceil(KV * HD / (blockDim.x * GROUP)), Y): slots = -1, block row y reduces slot y (Y =
// batch*heads); else the slots [0, slots) in turn (SPLAT_BWD_SHARED_KV: the last head group's module,
// whose Y is batch*group_heads, reduces every query head's slot).
template <class T, int KV, int HD, int GROUP>
__device__ __forceinline__ void bwd_reduce_kv(const float* acc, T* dk, T* dv, float scale, const int* cu_seqlens, i64 slots = -1) {
  if (slots < 0) return bwd_reduce_kv_slot<T, KV, HD, GROUP>(acc, dk, dv, scale, cu_seqlens, blockIdx.y);
  for (i64 y = blockIdx.y; y < slots; y += gridDim.y) bwd_reduce_kv_slot<T, KV, HD, GROUP>(acc, dk, dv, scale, cu_seqlens, y);
}

// The warp's 16 rows of the tile's two row operands A1 and A2 into shared memory by cp.async (rows of
// width HW, LD elements apart; A2's 64 rows after A1's; zeros for padding rows and columns). Row r of
// the warp is row[r / 8] of lane 4 (r % 8); in the tensors, rows are RSTEP * HD elements apart.
template <class S, class E, int HD, int HW, int LD, int RSTEP>
__device__ __forceinline__ void bwd_stage_rows(S* As, const E* a1, const E* a2, const i64* row) {
  constexpr int EPC = 16 / (int)sizeof(E), CH = HW / EPC;  // 16-byte chunks per row
  const int lane = threadIdx.x & 31, w0 = (threadIdx.x >> 5) * 16;
  for (int x = lane; x < 16 * CH; x += 32) {
    const int r = x / CH, c = x % CH;
    const int src = (r & 7) * 4;
    const i64 i0 = __shfl_sync(0xffffffffu, row[0], src), i1 = __shfl_sync(0xffffffffu, row[1], src);
    const i64 i = r < 8 ? i0 : i1;
    const bool ok = i >= 0 && c * EPC < HD;
    const i64 off = ok ? i * (RSTEP * HD) + c * EPC : 0;
    cp_async16(As + (w0 + r) * LD + c * EPC, a1 + off, ok ? 16 : 0);
    cp_async16(As + (64 + w0 + r) * LD + c * EPC, a2 + off, ok ? 16 : 0);
  }
  cp_async_commit();
  cp_async_wait<0>();
  __syncwarp();
}

// dK/dV: the walked query rows' lse and D of a key tile into a stage's stats (lse: 64, then D: 64),
// one per thread of 2 * BC; the lse in the tensor's row order ([batch*heads][SEQ], a packed batch's
// [tokens][heads]), D in the workspace's ([grid.y][SEQ]).
// idx (fast mode): the walked rows' indices too (-1 past the walk), for the dQ atomics.
// LSE_STEP: rows of lse_g apart (kQStep; 1 for the workspace's copy in log2 units, bwd_delta).
template <int BC, int LSE_STEP = kQStep>
__device__ __forceinline__ void bwd_load_stats(float* st, const float* lse_g, const float* delta_g, const WalkD& w, int u0,
                                               const int* table, int* idx = nullptr) {
  const int r = threadIdx.x & (BC - 1);
  const bool ok = u0 + r < w.count;
  const i64 j = ok ? walk_key(w, u0 + r, table) : 0;
  const float* src = threadIdx.x < BC ? lse_g : delta_g;
  cp_async4(st + threadIdx.x, src + (LSE_STEP == 1 || threadIdx.x >= BC ? j : j * LSE_STEP), ok ? 4 : 0);
  if (idx != nullptr && threadIdx.x < BC) idx[r] = ok ? (int)j : -1;
}

// ---- the fast mode's dQ (E::FAST_DQ: E::dq_step after each step of the dK/dV kernel) ----
// The step's dS^T to shared memory as [walked row][key] (the A operand of dS.K): ds in the S
// accumulators' layout, the warp's 16 keys (rows g, g + 8) x CW walked rows (8n + 2t + (e & 1)).
// S: the 16-bit bits of T, or float (fp32 storage).
template <class T, int CW, int LDD, class S>
__device__ __forceinline__ void bwd_store_dst(S* dst, const float (&ds)[CW / 8][4]) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;
#pragma unroll
  for (int n = 0; n < CW / 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      S& x = dst[(n * 8 + 2 * t4 + (e & 1)) * LDD + w * 16 + g + 8 * (e >> 1)];
      if constexpr (sizeof(S) == 4)
        x = ds[n][e];
      else
        x = from_f<T>(ds[n][e]).x;
    }
}
// N n-tiles of dQ products (the mma accumulator layout: rows g, g + 8 of the warp's 16 walked rows,
// columns 2t, 2t + 1 of each tile's 8) added to dQ's fp32 sums by atomics: tile q at head column
// col0 + 8q when q < nq; rows i0, i1 (-1: none). Unscaled (bwd_dq_store scales).
template <int HD, int N>
__device__ __forceinline__ void bwd_dq_add(float* dq_g, const float (&acc)[N][4], int i0, int i1, int col0, int nq) {
  const int t4 = threadIdx.x & 3;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = h ? i1 : i0;
    if (i < 0) continue;
    float* dst = dq_g + (i64)i * HD;
#pragma unroll
    for (int q = 0; q < N; ++q) {
      const int col = col0 + q * 8 + 2 * t4;
      if (q < nq && col < HD) {  // not past the group's tiles, the width or head_dim
        atomicAdd(dst + col, acc[q][2 * h]);
        atomicAdd(dst + col + 1, acc[q][2 * h + 1]);
      }
    }
  }
}

// One key tile of a backward engine E (BwdMmaEngine, BwdTf32Engine), in steps of E::CW walked rows:
// S = A1.X^T and dP = A2.Y^T (E::product_nt), P recomputed from the log-sum-exp (masked scores 0 by
// selection, not by exp(-inf): a row with no kept key has lse -inf), dS = P * (dP - D), then
// acc2 += P.Y (dK/dV) and acc1 += dS.X (E::product_acc). st: the stage's walked rows' lse and D
// (dK/dV); the tile rows' own are E::lrow and E::drow (dQ).
// rows (E::FAST_DQ, the fast mode's dK/dV kernel): the stage's walked rows' indices; each step then
// adds its dS^T.K to dQ by atomics (E::dq_step).
template <class E, class B, class Keep>
__device__ __forceinline__ void bwd_key_tile(E& e, const B* Xb, const B* Yb, const float* st, bool full, float scale_log2,
                                             Keep keep, const int* rows = nullptr) {
  constexpr int CW = E::CW, BC = E::BC;
  const int t4 = threadIdx.x & 3;
#pragma unroll
  for (int c0 = 0; c0 < BC; c0 += CW) {
    float s[CW / 8][4], dp[CW / 8][4];
    e.product_nt(0, Xb, c0, s);
    e.product_nt(1, Yb, c0, dp);
#pragma unroll
    for (int n = 0; n < CW / 8; ++n)
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4) {
        const int h = e4 >> 1, c = c0 + n * 8 + 2 * t4 + (e4 & 1);
        const float l2 = E::DKV_ ? st[c] * E::kLog2e : e.lrow[h];
        const float dv = E::DKV_ ? st[BC + c] : e.drow[h];
        const float p = (full || keep(h, c)) ? fast_exp2(fmaf(s[n][e4], scale_log2, -l2)) : 0.f;
        s[n][e4] = p;
        dp[n][e4] = p * (dp[n][e4] - dv);
      }
    if constexpr (E::DKV_) E::product_acc(s, Yb, c0, e.acc2);
    E::product_acc(dp, Xb, c0, e.acc1);
    if constexpr (E::FAST_DQ) e.dq_step(dp, c0, rows);
  }
}

// The start of a tile in a backward engine E (BwdMmaEngine, BwdTf32Engine, BwdWgmmaEngine; storage type T): the walked operands' bases (X
// and Y, at the other side's rows), the lse and D bases, the tile's rows of A1 and A2 staged
// (E::stage_rows) and, for dQ, each of the thread's rows' lse (log2 units) and D.
template <class T, int HD, int SEQ, class E>
__device__ __forceinline__ void bwd_begin_rows(E& e, const T* a1, const T* x, const i64* row, const Head& hv) {
  const T* a2 = static_cast<const T*>(e.args->a2);
  const i64 arows = E::DKV_ ? E::k_rows(hv) : E::q_rows(hv), xrows = E::DKV_ ? E::q_rows(hv) : E::k_rows(hv);
  e.xg = x + xrows * HD;
  e.yg = static_cast<const T*>(e.args->y) + xrows * HD;
  e.lse_g = e.args->lse + E::q_rows(hv);
  e.delta_g = e.args->delta + hv.bh * SEQ;
  e.stage_rows(a1 + arows * HD, a2 + arows * HD, row);
  if constexpr (!E::DKV_)
#pragma unroll
    for (int h = 0; h < E::ROWS; ++h) {
      e.lrow[h] = row[h] >= 0 ? e.lse_g[row[h] * kQStep] * E::kLog2e : 0.f;
      e.drow[h] = row[h] >= 0 ? e.delta_g[row[h]] : 0.f;
    }
}

// ================================================================================================
// Engine (bf16 / fp16, mma.sync m16n8k16; head_dim % 8 == 0, <= 256): 64-row tiles as 4 warps x 16
// rows; key tiles of 64 walked rows of X and Y gathered by cp.async into STAGES stages. A thread owns
// rows g + 8h of its warp's 16 (g = lane / 4, h < 2). The row operands A1, A2 are staged in shared
// memory at begin and held as fragments in registers (AREG) or read by ldmatrix per product. The key
// tile is computed in steps of CW walked rows (S and dP of a step in registers next to the
// accumulators).
// ROWS_LEN / COLS_LEN: rows of the tile's operands and of the walked ones (dQ: SEQ, KV; dK/dV: KV, SEQ).
// Column slices (a width over 128): the accumulators hold the output columns [CO, CO + OW), at most
// 128 (the register budget of head_dim 128); S and dP are products over the whole width, so each
// slice is an entry point of its own that recomputes them (geometry::bwd_col_slices).
// ================================================================================================
// AREGS: A1, A2 as register fragments; STEP (CW): walked rows per product step. FAST (dK/dV only): the
// fast mode, which also adds each step's dS.K to dQ by atomics (dq_step, in the first slice only),
// so no dQ kernel runs. CO: the slice's first output column.
template <class T, int HD, int SEQ, int KV, bool DKV, int NSTAGES, bool AREGS, int STEP, bool FAST = false, int CO = 0>
struct BwdMmaEngine {
  static constexpr int NT = 128, BR = 64, BC = 64, ROWS = 2;
  static constexpr int HW = splat::geometry::mma_width(HD), LDS = HW + 8;
  static constexpr int OW = splat::geometry::bwd_slice_width(HW, CO);
  static_assert(HD % 8 == 0 && HW <= 256, "rows of whole 16-byte chunks, head_dim at most 256");
  static_assert(CO % 128 == 0 && CO < HW && OW % 16 == 0, "slices of 128 output columns");
  static_assert(!AREGS || HW <= 128, "register fragments of A1 and A2 at a width of at most 128");
  static_assert(STEP == 32 || STEP == 64, "32 or 64 walked rows per step");
  static constexpr bool AREG = AREGS;
  static constexpr int CW = STEP;
  static constexpr bool FAST_DQ = FAST && DKV && CO == 0;
  // Every slice of a fast-mode module has the first's shared memory (the manifest gives one size).
  static constexpr int STAGES = NSTAGES, SMEM = splat::geometry::bwd_mma_smem(STAGES, HD, DKV, FAST && DKV ? STEP : 0);
  static constexpr int ROWS_LEN = DKV ? KV : SEQ, KV_LEN = DKV ? SEQ : KV;
  static constexpr bool DKV_ = DKV;
  static constexpr int LDD = 72;  // FAST_DQ: dS^T rows (walked rows) of 64 keys + 8
  static constexpr float kLog2e = BwdUnits::kLog2e;
  const BwdArgs* args;
  u16* As;   // A1 rows then A2 rows (64 each)
  u16* Xs;   // stages of X, then of Y
  u16* Ys;
  float* stats;  // dK/dV: per stage, the walked rows' lse (64) and D (64)
  int* idx;      // FAST_DQ: per stage, the walked rows' indices (-1 past the walk)
  u16* dSt;      // FAST_DQ: a step's dS^T as [walked row][key]
  float* dq_g;   // FAST_DQ: this block's head's dQ sums (BwdArgs::dq_acc)
  const T* xg;
  const T* yg;
  const float* lse_g;
  const float* delta_g;
  u32 af[2][AREG ? HW / 16 : 1][4];
  float lrow[ROWS], drow[ROWS];  // dQ: the rows' lse (log2 units) and D
  float acc1[OW / 8][4];
  float acc2[DKV ? OW / 8 : 1][4];

  __device__ __forceinline__ static int slot(int h) { return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * h; }
  __device__ __forceinline__ void bind(const void* extra) { args = static_cast<const BwdArgs*>(extra); }

  // Offsets of the head's rows: query rows (Q, dO, lse) and key rows (K, V); in a packed batch its
  // sequence's, the rows of the tile's operands ASTEP and of the walked ones XSTEP (x HD) apart.
  __device__ __forceinline__ static i64 q_rows(const Head& hv) { return head_q0<SEQ>(hv); }
  __device__ __forceinline__ static i64 k_rows(const Head& hv) { return head_k0<KV>(hv); }
  static constexpr int ASTEP = DKV ? kKvStep : kQStep, XSTEP = DKV ? kQStep : kKvStep;

  // The warp's 16 rows of A1 and A2 into shared memory (bwd_stage_rows), then into registers (AREG).
  __device__ __forceinline__ void stage_rows(const T* a1, const T* a2, const i64* row) {
    bwd_stage_rows<u16, T, HD, HW, LDS, ASTEP>(As, a1, a2, row);
    if constexpr (AREG) {
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int kb = 0; kb < HW / 16; ++kb) a_frag(a, kb, af[a][kb]);
    }
  }
  // Fragment kb (16 columns) of the warp's rows of operand a, from shared memory.
  __device__ __forceinline__ void a_frag(int a, int kb, u32 (&f)[4]) const {
    const int lane = threadIdx.x & 31;
    ldmatrix_x4(f[0], f[1], f[2], f[3], As + (a * BR + (threadIdx.x >> 5) * 16 + (lane & 15)) * LDS + kb * 16 + (lane >> 4) * 8);
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* a1, const T* x, const T*, const i64* row, const Head& hv,
                                        bool first, const float*) {
    As = reinterpret_cast<u16*>(smem);
    Xs = As + 2 * BR * LDS;
    Ys = Xs + STAGES * BC * LDS;
    stats = reinterpret_cast<float*>(Ys + STAGES * BC * LDS);
    if constexpr (FAST_DQ) {
      idx = reinterpret_cast<int*>(stats + STAGES * 2 * BC);
      dSt = reinterpret_cast<u16*>(idx + STAGES * BC);
      dq_g = args->dq_acc + hv.bh * (i64)SEQ * HD;
    }
    bwd_begin_rows<T, HD, SEQ>(*this, a1, x, row, hv);
    load_acc(row, hv, first);
  }
  // The accumulators: zeros (first), else the fp32 sums an earlier pass left in the workspace.
  __device__ __forceinline__ void load_acc(const i64* row, const Head& hv, bool first) {
    const int t4 = threadIdx.x & 3;
    const float* ws = args->acc_ws + (bwd_acc_slot<DKV>(hv.bh) * ROWS_LEN) * (DKV ? 2 * HD : HD);
#pragma unroll
    for (int d = 0; d < OW / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 i = row[e >> 1];
        const int col = CO + d * 8 + 2 * t4 + (e & 1);
        const bool load = !first && i >= 0 && CO + d * 8 < HD;
        acc1[d][e] = load ? ws[i * (DKV ? 2 * HD : HD) + col] : 0.f;
        if constexpr (DKV) acc2[d][e] = load ? ws[i * 2 * HD + HD + col] : 0.f;
      }
  }

  // Walked rows base + u*step, u in [u0, u0 + BC), of X and Y into stage buf (and their lse and D).
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    gather_kv<HD, HW, BC, NT, LDS, LDS, XSTEP>(Xs + buf * BC * LDS, Ys + buf * BC * LDS, xg, yg, w, u0, table);
    if constexpr (DKV) bwd_load_stats<BC>(stats + buf * 2 * BC, lse_g, delta_g, w, u0, table, FAST_DQ ? idx + buf * BC : nullptr);
  }

  // s[CW/8][4] = A(a) . B^T over the CW walked rows from c0 of the stage at Bb.
  __device__ __forceinline__ void product_nt(int a, const u16* Bb, int c0, float (&s)[CW / 8][4]) const {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int n = 0; n < CW / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < HW / 16; ++kb) {
      u32 f[4];
      if constexpr (AREG) {
#pragma unroll
        for (int e = 0; e < 4; ++e) f[e] = af[a][kb][e];
      } else {
        a_frag(a, kb, f);
      }
#pragma unroll
      for (int np = 0; np < CW / 16; ++np) {
        u32 b0, b1, b2, b3;
        ldmatrix_x4(b0, b1, b2, b3, Bb + (c0 + 16 * np + (lane & 7) + ((lane >> 4) << 3)) * LDS + kb * 16 + ((lane >> 3) & 1) * 8);
        mma16816<T>(s[2 * np], f, b0, b1);
        mma16816<T>(s[2 * np + 1], f, b2, b3);
      }
    }
  }
  // acc += P . B over the CW walked rows from c0 of the stage at Bb (P in accumulator layout), B's
  // columns of the slice.
  __device__ __forceinline__ static void product_acc(const float (&p)[CW / 8][4], const u16* Bb, int c0, float (&acc)[OW / 8][4]) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int kb = 0; kb < CW / 16; ++kb) {
      u32 a[4];
      a[0] = pack2<T>(p[2 * kb][0], p[2 * kb][1]);
      a[1] = pack2<T>(p[2 * kb][2], p[2 * kb][3]);
      a[2] = pack2<T>(p[2 * kb + 1][0], p[2 * kb + 1][1]);
      a[3] = pack2<T>(p[2 * kb + 1][2], p[2 * kb + 1][3]);
#pragma unroll
      for (int dp = 0; dp < OW / 16; ++dp) {
        u32 b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, Bb + (c0 + 16 * kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + CO + 16 * dp + (lane >> 4) * 8);
        mma16816<T>(acc[2 * dp], a, b0, b1);
        mma16816<T>(acc[2 * dp + 1], a, b2, b3);
      }
    }
  }

  // One key tile (bwd_key_tile).
  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    bwd_key_tile(*this, Xs + buf * BC * LDS, Ys + buf * BC * LDS, stats + buf * 2 * BC, full, scale_log2, keep,
                 FAST_DQ ? idx + buf * BC : nullptr);
  }

  // FAST_DQ: dQ[walked rows of the step] += dS.K by atomics, dS = (dS^T)^T (ds: the warp's 16 keys x
  // CW walked rows in accumulator layout) and K the tile's 64 key rows (A1 in shared memory; padding
  // rows are zeros). dS^T goes to shared memory as [walked row][key], the A operand's layout; warp w
  // computes walked rows 16 (w % RB) .. + 16 and the head-column pairs of group w / RB. The unscaled
  // sums (bwd_dq_store scales them) in fp32, in no fixed order.
  __device__ __forceinline__ void dq_step(const float (&ds)[CW / 8][4], int c0, const int* rows) {
    constexpr int RB = CW / 16, CG = 4 / RB, NP = HW / 16, NPH = (NP + CG - 1) / CG;
    const int lane = threadIdx.x & 31, g = lane >> 2, w = threadIdx.x >> 5;
    bwd_store_dst<T, CW, LDD>(dSt, ds);
    __syncthreads();
    const int rb = w % RB, cg = w / RB;
    const int i0 = rows[c0 + rb * 16 + g], i1 = rows[c0 + rb * 16 + g + 8];
    // The group's column pairs in chunks of PC (8 or 16 accumulators: fewer registers live beside
    // the dK/dV accumulators; the dS^T fragments are read again per chunk).
    constexpr int PC = NPH < 2 || HW > 64 ? 1 : 2;
#pragma unroll
    for (int q0 = 0; q0 < NPH; q0 += PC) {
      float acc[2 * PC][4];
#pragma unroll
      for (int q = 0; q < 2 * PC; ++q) acc[q][0] = acc[q][1] = acc[q][2] = acc[q][3] = 0.f;
#pragma unroll
      for (int kb = 0; kb < BR / 16; ++kb) {
        u32 a[4];
        ldmatrix_x4(a[0], a[1], a[2], a[3], dSt + (rb * 16 + (lane & 15)) * LDD + kb * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int q = 0; q < PC; ++q) {
          const int dp = cg * NPH + q0 + q;
          if (q0 + q < NPH && dp < NP) {
            u32 b0, b1, b2, b3;
            ldmatrix_x4_trans(b0, b1, b2, b3, As + (16 * kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + 16 * dp + (lane >> 4) * 8);
            mma16816<T>(acc[2 * q], a, b0, b1);
            mma16816<T>(acc[2 * q + 1], a, b2, b3);
          }
        }
      }
      bwd_dq_add<HD, 2 * PC>(dq_g, acc, i0, i1, (cg * NPH + q0) * 16, 2 * (NPH - q0));
    }
    __syncthreads();  // the next step rewrites dS^T
  }

  // A split tile's chunk: its accumulators to its slot (row slot(h) of 64), summed by bwd_combine.
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float*) {
    constexpr int W = DKV ? 2 * HD : HD;
    float* dst = args->split_ws + ((bh * nslots + split_slot) * 64) * W;
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < ROWS; ++h)
#pragma unroll
      for (int d = 0; d < OW / 8 && CO + d * 8 < HD; ++d) {
        const int r = slot(h), col = CO + d * 8 + 2 * t4;
        *reinterpret_cast<float2*>(dst + r * W + col) = make_float2(acc1[d][2 * h], acc1[d][2 * h + 1]);
        if constexpr (DKV) *reinterpret_cast<float2*>(dst + r * W + HD + col) = make_float2(acc2[d][2 * h], acc2[d][2 * h + 1]);
      }
  }

  // The tile's rows: the outputs (dQ, or dK and dV) in the element type on the last pass, else the
  // fp32 accumulators to the workspace (a later pass, or the grouped-query reduction, continues).
  __device__ __forceinline__ void end(const i64* row, const Head& hv, bool last, T*, float*) {
    const int t4 = threadIdx.x & 3;
    constexpr int W = DKV ? 2 * HD : HD;
    float* ws = args->acc_ws + (bwd_acc_slot<DKV>(hv.bh) * ROWS_LEN) * W;
    const bool to_ws = !last || args->acc_out;
    const i64 orows = DKV ? k_rows(hv) : q_rows(hv);
    T* o1 = static_cast<T*>(args->out1) + orows * HD;
    T* o2 = static_cast<T*>(args->out2) + orows * HD;
    const float sc = args->scale;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const i64 i = row[h];
      if (i < 0) continue;
#pragma unroll
      for (int d = 0; d < OW / 8 && CO + d * 8 < HD; ++d) {
        const int col = CO + d * 8 + 2 * t4;
        const float a0 = acc1[d][2 * h], a1 = acc1[d][2 * h + 1];
        if (to_ws) {
          *reinterpret_cast<float2*>(ws + i * W + col) = make_float2(a0, a1);
          if constexpr (DKV) *reinterpret_cast<float2*>(ws + i * W + HD + col) = make_float2(acc2[d][2 * h], acc2[d][2 * h + 1]);
        } else {
          *reinterpret_cast<u32*>(o1 + i * (ASTEP * HD) + col) = pack2<T>(a0 * sc, a1 * sc);
          if constexpr (DKV) *reinterpret_cast<u32*>(o2 + i * (ASTEP * HD) + col) = pack2<T>(acc2[d][2 * h], acc2[d][2 * h + 1]);
        }
      }
    }
  }
};

// A pass's split tiles: each row's sum of its chunks' partials in slot order (the same bits run to
// run), as the tile's end would have written it: the outputs in the element type on the last pass
// (dQ and dK times the scale), else fp32 accumulators to acc_ws. One block per (split tile, grid.y).
// ROWS_LEN: rows of the pass's tiles (dQ: SEQ; dK/dV: KV).
template <class T, int SEQ, int KV, int HD, bool DKV, int PERIOD, int NSLOTS, bool LAST>
__device__ __forceinline__ void bwd_combine(const SplitD* splits, const BwdArgs& a) {
  static_assert(!SPLAT_VARLEN || NSLOTS < 0, "a packed batch's plans have no split tiles");
  constexpr int W = DKV ? 2 * HD : HD, ROWS_LEN = DKV ? KV : SEQ;
  const SplitD sp = splits[blockIdx.x];
  const i64 bh = blockIdx.y;
  const int nrows = sp.m_end - sp.m_begin;
  const float* part = a.split_ws + (bh * NSLOTS) * 64 * W;
  const bool to_ws = !LAST || a.acc_out;
  const i64 orow0 = DKV ? kv_head(q_head(bh)) * KV : q_head(bh) * SEQ;
  for (int x = threadIdx.x; x < nrows * W; x += blockDim.x) {
    const int r = x / W, c = x % W;
    float sum = 0.f;
    for (int sl = sp.slot_begin; sl < sp.slot_begin + sp.slot_count; ++sl) sum += part[((i64)sl * 64 + r) * W + c];
    const i64 i = sp.phase + (i64)PERIOD * (sp.m_begin + r);
    if (to_ws) {
      a.acc_ws[(bwd_acc_slot<DKV>(bh) * ROWS_LEN + i) * W + c] = sum;
    } else if (c < HD) {
      static_cast<T*>(a.out1)[(orow0 + i) * HD + c] = from_f<T>(sum * a.scale);
    } else {
      static_cast<T*>(a.out2)[(orow0 + i) * HD + c - HD] = from_f<T>(sum);
    }
  }
}
