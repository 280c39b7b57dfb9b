// Tensor-core engine for bf16/fp16 on Hopper (wgmma, sm_90a).
#pragma once
#include "splat/engine_mma.cuh"

// ================================================================================================
// Hopper tensor-core engine for bf16/fp16: the MmaEngine's 64-row tile (4 warps x 16 rows, one
// warpgroup) with both contractions on wgmma (sm_90a only: wgmma is an arch-specific feature, so
// codegen selects this engine only when compiling for sm_90a, and the text below is compiled only
// there). Why: the mma.sync kernel is bound by instruction issue (ldmatrix + 64 mma.sync per warp
// and key tile, IPC ~1.9); here each contraction of a 64x64 tile is four wgmma.m64n64k16 reading
// K and V straight from shared memory, so the warps issue little more than the softmax.
//  * K and V stages are 64 keys x 128 bytes per 64 head columns (head_dim 64: one such block,
//    128: two, 8 KB apart), stored with the 128-byte swizzle (16-byte chunk c of key r at chunk
//    c ^ (r % 8)) that the descriptors name, 1024-byte aligned.
//  * S = Q.K^T: A = Q fragments in registers (the mma.sync A layout is the wgmma one), B = K, which
//    is K-major ([key][d]); the k-step kb starts 32 bytes further into the swizzled rows (and in
//    the next column block every fourth step).
//  * O += P.V: A = P packed from the S accumulators (same register layout as mma.sync), B = V
//    ([key][d]: N-major, transposed by the instruction); the k-step kb starts 16 keys (2048 bytes)
//    further. At head_dim 128 each k-step is two m64n64k16, one per column block of V and O (one
//    m64n128k16 over both blocks, the descriptor's leading byte offset 8 KB, was as correct and
//    0-2% slower on the H200).
//  * Accumulators (S and O) have the mma.sync m16n8 C layout per warp, so MmaEngine's online
//    softmax state (OnlineSoftmax), exact step, begin and end are reused as they are.
//  * cp.async writes through the generic proxy and wgmma reads through the async proxy: every
//    thread fences (landed()) after its copies completed and before the barrier that publishes
//    the stage.
// ================================================================================================
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
typedef unsigned long long u64;
// Shared-memory matrix descriptor: start address, leading and stride byte offsets both 1024 (the
// distance between 8-row groups; the other one is unused with 64-element rows), 128-byte swizzle.
__device__ __forceinline__ u64 wg_desc(u32 addr) {
  return (u64)((addr & 0x3ffff) >> 4) | ((u64)(1024 >> 4) << 16) | ((u64)(1024 >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// This thread's shared-memory writes (generic proxy) made visible to the async proxy (wgmma, bulk copies).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// Waits until the mbarrier at shared address bar has completed the phase of this parity (a stage's
// use: its parity flips once per use).
__device__ __forceinline__ void mbarrier_wait_parity(u32 bar, u32 parity) {
  asm volatile("{\n.reg .pred p;\nLAB_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra LAB_WAIT;\n}\n" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Every group but the last N committed ones has completed.
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving reads or writes of accumulator registers across the asynchronous
// wgmma (the asm statements are ordered; these make every register an operand of one).
template <int ND>
__device__ __forceinline__ void wg_hold(float (&d)[ND][4]) {
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[n][e]));
}
__device__ __forceinline__ void cp_async16_s(u32 dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
template <class T> struct WgBf16 { static constexpr bool value = false; };
template <> struct WgBf16<bf16_t> { static constexpr bool value = true; };
// The 32 accumulators of a 64 x 64 block of D: columns [8 N0, 8 N0 + 64) of this thread's
// mma.sync-layout rows (d[N0 .. N0 + 7]; head_dim 128 holds O as two such blocks).
#define SPLAT_WG_D(OUT)                                                                                                            \
  OUT(d[N0][0]), OUT(d[N0][1]), OUT(d[N0][2]), OUT(d[N0][3]), OUT(d[N0 + 1][0]), OUT(d[N0 + 1][1]), OUT(d[N0 + 1][2]),             \
      OUT(d[N0 + 1][3]), OUT(d[N0 + 2][0]), OUT(d[N0 + 2][1]), OUT(d[N0 + 2][2]), OUT(d[N0 + 2][3]), OUT(d[N0 + 3][0]),            \
      OUT(d[N0 + 3][1]), OUT(d[N0 + 3][2]), OUT(d[N0 + 3][3]), OUT(d[N0 + 4][0]), OUT(d[N0 + 4][1]), OUT(d[N0 + 4][2]),            \
      OUT(d[N0 + 4][3]), OUT(d[N0 + 5][0]), OUT(d[N0 + 5][1]), OUT(d[N0 + 5][2]), OUT(d[N0 + 5][3]), OUT(d[N0 + 6][0]),            \
      OUT(d[N0 + 6][1]), OUT(d[N0 + 6][2]), OUT(d[N0 + 6][3]), OUT(d[N0 + 7][0]), OUT(d[N0 + 7][1]), OUT(d[N0 + 7][2]),            \
      OUT(d[N0 + 7][3])
// D (+)= A.B, m64n64k16, A from registers, B from shared memory (TB: 1 = N-major), fp32 D.
#define SPLAT_WG_RS(TY, TB, OUT, ACC)                                                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"                                                                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                                       \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                         \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                               \
               "{%32, %33, %34, %35}, %36, p, 1, 1, " #TB ";\n}\n"                                                               \
               : SPLAT_WG_D(OUT)                                                                                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), ACC)
// ACC: D += A.B (else D = A.B, D's previous values not read); N0: D's first column block (above).
template <class T, int TB, bool ACC, int N0 = 0, int ND>
__device__ __forceinline__ void wg_mma(float (&d)[ND][4], const u32 (&a)[4], u64 desc) {
  static_assert(N0 + 8 <= ND, "a 64-column block of D");
  if constexpr (WgBf16<T>::value) {
    if constexpr (TB == 0) {
      if constexpr (ACC) SPLAT_WG_RS("bf16", 0, "+f", "n"(1)); else SPLAT_WG_RS("bf16", 0, "=f", "n"(0));
    } else {
      if constexpr (ACC) SPLAT_WG_RS("bf16", 1, "+f", "n"(1)); else SPLAT_WG_RS("bf16", 1, "=f", "n"(0));
    }
  } else {
    if constexpr (TB == 0) {
      if constexpr (ACC) SPLAT_WG_RS("f16", 0, "+f", "n"(1)); else SPLAT_WG_RS("f16", 0, "=f", "n"(0));
    } else {
      if constexpr (ACC) SPLAT_WG_RS("f16", 1, "+f", "n"(1)); else SPLAT_WG_RS("f16", 1, "=f", "n"(0));
    }
  }
}
#undef SPLAT_WG_RS
// D (+)= A.B, m64n64k16, A and B from shared memory, fp32 D. TR 0: both K-major; 1: both MN-major
// (A stored [k][m], B [k][n]; transposed by the instruction).
#define SPLAT_WG_SS(TY, TR, OUT, ACC)                                                                                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"                                                                      \
               "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                                                       \
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                         \
               "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                               \
               "%32, %33, p, 1, 1, " #TR ", " #TR ";\n}\n"                                                                       \
               : SPLAT_WG_D(OUT)                                                                                                 \
               : "l"(da), "l"(db), ACC)
template <class T, bool ACC, int N0 = 0, int ND, bool TR = false>
__device__ __forceinline__ void wg_mma_ss(float (&d)[ND][4], u64 da, u64 db) {
  static_assert(N0 + 8 <= ND, "a 64-column block of D");
  if constexpr (WgBf16<T>::value) {
    if constexpr (TR) {
      if constexpr (ACC) SPLAT_WG_SS("bf16", 1, "+f", "n"(1)); else SPLAT_WG_SS("bf16", 1, "=f", "n"(0));
    } else {
      if constexpr (ACC) SPLAT_WG_SS("bf16", 0, "+f", "n"(1)); else SPLAT_WG_SS("bf16", 0, "=f", "n"(0));
    }
  } else {
    if constexpr (TR) {
      if constexpr (ACC) SPLAT_WG_SS("f16", 1, "+f", "n"(1)); else SPLAT_WG_SS("f16", 1, "=f", "n"(0));
    } else {
      if constexpr (ACC) SPLAT_WG_SS("f16", 0, "+f", "n"(1)); else SPLAT_WG_SS("f16", 0, "=f", "n"(0));
    }
  }
}
#undef SPLAT_WG_SS
#undef SPLAT_WG_D
// k-step kb of a 64 x 64 block of accumulators (the mma.sync C layout per warp) as the A operand of
// a wgmma over its 64 columns: columns 16 kb .. 16 kb + 15 in the element type, the mma.sync A
// layout, which is wgmma's.
template <class T>
__device__ __forceinline__ void wg_pack_a(const float (&s)[8][4], int kb, u32 (&a)[4]) {
  a[0] = pack2<T>(s[2 * kb][0], s[2 * kb][1]);
  a[1] = pack2<T>(s[2 * kb][2], s[2 * kb][3]);
  a[2] = pack2<T>(s[2 * kb + 1][0], s[2 * kb + 1][1]);
  a[3] = pack2<T>(s[2 * kb + 1][2], s[2 * kb + 1][3]);
}

// One warpgroup (128 threads, a 64-row tile, as split-KV state slots assume), 64-key softmax steps.
// compute() (table passes) waits for a tile's P.V before it returns; the band and lattice kernels
// defer it (s_wait, s_finish): it runs on through the next tile's load and S = Q.K^T.
// CHK: no row max on the common path. The exponentials are taken against the rows' current
// references at once and only their sums checked: a warp whose partial row sums (16 scores a
// thread) all stay <= 2^8 has every p <= 2^8, and keeps its references (O and l share them, so
// O / l is unchanged; no O rescale); otherwise (a row max rose, p overflowed, NaN) and for rows
// with no reference yet, the warp takes the exact step (MmaEngine::exact_step: references moved to
// the row maxima), after recomputing its 16 rows of S with mma.sync from the K stage where the
// exponentials overwrote them. Saves the max tree, its shuffles and their latency before the
// exponentials (~45 of ~300 instructions per key tile). CHK = 2 fails every check (tests the
// recompute on the GPU; CodegenTestHooks).
// No block barrier before a stage is refilled (REFILL_BARRIER): a warp past its wait for a tile's
// P.V has seen that wgmma complete, which needed all four warps to issue it, and their reads of the
// stage (S's wgmma, the rare recompute's ldmatrix) come before that. The driver waits for the
// computed tile's copies (and fences) before issuing the next load (EARLY_WAIT).
// QS: Q in shared memory (swizzled like K, after the stages) and S = Q.K^T with both operands
// from shared memory: frees Q's 16 fragment registers per thread.
// TMA: K/V stages loaded by the tensor memory accelerator (one thread issues a key tile's two
// copies; they complete on the stage's mbarrier, which every thread waits for) instead of 16 cp.async
// per thread and key tile, a proxy fence and a block barrier. The copies go through tensor maps the
// host builds (GeneratedModule::tensor_maps: K and V as [batch*kv_heads*kv_len, head_dim] rows for unit-step walks, as
// [batch*kv_heads*kv_len / 2][2][head_dim] for stride-2 walks), with the 128-byte swizzle the wgmma
// descriptors name. Every walk of the pass must have step 1 or 2 (codegen). A partial key tile
// loads whole 64-key boxes: keys past the walk are real keys of the tensor (zeros past its end),
// masked like every key outside the rows' runs.
template <class T, int HD, int SEQ, int KV, int NSTAGES, int CHK = 1, bool QS = false, bool TMA = false>
struct WgmmaEngine : MmaEngine<T, HD, SEQ, KV, 1, NSTAGES, 64> {
  static_assert(CHK == 1 || CHK == 2, "checked row sums (2: every check fails)");
  static constexpr int NT = 128, BR = 64;
  static constexpr bool REFILL_BARRIER = false;
  static constexpr bool EARLY_WAIT = true;
  static constexpr bool USES_TMA = TMA;
  // A stage holds HB column blocks of 64 keys x 64 head columns (128-byte rows, the swizzle's
  // width): head column 64 b + x of key r at block b, row r, element x.
  static_assert(HD == 64 || HD == 128, "the wgmma engine's stages hold 64-column blocks");
  using Base = MmaEngine<T, HD, SEQ, KV, 1, NSTAGES, 64>;
  static constexpr int HB = HD / 64, BLK = 64 * 128;               // column blocks, bytes per block
  static constexpr int TILE = splat::geometry::wgmma_tile_bytes(HD);       // one K or V stage, bytes
  static constexpr int SMEM = splat::geometry::wgmma_smem(NSTAGES, QS, HD);  // + Q (QS), alignment slack
  static constexpr int RS = NT / 8;                                // keys per copy round
  u32 kbase;  // shared address of K stage 0 (1024-aligned); V stage s at kbase + (NSTAGES + s) * TILE
  u32 sdst;   // this thread's byte offset in a stage: key row t / 8, 16-byte chunk t % 8, swizzled
  u32 pa[4][4];  // P of the tile, packed (A operand of its P.V)
  const char* tmap;  // TMA: tensor maps K, V (step 1), K, V (step 2), 128 bytes each (varlen: K, V)
  int keyoff;        // TMA: first key row of this head's K/V in the maps (kv_head(bh) * kv_len; varlen: its first token)
  int kvh;           // TMA, varlen: the K/V head (the maps' middle coordinate)

  // TMA: stage i's mbarrier (one arrival per use: the issuing thread's, plus the copies' bytes).
  __device__ __forceinline__ static u32 bar(int i) {
    __shared__ __align__(8) u64 bars[NSTAGES];
    return smem_addr(&bars[i]);
  }
  // A packed batch (band_pass_varlen): maps 0 and 1 view K and V as [tokens][kv_heads][head_dim]
  // (emit::tensor_maps), key u of the sequence at token hv.k0 / kv_heads + u, head hv.k0 % kv_heads.
  __device__ __forceinline__ void tma_setup(const void* maps, const Head& hv) {
    tmap = static_cast<const char*>(maps);
    if constexpr (SPLAT_VARLEN) {
      keyoff = (int)(hv.k0 / kKvStep);
      kvh = (int)(hv.k0 % kKvStep);
    } else {
      keyoff = (int)head_k0<KV>(hv);
    }
    if (threadIdx.x == 0) {
#pragma unroll
      for (int i = 0; i < NSTAGES; ++i) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar(i)) : "memory");
      // The initialised barriers are visible to the async proxy (the copies' complete_tx).
      asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#pragma unroll
      for (int j = 0; j < (SPLAT_VARLEN ? 2 : 4); ++j) asm volatile("prefetch.tensormap [%0];\n" ::"l"(tmap + 128 * j) : "memory");
    }
    // No barrier here: the driver's start-up barrier (after the first copies) publishes them.
  }
  // TMA: waits until stage buf holds its key tile (the barrier's phase parity flips once per use);
  // before the first tile, Q's cp.async copies (QS) are published as the cp.async stages are.
  __device__ __forceinline__ void wait_stage(int buf, u32 parity, bool first) {
    if (QS && first) {
      cp_async_wait<0>();
      landed();
      __syncthreads();
    }
    mbarrier_wait_parity(bar(buf), parity);
  }
  __device__ __forceinline__ void tma_load(int buf, const WalkD& w, int u0) {
    if (threadIdx.x != 0) return;
    const u32 b = bar(buf), kd = kbase + buf * TILE, vd = kd + NSTAGES * TILE;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "n"(2 * TILE) : "memory");
    const int key = keyoff + w.base + u0 * w.step;
