// The backward engine for bf16/fp16 on Hopper (wgmma, sm_90a; head_dim 64): BwdMmaEngine's scheme,
// tile, statistics and outputs (backward.cuh) with the four matrix products of a key tile on wgmma.
// Why: the mma.sync engine issues ldmatrix + mma.sync for every 16 x 8 piece of S, dP, dV and dK
// and runs at 240-255 registers; here each product of a 64 x 64 tile is four m64n64k16 reading the
// walked operands straight from shared memory (as the forward's WgmmaEngine reads K and V).
//  * The tile's row operands A1, A2 (dK/dV: K, V; dQ: Q, dO) are staged once per tile in shared
//    memory, swizzled like the stages, and S, dP read them there (both operands from shared memory);
//    their copies land with the first key tile's stage (stage_rows).
//    Held as register fragments instead (32 registers a thread across the key tiles), ptxas (CUDA
//    13.0) gave A2's fragment registers to the packed dS after their last wgmma of a key tile,
//    although the next key tile reads them again: in every kernel with masks the dP of a tile's
//    second and later key tiles came from the previous dS (H100; SASS read with cuobjdump).
//  * Stages of the walked operands X, Y (dK/dV: Q, dO; dQ: K, V): 64 rows x 128 bytes, the 128-byte
//    swizzle the descriptors name (16-byte chunk c of row r at chunk c ^ (r % 8)), 1024-aligned.
//  * S = A1.X^T and dP = A2.Y^T: B = X, Y K-major ([walked row][d]). P and dS (= P * (dP - D)) in
//    the accumulators' registers (the mma.sync C layout per warp), packed as A operands of dV += P.Y
//    and dK += dS.X (dQ: dQ += dS.X) with B = Y, X N-major (transposed by the instruction).
//  * Four wgmma groups a key tile, so that the tensor cores work while the registers are: S, dP;
//    P once S has landed (dP running); dV issued; dS once dP has landed (dV running); dK. The last
//    is waited for before compute returns, so the driver may refill the stage after its next
//    barrier (EARLY_WAIT, no REFILL_BARRIER). Leaving it running into the next key tile (the next
//    S and dP issued first) needs 190-220 registers in the dK/dV kernel: at 168 (3 blocks an SM)
//    ptxas serialises every wgmma (C7512).
//  * dK/dV: a thread's walked rows are the accumulator columns 8 n + 2 t4 (+ 1), so their lse and D
//    are read from the stage as float2 pairs (probs, grads): with scalar loads, 12% of the warps'
//    stall samples were arithmetic waiting for them, and the pairs took 1.7-4.7% off the windows,
//    dilation and Longformer (H100, docs/performance.md).
//  * The masks branch per thread; __syncwarp() reconverges each warp before a wgmma (.aligned).
//  * cp.async writes the stages through the generic proxy and wgmma reads them through the async
//    proxy: every thread fences (landed()) after its copies completed, before the stage's barrier.
//  * FAST (the fast mode's dK/dV kernel): after dK's group is issued, dS^T goes to a shared tile as
//    [key][walked row] (the stages' swizzled layout), and dQ[walked rows] = dS.K is one more wgmma
//    group with both operands from shared memory read MN-major (dS^T's tile; K, the tile's A1), its
//    64 x 64 fp32 products added to dQ's sums (in no fixed order; unscaled, bwd_dq_store scales
//    them) by one 256-byte bulk reduction (cp.reduce.async.bulk .add.f32) per walked row from the
//    key tile's stage, free once its products are done (dq_add). 5 products a key tile instead of
//    the deterministic mode's 7 over two passes. The bulk reductions took 2-11% off the fast mode
//    against red.global.add.v2.f32 from the registers (H100), and v4 reductions (lanes swapping
//    halves) 0.5-2.6%.
// Codegen selects this engine only when compiling for sm_90a (wgmma is an arch-specific feature).
#pragma once
#include "splat/backward.cuh"
#include "splat/engine_wgmma.cuh"

// The workspace's lse in log2 units (bwd_delta): its words per bh after D's, 0 when the module has none.
#ifndef SPLAT_BWD_LSE2_AT
#define SPLAT_BWD_LSE2_AT 0
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// Derived from BwdMmaEngine for its arguments, statistics, accumulators and ends (its own stages and
// row operands unused).
template <class T, int HD, int SEQ, int KV, bool DKV, int NSTAGES, bool FAST = false>
struct BwdWgmmaEngine : BwdMmaEngine<T, HD, SEQ, KV, DKV, NSTAGES, false, 64, FAST> {
  using Base = BwdMmaEngine<T, HD, SEQ, KV, DKV, NSTAGES, false, 64, FAST>;
  static_assert(HD == 64, "the wgmma backward engine's stages hold one 64-column block");
  static constexpr int BC = 64, TILE = splat::geometry::wgmma_tile_bytes(HD);
  static constexpr bool FAST_DQ = Base::FAST_DQ;
  static constexpr int SMEM = splat::geometry::bwd_wgmma_smem(NSTAGES, HD, DKV, FAST);
  static constexpr bool REFILL_BARRIER = false;
  static constexpr bool EARLY_WAIT = true;
  static constexpr bool LSE2 = SPLAT_BWD_LSE2_AT > 0;  // dK/dV: the walked rows' lse staged in log2 units
  u32 xbase;       // shared address of X stage 0 (1024-aligned); Y stage s at xbase + (NSTAGES + s) * TILE
  u32 abase;       // the tile's A1 rows (64 x 128 bytes, swizzled), then A2's
  u32 sdst;        // this thread's byte offset in a stage: row t / 8, 16-byte chunk t % 8, swizzled
  u32 dsbase;      // FAST_DQ: dS^T of the key tile, [key][walked row], swizzled like a stage
  float* wstats;   // dK/dV: per stage, the walked rows' lse (64) and D (64); FAST_DQ: then their indices

  // Shared memory: the stages (aligned up from the dynamic base), the row operands, (FAST_DQ: dS^T's
  // tile), the statistics (FAST_DQ: then the walked rows' indices).
  __device__ __forceinline__ void begin(unsigned char* smem, const T* a1, const T* x, const T*, const i64* row, const Head& hv,
                                        bool first, const float*) {
    const u32 raw = smem_addr(smem);
    xbase = (raw + 1023u) & ~1023u;
    abase = xbase + 2 * NSTAGES * TILE;
    dsbase = abase + 2 * TILE;
    wstats = reinterpret_cast<float*>(smem + (dsbase - raw) + (FAST_DQ ? TILE : 0));
    if constexpr (FAST_DQ) {
      this->idx = reinterpret_cast<int*>(wstats + NSTAGES * 2 * BC);
      this->dq_g = this->args->dq_acc + hv.bh * (i64)SEQ * HD;
    }
    const u32 c = threadIdx.x & 7, r0 = threadIdx.x >> 3;
    sdst = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // (r0 + 16 k) % 8 == r0 % 8
    bwd_begin_rows<T, HD, SEQ>(*this, a1, x, row, hv);  // stage_rows (below), the walked operands' bases
    if constexpr (DKV && LSE2) this->lse_g = this->args->delta + (i64)gridDim.y * SPLAT_BWD_LSE2_AT + hv.bh * SEQ;
    this->load_acc(row, hv, first);
  }