#ifdef SPLAT_GLAT_C
    if (w.step == 0) {  // the plan's global keys, blocks of C rows every P (maps 4 and 5: 64 / C blocks per box)
      const int blk = keyoff / SPLAT_GLAT_P + SPLAT_GLAT_B0 + (w.base - SPLAT_GLAT_TAB + u0) / SPLAT_GLAT_C;
#pragma unroll
      for (int j = 0; j < 2 * HB; ++j)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     ::"r"((j & 1 ? vd : kd) + (j >> 1) * BLK), "l"(tmap + 512 + 128 * (j & 1)), "r"(64 * (j >> 1)),
                       "r"(SPLAT_GLAT_T0), "r"(blk), "r"(b) : "memory");
      return;
    }
#endif
    // One box of 64 keys x 64 head columns per column block (the maps' box; 128-byte swizzle).
    if (SPLAT_VARLEN) {  // unit steps over the packed tokens of K/V head kvh
#pragma unroll
      for (int j = 0; j < 2 * HB; ++j)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     ::"r"((j & 1 ? vd : kd) + (j >> 1) * BLK), "l"(tmap + 128 * (j & 1)), "r"(64 * (j >> 1)), "r"(kvh), "r"(key),
                       "r"(b) : "memory");
    } else if (w.step == 1) {
#pragma unroll
      for (int j = 0; j < 2 * HB; ++j)
        asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
                     ::"r"((j & 1 ? vd : kd) + (j >> 1) * BLK), "l"(tmap + 128 * (j & 1)), "r"(64 * (j >> 1)), "r"(key), "r"(b) : "memory");
    } else {  // step 2: rows key / 2 .. + 63 of the parity-(key % 2) plane
#pragma unroll
      for (int j = 0; j < 2 * HB; ++j)
        asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                     ::"r"((j & 1 ? vd : kd) + (j >> 1) * BLK), "l"(tmap + 256 + 128 * (j & 1)), "r"(64 * (j >> 1)), "r"(key & 1),
                       "r"(key >> 1), "r"(b) : "memory");
    }
  }

  // Stride-P walks (lattice_pass): rows key / P .. + 63 of the residue-(key % P) plane of the maps'
  // [rows / P][P][head_dim] view (maps 4 and 5); a separate entry so that the step-1/2 kernels'
  // code stays as it was.
  template <int P>
  __device__ __forceinline__ void tma_load_step(int buf, const WalkD& w, int u0) {
    if (threadIdx.x != 0) return;
    const u32 b = bar(buf), kd = kbase + buf * TILE, vd = kd + NSTAGES * TILE;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(b), "n"(2 * TILE) : "memory");
    const int key = keyoff + w.base + u0 * P;