  // The warp's 16 rows of A1 and A2 (rows i = row[r / 8] of lane 4 (r % 8), ASTEP * HD elements
  // apart; zeros for padding rows) into the swizzled row tiles, as a commit group of their own that
  // is not waited for here: the driver issues the first stages' copies behind it, and its wait for
  // the first key tile (cp_async_wait<LA - 1>, then landed() and the barrier) covers this group too,
  // so the rows' and the first stage's latencies overlap instead of adding up.
  __device__ __forceinline__ void stage_rows(const T* a1, const T* a2, const i64* row) {
    const int lane = threadIdx.x & 31, w0 = (threadIdx.x >> 5) * 16;
#pragma unroll
    for (int x = lane; x < 16 * 8; x += 32) {
      const int r = x >> 3, c = x & 7, src = (r & 7) * 4;
      const i64 i0 = __shfl_sync(0xffffffffu, row[0], src), i1 = __shfl_sync(0xffffffffu, row[1], src);
      const i64 i = r < 8 ? i0 : i1;
      const i64 off = i >= 0 ? i * (Base::ASTEP * HD) + c * 8 : 0;
      const u32 rr = (u32)(w0 + r), d = rr * 128 + (((u32)c ^ (rr & 7)) << 4);
      cp_async16_s(abase + d, a1 + off, i >= 0 ? 16 : 0);
      cp_async16_s(abase + TILE + d, a2 + off, i >= 0 ? 16 : 0);
    }
    cp_async_commit();
  }