#pragma unroll
    for (int j = 0; j < 2 * HB; ++j)
      asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
                   ::"r"((j & 1 ? vd : kd) + (j >> 1) * BLK), "l"(tmap + 512 + 128 * (j & 1)), "r"(64 * (j >> 1)), "r"(key % P),
                     "r"(key / P), "r"(b) : "memory");
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* q, const T* k, const T* v, const i64* row, const Head& hv,
                                        bool first, const float* ws) {
    Base::begin(smem, q, k, v, row, hv, first, ws);
    kbase = (smem_addr(smem) + 1023u) & ~1023u;
    const u32 c = threadIdx.x & 7, r0 = threadIdx.x >> 3;
    sdst = r0 * 128 + ((c ^ (r0 & 7)) << 4);  // (r0 + RS*k) % 8 == r0 % 8
    if (QS) {
      // This thread's two rows, 16-byte chunks 2 t4 and 2 t4 + 1 of each (a row's quad copies it
      // whole), zeros for padding rows; in the first stage's commit group, so landed() and the
      // stage barrier publish them before the first S.
      const T* qg = q + head_q_elems<SEQ, HD>(hv);
      const int t4 = threadIdx.x & 3;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // Row r of the block's Q tile. (r >> 6, threadIdx.x >> 7 below: 0 in a block of 128 threads,
        // which the compiler does not know; the terms keep the kernels' code as measured.)
        const u32 r = (u32)Base::slot(h), rq = (r >> 6) * TILE + (r & 63) * 128;
#pragma unroll
        for (int j = 0; j < 2 * HB; ++j) {
          const u32 ch = 2 * t4 + (j & 1), blk = j >> 1;
          const bool ok = row[h] >= 0;
          cp_async16_s(qbase() + rq + blk * BLK + ((ch ^ (r & 7)) << 4), ok ? qg + row[h] * (kQStep * HD) + 64 * blk + ch * 8 : qg,
                       ok ? 16 : 0);
        }
      }
    }
  }
  __device__ __forceinline__ u32 qbase() const { return kbase + 2 * NSTAGES * TILE; }

  // Same gather as MmaEngine::load (thread t: chunk t % 8 of keys t / 8 + RS*k), swizzled stores.
  // Byte offsets within the head are 32-bit (codegen checks kv_len * head_dim < 2^31) and added to
  // one pointer per operand: ncu showed the 64-bit address arithmetic of this loop at a fifth of
  // the kernel's issue slots.
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    if (TMA) {
      tma_load(buf, w, u0);
      return;
    }
    if (table != nullptr && w.step == 0) {  // indexed walk (the plan's global keys): each key row from the table
      load_indexed(buf, w, u0, table);
      return;
    }
    const int r = u0 + (int)(threadIdx.x >> 3);
    const u32 dstep = (u32)(RS * w.step * (int)(kKvStep * HD)) * (u32)sizeof(T);