  // Walked rows base + u*step (or the table's), u in [u0, u0 + 64), of X and Y into stage buf:
  // thread t copies chunk t % 8 of rows t / 8 + 16 k; zeros past the walk. dK/dV: their lse and D.
  // An affine walk (key base + u * step): the thread's rows are 16 * step keys apart, so one 64-bit
  // offset and a stride serve its four rows (per row a 64-bit multiply, shifts and selects cost
  // about 110 instructions a key tile); rows past the walk copy nothing (src-size 0, the pointer not
  // read).
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    const int r0 = (int)(threadIdx.x >> 3), c = (int)(threadIdx.x & 7);
    const u32 xd = xbase + buf * TILE + sdst, yd = xd + NSTAGES * TILE;
    constexpr i64 ROW = (i64)Base::XSTEP * HD;  // elements from one key's row to the next's
    if (table == nullptr || w.step != 0) {
      const i64 off = ((i64)w.base + (i64)(u0 + r0) * w.step) * ROW + c * 8;
      // Byte addresses, opaque to the compiler, so that it adds the stride instead of re-deriving
      // each row's address from its key.
      u64 x = reinterpret_cast<u64>(this->xg + off), y = reinterpret_cast<u64>(this->yg + off);
      u64 stride = (u64)((i64)(16 * w.step) * ROW * (i64)sizeof(T));
      asm volatile("" : "+l"(x), "+l"(y), "+l"(stride));
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int n = u0 + r0 + 16 * k < w.count ? 16 : 0;
        cp_async16_s(xd + k * 16 * 128, reinterpret_cast<const void*>(x), n);
        cp_async16_s(yd + k * 16 * 128, reinterpret_cast<const void*>(y), n);
        x += stride;
        y += stride;
      }
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int u = u0 + r0 + 16 * k;
        const bool ok = u < w.count;
        const i64 off = ok ? walk_key(w, u, table) * ROW + c * 8 : 0;
        cp_async16_s(xd + k * 16 * 128, this->xg + off, ok ? 16 : 0);
        cp_async16_s(yd + k * 16 * 128, this->yg + off, ok ? 16 : 0);
      }
    }
    if constexpr (DKV)
      bwd_load_stats<BC, LSE2 ? 1 : kQStep>(wstats + buf * 2 * BC, this->lse_g, this->delta_g, w, u0, table,
                                            FAST_DQ ? this->idx + buf * BC : nullptr);
  }

  // The ends of BwdMmaEngine, after the row operands' copies (stage_rows) completed: a tile with no
  // key tile never waited for them.
  __device__ __forceinline__ void end(const i64* row, const Head& hv, bool last, T* o, float* ws) {
    cp_async_wait<0>();
    if constexpr (FAST_DQ) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    Base::end(row, hv, last, o, ws);
  }
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* ws) {
    cp_async_wait<0>();
    if constexpr (FAST_DQ) asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
    Base::end_partial(bh, nslots, split_slot, ws);
  }

  // This thread's copies have completed: publish them to the async proxy (wgmma). FAST_DQ: and its
  // bulk reductions of the previous key tile (dq_add) have read their rows of that tile's stage,
  // which the driver refills after its next barrier.
  __device__ __forceinline__ void landed() {
    fence_proxy_async();
    if constexpr (FAST_DQ) asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
  }

  // P of the tile from S in place: recomputed from the log-sum-exp (masked scores 0 by selection), as
  // in bwd_key_tile. dK/dV: a thread's walked rows (columns) come in adjacent pairs 8 n + 2 t4 (+ 1),
  // so their statistics are read as float2 (8 shared loads a tile for lse, 8 for D, instead of 16).
  template <class Keep>
  __device__ __forceinline__ void probs(float (&s)[8][4], const float* st, bool full, float scale_log2, Keep keep) const {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      float2 l2 = make_float2(0.f, 0.f);
      if constexpr (DKV) {
        l2 = *reinterpret_cast<const float2*>(st + n * 8 + 2 * t4);
        if constexpr (!LSE2) {
          l2.x *= Base::kLog2e;
          l2.y *= Base::kLog2e;
        }
      }
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4) {
        const int h = e4 >> 1, c = n * 8 + 2 * t4 + (e4 & 1);
        const float l = DKV ? ((e4 & 1) ? l2.y : l2.x) : this->lrow[h];
        s[n][e4] = (full || keep(h, c)) ? fast_exp2(fmaf(s[n][e4], scale_log2, -l)) : 0.f;
      }
    }
  }
  // dS = P * (dP - D) in dp's registers.
  __device__ __forceinline__ void grads(const float (&p)[8][4], float (&dp)[8][4], const float* st) const {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      float2 d = make_float2(0.f, 0.f);
      if constexpr (DKV) d = *reinterpret_cast<const float2*>(st + BC + n * 8 + 2 * t4);
#pragma unroll
      for (int e4 = 0; e4 < 4; ++e4) {
        const float dd = DKV ? ((e4 & 1) ? d.y : d.x) : this->drow[e4 >> 1];
        dp[n][e4] = p[n][e4] * (dp[n][e4] - dd);
      }
    }
  }

  // FAST_DQ: dS^T (da, packed A fragments of dK's product: keys 16w + g (+ 8), walked rows 16 kb +
  // 2 t4 (+ 8)) into its tile, then q = dS.K issued as a wgmma group: A = the tile read MN-major
  // (walked rows contiguous), B = K (the tile's A1, [key][d]) read MN-major too; key step kb is 16
  // rows of 128 bytes on in both. The barrier publishes every warp's part of dS^T.
  __device__ __forceinline__ void dq_issue(const u32 (&da)[4][4], u64 d1, float (&q)[8][4]) {
    const u32 lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const u32 r = 16 * w + g + 8 * (e & 1), c = 16 * kb + 8 * (e >> 1) + 2 * t4;
        const u32 at = dsbase + r * 128 + ((((c >> 3) ^ (r & 7)) << 4) | ((c & 7) * 2));
        asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(da[kb][e]) : "memory");
      }
    fence_proxy_async();
    __syncthreads();
    const u64 ds = wg_desc(dsbase);
    wg_fence();
    wg_mma_ss<T, false, 0, 8, true>(q, ds, d1);
#pragma unroll
    for (int kb = 1; kb < 4; ++kb) wg_mma_ss<T, true, 0, 8, true>(q, ds + 128 * kb, d1 + 128 * kb);
    wg_commit();
  }
  // FAST_DQ: q (walked rows 16 w + g (+ 8) of the stage, head columns 8 n + 2 t4 (+ 1)) added to
  // dQ's sums at the walked rows' indices (-1: past the walk) by bulk reductions: once every warp's
  // products of the key tile are complete (the barrier), its stage is free, and q goes there as fp32
  // rows of 256 bytes (rows 0..31 in X's 8 KB, 32..63 in Y's); lane r of each warp then adds its
  // row 16 w + r with one cp.reduce.async.bulk (256 bytes), which landed() waits for before the
  // stage is refilled.
  __device__ __forceinline__ void dq_add(const float (&q)[8][4], int buf) const {
    const u32 lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3, w = threadIdx.x >> 5;
    const u32 xs = xbase + buf * TILE, half = w < 2 ? xs : xs + NSTAGES * TILE;
    const u32 rows = half + (w & 1) * 16 * 256;  // the warp's 16 rows
    __syncthreads();
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int n = 0; n < 8; ++n)
        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(rows + (g + 8 * h) * 256 + (8 * n + 2 * t4) * 4), "f"(q[n][2 * h]),
                     "f"(q[n][2 * h + 1])
                     : "memory");
    fence_proxy_async();
    __syncwarp();
    if (lane < 16) {
      const int i = this->idx[buf * BC + 16 * w + lane];
      if (i >= 0)
        asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], 256;\n" ::"l"(this->dq_g + (i64)i * HD),
                     "r"(rows + lane * 256)
                     : "memory");
      asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    }
  }

  // One key tile, its products in four wgmma groups so that the tensor cores work while the
  // registers are: S and dP; P from S (dP's group still running); dV += P.Y issued; dS from dP
  // (dV's group running); dK += dS.X (dQ: dQ += dS.X), and in the fast mode dQ = dS.K (dq_issue);
  // waited for before returning (the fast mode then adds dQ's products by atomics).
  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    const u32 xs = xbase + buf * TILE;
    const u64 dx = wg_desc(xs), dy = wg_desc(xs + NSTAGES * TILE);
    const u64 d1 = wg_desc(abase), d2 = wg_desc(abase + TILE);
    const float* st = wstats + buf * 2 * BC;
    float s[8][4], dp[8][4];  // S and dP, then P and dS
    u32 pa[4][4], da[4][4];   // P and dS packed as A operands
    wg_fence();
    wg_mma_ss<T, false>(s, d1, dx);
#pragma unroll
    for (int kb = 1; kb < 4; ++kb) wg_mma_ss<T, true>(s, d1 + 2 * kb, dx + 2 * kb);
    wg_commit();
    wg_mma_ss<T, false>(dp, d2, dy);
#pragma unroll
    for (int kb = 1; kb < 4; ++kb) wg_mma_ss<T, true>(dp, d2 + 2 * kb, dy + 2 * kb);
    wg_commit();
    wg_wait<1>();  // S
    wg_hold(s);
    probs(s, st, full, scale_log2, keep);
    __syncwarp();  // the masks branch per thread: reconverged before the next wgmma instruction
    if constexpr (DKV) {
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) wg_pack_a<T>(s, kb, pa[kb]);
      wg_hold(this->acc2);
      wg_fence();
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) wg_mma<T, 1, true>(this->acc2, pa[kb], dy + 128 * kb);  // k-step kb: walked rows 16 kb ..
      wg_commit();
      wg_wait<1>();  // dP (dV's group may run on)
    } else {
      wg_wait<0>();  // dP
    }
    wg_hold(dp);
    grads(s, dp, st);
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) wg_pack_a<T>(dp, kb, da[kb]);
    wg_hold(this->acc1);
    wg_fence();
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) wg_mma<T, 1, true>(this->acc1, da[kb], dx + 128 * kb);
    wg_commit();
    float q[FAST_DQ ? 8 : 1][4];
    if constexpr (FAST_DQ) dq_issue(da, d1, q);
    wg_wait<0>();
    wg_hold(this->acc1);
    if constexpr (DKV) wg_hold(this->acc2);
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[kb][e]), "+r"(da[kb][e]));
    if constexpr (FAST_DQ) {
      wg_hold(q);
      dq_add(q, buf);
    }
  }
};
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