#pragma unroll
    for (int blk = 0; blk < HB; ++blk) {  // column block blk: head columns 64 blk ..
      const u32 off = ((u32)(w.base + r * w.step) * (u32)(kKvStep * HD) + 64 * blk + (threadIdx.x & 7) * 8) * (u32)sizeof(T);
      const char* kb = reinterpret_cast<const char*>(this->kg);
      const char* vb = reinterpret_cast<const char*>(this->vg);
      const u32 kd = kbase + buf * TILE + blk * BLK + sdst;
      const u32 vd = kd + NSTAGES * TILE;
      if (u0 + 64 <= w.count) {  // uniform: every key of the tile is in the walk
        const char* kp = kb + off;
        const char* vp = vb + off;
        // Unit and stride-2 walks (windows, blocks; dilated phases) with a constant step: the copies'
        // offsets become immediates of two addresses (the SASS had a 64-bit add per copy).
        if (w.step == 1) {
          copy_full<1>(kd, vd, kp, vp);
        } else if (w.step == 2) {
          copy_full<2>(kd, vd, kp, vp);
        } else {
#pragma unroll
          for (int k = 0; k < 64 / RS; ++k) {
            cp_async16_s(kd + k * RS * 128, kp + k * dstep, 16);
            cp_async16_s(vd + k * RS * 128, vp + k * dstep, 16);
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < 64 / RS; ++k) {
          const bool ok = r + RS * k < w.count;
          const u32 o = ok ? off + k * dstep : 0u;
          cp_async16_s(kd + k * RS * 128, kb + o, ok ? 16 : 0);
          cp_async16_s(vd + k * RS * 128, vb + o, ok ? 16 : 0);
        }
      }
    }
  }

  // Keys table[base + u]: thread t copies chunk t % 8 of rows t / 8 + RS*k, as load().
  __device__ __forceinline__ void load_indexed(int buf, const WalkD& w, int u0, const int* table) {
    const int r = u0 + (int)(threadIdx.x >> 3);
    const char* kb = reinterpret_cast<const char*>(this->kg);
    const char* vb = reinterpret_cast<const char*>(this->vg);
    int key[64 / RS];
#pragma unroll
    for (int k = 0; k < 64 / RS; ++k) key[k] = r + RS * k < w.count ? table[w.base + r + RS * k] : -1;
#pragma unroll
    for (int blk = 0; blk < HB; ++blk) {
      const u32 kd = kbase + buf * TILE + blk * BLK + sdst;
      const u32 vd = kd + NSTAGES * TILE;
#pragma unroll
      for (int k = 0; k < 64 / RS; ++k) {
        const bool ok = key[k] >= 0;
        const u32 o = ok ? ((u32)key[k] * (u32)(kKvStep * HD) + 64 * blk + (threadIdx.x & 7) * 8) * (u32)sizeof(T) : 0u;
        cp_async16_s(kd + k * RS * 128, kb + o, ok ? 16 : 0);
        cp_async16_s(vd + k * RS * 128, vb + o, ok ? 16 : 0);
      }
    }
  }

  // Copy K of the unrolled loop, its offsets immediates of the two addresses (ptxas kept a 64-bit
  // add per copy for computed offsets).
  template <int STEP, int K = 0>
  __device__ __forceinline__ static void copy_full(u32 kd, u32 vd, const char* kp, const char* vp) {
    if constexpr (K < 64 / RS) {
      constexpr int kStep = RS * STEP * (int)(kKvStep * HD) * (int)sizeof(T);
      asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%3], 16;\n" ::"r"(kd), "l"(kp), "n"(K * RS * 128), "n"(K * kStep));
      asm volatile("cp.async.cg.shared.global [%0+%2], [%1+%3], 16;\n" ::"r"(vd), "l"(vp), "n"(K * RS * 128), "n"(K * kStep));
      copy_full<STEP, K + 1>(kd, vd, kp, vp);
    }
  }

  // This thread's copies have completed (cp.async.wait_group): publish them to the async proxy.
  __device__ __forceinline__ void landed() { fence_proxy_async(); }

  // O += P.V from pa and V stage buf, committed as one group (not waited for).
  __device__ __forceinline__ void issue_pv(int buf) {
    const u64 dv = wg_desc(kbase + (NSTAGES + buf) * TILE);
    wg_hold(this->acc[0]);
    wg_fence();
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      wg_mma<T, 1, true, 0>(this->acc[0], pa[kb], dv + 128 * kb);
      if constexpr (HB == 2) wg_mma<T, 1, true, 8>(this->acc[0], pa[kb], dv + BLK / 16 + 128 * kb);
    }
    wg_commit();
  }
  // lattice_pass's end: this tile's softmax state merged with the one the first pass handed over
  // (ws), after the last P.V. Why not start from it (begin's first = false): O's registers loaded
  // from memory made ptxas serialise the deferred P.V's wgmmas (C7515; the loads sink past the
  // first S).
  __device__ __forceinline__ void merge_state(const i64* row, i64 bh, const float* ws) {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (row[h] < 0) continue;
      const float* ml = state_ml(ws, SEQ, HD, bh, row[h]);
      const float m1 = ml[0];
      float ref;
      const float a0 = this->rebase(h, m1, ref), a1 = fast_exp2(m1 - ref);
      this->l[h] = this->l[h] * a0 + (t4 == 0 ? ml[1] * a1 : 0.f);  // l: summed over a row's 4 lanes
      const float* w = ws + (bh * SEQ + row[h]) * HD + 2 * t4;
#pragma unroll
      for (int d = 0; d < HD / 8; ++d) {
        this->acc[0][d][2 * h] = this->acc[0][d][2 * h] * a0 + w[8 * d] * a1;
        this->acc[0][d][2 * h + 1] = this->acc[0][d][2 * h + 1] * a0 + w[8 * d + 1] * a1;
      }
    }
  }
  // After the P.V completed: O is read again and pa may be overwritten (the asm statements make
  // both operands of a point after the wait, so no access moves above it).
  __device__ __forceinline__ void pv_done() {
    wg_wait<0>();
#pragma unroll
    for (int kb = 0; kb < 4; ++kb)
#pragma unroll
      for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(pa[kb][e]));
    wg_hold(this->acc[0]);
  }
  __device__ __forceinline__ void pack_p(const float (&s)[8][4]) {
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) wg_pack_a<T>(s, kb, pa[kb]);
  }

  // S = Q.K^T for this warp's 16 rows with mma.sync from the swizzled K stage buf (the wgmma
  // accumulator layout is the mma.sync one: CHK's rare exact step).
  __device__ __forceinline__ void rescore(int buf, float (&s)[8][4]) {
    const int lane = threadIdx.x & 31;
    const u32 kst = kbase + buf * TILE;
#pragma unroll
    for (int n = 0; n < 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < HD / 16; ++kb)
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        const u32 key = 16 * np + (lane & 7) + ((lane >> 4) << 3), chunk = 2 * (kb & 3) + ((lane >> 3) & 1);
        const u32 addr = kst + (kb >> 2) * BLK + key * 128 + ((chunk ^ (key & 7)) << 4);
        u32 b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3) : "r"(addr));
        u32 a[4];
        if (QS) {
          // Row `row` of the Q tile (warp w: rows 16 w ..).
          const u32 row = ((threadIdx.x >> 5) & 3) * 16 + (lane & 15), qc = 2 * (kb & 3) + (lane >> 4);
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                       : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                       : "r"(qbase() + (threadIdx.x >> 7) * TILE + (kb >> 2) * BLK + row * 128 + ((qc ^ (row & 7)) << 4)));
        } else {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[e] = this->qf[0][kb][e];
        }
        mma16816<T>(s[2 * np], a, b0, b1);
        mma16816<T>(s[2 * np + 1], a, b2, b3);
      }
  }
  // Scale (non-positive scales only: positive ones fold into the exponent) and mask.
  template <class Keep>
  __device__ __forceinline__ static void scale_mask(float (&s)[8][4], bool full, float scale_log2, Keep keep) {
    const int t4 = threadIdx.x & 3;
    if (!(scale_log2 > 0.f)) {
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
    }
    if (!full) {
      if constexpr (TileMask<Keep>::value) {
        keep.tile(s);
      } else {
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (!keep(e >> 1, n * 8 + 2 * t4 + (e & 1))) s[n][e] = neg_inf();
      }
    }
  }
  // CHK softmax: S becomes P in place, O and l updated. first: -1 unknown (a warp with a row that
  // has no reference yet takes the exact step, by a vote), 1 the row tile's first key tile (the
  // exact step), 0 a later one where every row has its reference (band_pass; a padding row without
  // one fails the sum check all the same: exp2 of +inf or NaN).
  template <class Keep>
  __device__ __forceinline__ void softmax_checked(int buf, float (&s1)[1][8][4], bool full, float scale_log2, Keep keep,
                                                  int first = -1) {
    float(&s)[8][4] = s1[0];
    scale_mask(s, full, scale_log2, keep);
    const float mul = scale_log2 > 0.f ? scale_log2 : 1.f;
    float* m = this->m;
    bool exact = first == 1 ? true : first == 0 ? false : __any_sync(0xffffffffu, m[0] == neg_inf() || m[1] == neg_inf());
    if (!exact) {
      float t[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          s[n][2 * h] = fast_exp2(fmaf(s[n][2 * h], mul, -m[h]));
          s[n][2 * h + 1] = fast_exp2(fmaf(s[n][2 * h + 1], mul, -m[h]));
        }
        t[h] = this->row_sum(s, h);
      }
      // !(t <= 2^8): also NaN and overflow.
      constexpr float kBound = CHK == 2 ? -1.f : 256.f;
      exact = __any_sync(0xffffffffu, !(t[0] <= kBound && t[1] <= kBound));
      if (!exact) {
        this->l[0] += t[0];
        this->l[1] += t[1];
        return;
      }
      rescore(buf, s);
      scale_mask(s, full, scale_log2, keep);
    }
    // Exact step: references to the row maxima.
    this->exact_step(s1, mul);
  }

  // Descriptor offset of k-step kb (16 head columns) in a K-major stage: 32 bytes further into
  // the swizzled rows of its column block (descriptor addresses count 16-byte units).
  __device__ __forceinline__ static constexpr u64 kdesc(int kb) { return (u64)((kb >> 2) * (BLK >> 4) + 2 * (kb & 3)); }
  // S = Q.K^T of the key tile in stage buf, committed as one wgmma group (not waited for).
  __device__ __forceinline__ void issue_s(int buf, float (&s)[1][8][4]) {
    const u64 dk = wg_desc(kbase + buf * TILE);
    wg_fence();
    if (QS) {
      const u64 dq = wg_desc(qbase() + (threadIdx.x >> 7) * TILE);  // the Q tile
      wg_mma_ss<T, false>(s[0], dq, dk);
#pragma unroll
      for (int kb = 1; kb < HD / 16; ++kb) wg_mma_ss<T, true>(s[0], dq + kdesc(kb), dk + kdesc(kb));
    } else {
      wg_mma<T, 0, false>(s[0], this->qf[0][0], dk);
#pragma unroll
      for (int kb = 1; kb < HD / 16; ++kb) wg_mma<T, 0, true>(s[0], this->qf[0][kb], dk + kdesc(kb));
    }
    wg_commit();
  }

  // Deferred P.V (band_pass, lattice_pass): a key tile's S is issued while the previous tile's P.V may
  // still run, and one wait covers both (s_wait); the softmax then issues this tile's P.V and
  // leaves it running (s_finish) through the next tile's start. pv_done() before end().
  __device__ __forceinline__ void s_wait(int buf, float (&s)[1][8][4]) {
    issue_s(buf, s);
    pv_done();
    wg_hold(s[0]);
  }
  template <class Keep>
  __device__ __forceinline__ void s_finish(int buf, float (&s)[1][8][4], bool full, float scale_log2, Keep keep,
                                           int first = -1) {
    softmax_checked(buf, s, full, scale_log2, keep, first);
    pack_p(s[0]);
    issue_pv(buf);
  }

  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    float s[1][8][4];
    issue_s(buf, s);
    wg_wait<0>();
    wg_hold(s[0]);
    s_finish(buf, s, full, scale_log2, keep);
    pv_done();
  }

  // O of a row tile (rows row0 + rstep * r, r < nrows of 64; band_pass, fused_pass's last pass),
  // normalised, through shared memory: each warp writes its 16 rows there (swizzled: conflict-free)
  // and stores them as whole 128-byte rows, 4 x 16 bytes per thread, instead of 16 x 4 bytes
  // scattered over 8 rows per instruction (H200: the band kernel cut down to its start-up and
  // those stores took 28 us at window-16k, 5.6 without the stores). Called once every copy has
  // landed and the last P.V completed in this warp; the barrier covers the other warps' wgmmas,
  // so the stages are free.
  __device__ __forceinline__ void end_band(int row0, int rstep, int nrows, const Head& hv, T* o) {
    const int lane = threadIdx.x & 31, wrp = threadIdx.x >> 5, t4 = lane & 3;
    __syncthreads();  // every warp's wgmmas done reading the stages
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float lsum = lane_sum<4>(this->l[h]), inv = this->inverse(lsum);
      const u32 r = 16 * wrp + (lane >> 2) + 8 * h;
      if (t4 == 0 && (int)r < nrows) store_lse<SEQ>(hv, row0 + (i64)rstep * (int)r, softmax_ref(this->m[h]), lsum);
#pragma unroll
      for (int d = 0; d < HD / 8; ++d) {  // head columns 8d.. : column block d / 8, chunk d % 8
        const u32 v = pack2<T>(this->acc[0][d][2 * h] * inv, this->acc[0][d][2 * h + 1] * inv);
        asm volatile("st.shared.b32 [%0], %1;\n"
                     ::"r"(kbase + (d >> 3) * BLK + r * 128 + (((u32)(d & 7) ^ (r & 7)) << 4) + 4 * t4), "r"(v) : "memory");
      }
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < 4 * HB; ++k) {
      const u32 r = 16 * wrp + (lane >> 3) + 4 * (k & 3), c = lane & 7, blk = k >> 2;
      uint4 x;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(x.x), "=r"(x.y), "=r"(x.z), "=r"(x.w) : "r"(kbase + blk * BLK + r * 128 + ((c ^ (r & 7)) << 4)) : "memory");
      if ((int)r < nrows) *reinterpret_cast<uint4*>(o + (head_q0<SEQ>(hv) + (i64)(row0 + rstep * (int)r) * kQStep) * HD + 64 * blk + c * 8) = x;
    }
  }
};
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
