// The pattern-independent part of every emitted module: element types, PTX helpers, the fused
// pass driver and the three-kernel pipeline; the engines (the fused kernel's inner loops) live in
// engine_*.cpp. The emitted file defines the SPLAT_* constants and the pattern tables before this
// text and the extern "C" entry points after it. No #include: NVRTC compiles it with no header
// search path.
#include "libsplat/codegen/device_code.h"

namespace splat {

namespace {

const char* device_common() {
  return R"CUDA(
// ------------------------------------------------------------------------------------------------
// Pattern-independent device code (libsplat/codegen/device_code.cpp)
// ------------------------------------------------------------------------------------------------
typedef unsigned int u32;
typedef unsigned short u16;
typedef long long i64;

struct bf16_t { u16 x; };
struct f16_t { u16 x; };

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(bf16_t v) { return __uint_as_float(((u32)v.x) << 16); }
__device__ __forceinline__ float to_f(f16_t v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.x));
  return f;
}
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16_t from_f<bf16_t>(float x) {
  bf16_t r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.x) : "f"(x));
  return r;
}
template <> __device__ __forceinline__ f16_t from_f<f16_t>(float x) {
  f16_t r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.x) : "f"(x));
  return r;
}
// Two floats into one 32-bit register of the 16-bit type, lo in the low half (mma operand order).
template <class T> __device__ __forceinline__ u32 pack2(float lo, float hi);
template <> __device__ __forceinline__ u32 pack2<bf16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> __device__ __forceinline__ u32 pack2<f16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// 2^x on the special function unit (max rel. error ~2^-22; ex2(-inf) = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// 1/x on the special function unit (max error 1 ulp; the IEEE division's range checks and slow
// path are not needed for a row sum of exponentials, which is >= 1).
__device__ __forceinline__ float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
// A key-tile mask that masks a whole tile itself (tile(s), e.g. BandMask) rather than per score.
template <class K, class = void> struct TileMask { static constexpr bool value = false; };
template <class K> struct TileMask<K, decltype(void(K::TILE_MASK))> { static constexpr bool value = K::TILE_MASK; };

// Softmax state in the fused workspaces: every row's unnormalised O (rows of hd floats per head,
// heads gridDim.y), then every row's (m, l). The pass hand-over holds seq_len rows per head, the
// split-KV slots slots * 64 (fused_combine and end_partial index those directly, by slot row).
// Returns row r of head bh's (m, l).
template <class F> __device__ __forceinline__ F* state_ml(F* ws, i64 rows, int hd, i64 bh, i64 r) {
  return ws + (i64)gridDim.y * rows * hd + (bh * rows + r) * 2;
}
// Sum over the W lanes (1, 2, 4, 8...) that share a row: xor shuffles, lane distance 1 first.
template <int W> __device__ __forceinline__ float lane_sum(float x) {
#pragma unroll
  for (int o = 1; o < W; o <<= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Programmatic dependent launch (sm_90; no-ops elsewhere): a kernel lets the next one (launched with
// programmatic stream serialization) start once all its blocks have called launch_dependents; that
// one's wait returns when this grid has completed and its writes are visible (at once for a plain
// launch).
__device__ __forceinline__ void pdl_launch_dependents() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
// 16-byte asynchronous copy global -> shared; src_bytes 0 fills zeros (rows past the walk).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
__device__ __forceinline__ void ldmatrix_x4(u32& r0, u32& r1, u32& r2, u32& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32& r0, u32& r1, u32& r2, u32& r3, const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(smem_addr(p)));
}
// D += A*B, m16n8k16, fp32 accumulation.
template <class T> __device__ __forceinline__ void mma16816(float* d, const u32* a, u32 b0, u32 b1);
template <> __device__ __forceinline__ void mma16816<bf16_t>(float* d, const u32* a, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> __device__ __forceinline__ void mma16816<f16_t>(float* d, const u32* a, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// D += A*B, m16n8k8 tf32 (operands are fp32 bit patterns rounded to tf32).
__device__ __forceinline__ u32 to_tf32(float x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
__device__ __forceinline__ void mma1688_tf32(float* d, const u32* a, u32 b0, u32 b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four consecutive elements as floats (16-byte or 8-byte load).
__device__ __forceinline__ void load4(const float* p, float* out) {
  float4 v = *reinterpret_cast<const float4*>(p);
  out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
}
template <class T> __device__ __forceinline__ void load4(const T* p, float* out) {
  uint2 v = *reinterpret_cast<const uint2*>(p);
  T e[4];
  e[0].x = (u16)(v.x & 0xffff); e[1].x = (u16)(v.x >> 16); e[2].x = (u16)(v.y & 0xffff); e[3].x = (u16)(v.y >> 16);
  for (int k = 0; k < 4; ++k) out[k] = to_f(e[k]);
}

// ---- pattern description types (values are emitted per pattern) ----
// An item: one run family (closed form) over a progression of rows; or a tabulated segment.
struct Item {
  i64 row_begin, row_end, row_stride;
  i64 start_slope, start_offset, stride, count_slope, count_offset, den;
  int tabulated;              // runs come from the table
  i64 tab_row_ptr, tab_runs;  // word offsets in the table (tabulated)
};
// Fused plan, per pass: a row tile (rows phase + PERIOD*m, m in [m_begin, m_end)) and its groups;
// a group (items walked together) and its walks; a walk (keys base + u*step, u < count).
// A tile's walks are contiguous in the walk table, group after group: first_walk (-1 if none) and
// walk_total let the loads run through all of them as one stream of key tiles. Its groups' item
// lists are contiguous too: item_begin, item_total (in the group item table).
// item0..3: the first four of those items' indices (-1 past item_total), so that staging them
// needs no look-up in the group item table.
struct TileD {
  int phase, m_begin, m_end, group_begin, group_count, split_slot, split_lead, first_walk, walk_total, item_begin, item_total;
  int item0, item1, item2, item3;
};
// Split-KV: the rows of a split tile and the slots of its chunks' partial states.
struct SplitD { int phase, m_begin, m_end, slot_begin, slot_count; };
// tabulated: 1 for a tabulated item, 2 for the plan's global keys (no items; every row keeps
// every key of the group's walks).
struct GroupD { int walk_begin, walk_count, item_begin, item_count, tabulated; };
// Key tiles [full_begin, full_end) need no mask; modular: some row's run has a stride > 1 while
// the walk steps by 1 (its mask tests the residue). step 0: an indexed walk, key u is
// table[base + u] (the plan's global keys).
struct WalkD { int base, step, count, full_begin, full_end, modular; };
// Engines get table == nullptr (a compile-time constant once inlined) outside passes with global
// keys, so that their loads keep no indexed path there.
__device__ __forceinline__ i64 walk_key(const WalkD& w, int u, const int* table) {
  return table != nullptr && w.step == 0 ? (i64)table[w.base + u] : (i64)w.base + (i64)u * w.step;
}

// cp.async engines (mma.sync, tf32): gathers keys base + u*step, u in [u0, u0 + BC), of K and V
// (kg, vg: this head's) into stage rows kd, vd (LDK, LDV elements apart); zeros past the walk.
// Thread t copies 16-byte chunk t % CH of rows t / CH + k*RSTEP: one multiply per tile, except an
// indexed walk, which reads each key from the table. Where CH does not divide NT (d = 96) the
// spare threads repeat rows that others copy too; where there are fewer chunks than threads
// (d < 32 in bf16) the rounds stop at BC rows.
template <int HD, int BC, int NT, int LDK, int LDV, class S, class E>
__device__ __forceinline__ void gather_kv(S* kd, S* vd, const E* kg, const E* vg, const WalkD& w, int u0,
                                          const int* table) {
  static_assert(sizeof(S) == sizeof(E), "stage and tensor elements differ in size");
  constexpr int EPC = 16 / (int)sizeof(E), CH = HD / EPC, RSTEP = NT / CH;
  const int c = threadIdx.x % CH, r0 = threadIdx.x / CH;
  const i64 off = ((i64)w.base + (i64)(u0 + r0) * w.step) * HD + c * EPC;
  const i64 dstep = (i64)RSTEP * w.step * HD;
#pragma unroll
  for (int k = 0; k < (BC + RSTEP - 1) / RSTEP; ++k) {
    const int r = r0 + k * RSTEP;
    if (r >= BC) break;
    const bool ok = u0 + r < w.count;
    const i64 o = !ok ? 0 : table != nullptr && w.step == 0 ? (i64)table[w.base + u0 + r] * HD + c * EPC : off + k * dstep;
    cp_async16(kd + r * LDK + c * EPC, kg + o, ok ? 16 : 0);
    cp_async16(vd + r * LDV + c * EPC, vg + o, ok ? 16 : 0);
  }
}

// Cheap range test first: a tile's group may list many items (one per row block) and each row is
// a member of few of them; the 64-bit divisions run only for those.
__device__ __forceinline__ bool item_has_row(const Item& it, i64 i) {
  if (i < it.row_begin || i >= it.row_end) return false;
  return it.row_stride == 1 || (i - it.row_begin) % it.row_stride == 0;
}
// Run of row i in an affine item; false when i is not a member or the row's run is empty.
__device__ __forceinline__ bool item_run(const Item& it, i64 i, i64& start, i64& count) {
  if (i < 0 || !item_has_row(it, i)) return false;
  start = it.start_slope * i + it.start_offset;
  count = it.count_slope * i + it.count_offset;
  if (it.den != 1) {
    start /= it.den;
    count /= it.den;
  }
  return count > 0;
}

)CUDA";
}

const char* device_driver() {
  return R"CUDA(
// ================================================================================================
// Fused pass driver: one block per row tile; for each group of the tile, each row's runs in that
// group (closed forms) in registers, then each walk of the group in key tiles of 64 keys. A key
// tile is "full" (no mask) when every row keeps all of its keys (the plan's full_begin/end).
// R: most runs a row has in one group (from the plan).
// ================================================================================================
// Engines whose compute reads stages through another proxy (wgmma) define landed(), called once a
// stage's copies have completed and before the barrier that publishes it.
template <class E, class = void> struct HasLanded { static constexpr bool value = false; };
template <class E> struct HasLanded<E, decltype(void(&E::landed))> { static constexpr bool value = true; };
// Key tiles loaded ahead of the computed one: STAGES - 1, unless the engine still reads a stage
// after its compute returned (LOOKAHEAD: WgmmaEngine's deferred P.V).
// Whether a stage may be refilled only after a block barrier (every warp past its last read), unless
// the engine says its own waits suffice (REFILL_BARRIER: WgmmaEngine with one warpgroup, whose
// wgmma reads complete for all four warps at once).
template <class E, class = void> struct RefillBarrier { static constexpr bool value = true; };
template <class E> struct RefillBarrier<E, decltype(void(E::REFILL_BARRIER))> { static constexpr bool value = E::REFILL_BARRIER; };
// Whether the engine waits for the tile it computes before issuing the next load (EARLY_WAIT):
// WgmmaEngine's proxy fence after the wait then has only that tile's copies outstanding.
template <class E, class = void> struct EarlyWait { static constexpr bool value = false; };
template <class E> struct EarlyWait<E, decltype(void(E::EARLY_WAIT))> { static constexpr bool value = E::EARLY_WAIT; };
// Whether the engine's stages are loaded by TMA and published by mbarriers (USES_TMA: WgmmaEngine):
// no cp.async wait, proxy fence or block barrier per key tile.
template <class E, class = void> struct UsesTma { static constexpr bool value = false; };
template <class E> struct UsesTma<E, decltype(void(E::USES_TMA))> { static constexpr bool value = E::USES_TMA; };
// The engine stores a finished row tile's O through shared memory as whole rows (end_band).
template <class E, class = void> struct StagedEnd { static constexpr bool value = false; };
template <class E> struct StagedEnd<E, decltype(void(E::STAGED_END))> { static constexpr bool value = E::STAGED_END; };
template <class E, class = void> struct Lookahead { static constexpr int value = E::STAGES - 1; };
template <class E> struct Lookahead<E, decltype(void(E::LOOKAHEAD))> { static constexpr int value = E::LOOKAHEAD; };

// NOMASK: every key tile of the pass is full (Plan: pass_unmasked, e.g. BigBird's 64-key blocks):
// no run bounds in registers and no mask code (BigBird-16k's kernel: 168 registers, 200 bytes of
// spills and 3 blocks per SM with its five runs per row, for masks it never applies).
// GTAB >= 0: the pass walks the plan's global keys (a group with tabulated == 2), at table word
// GTAB; GROWS >= 0: row i keeps only the first table[GROWS + i] of them (else all).
template <class E, class T, int SEQ, int HD, int PERIOD, int R, int NSLOTS, bool FIRST, bool LAST, bool NOMASK = false,
          int GTAB = -1, int GROWS = -1>
__device__ __forceinline__ void fused_pass(const Item* items, const TileD* tiles, const GroupD* groups, const WalkD* walks,
                                           const int* group_items, const int* group_rbeg, const int* group_pmax,
                                           float scale_log2, const T* q, const T* k, const T* v,
                                           T* o, float* ws, const int* table, const void* tmaps, int tix = -1,
                                           i64 bhx = -1) {
  constexpr int BC = E::BC;
  constexpr bool GKEYS = GTAB >= 0;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The block's tile and head: (tix, bhx) where the entry orders blocks itself (chunks first), else
  // (blockIdx.x, blockIdx.y).
  const TileD tile = tiles[tix >= 0 ? tix : (int)blockIdx.x];
  const i64 bh = bhx >= 0 ? bhx : (i64)blockIdx.y;
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const i64 m = tile.m_begin + E::slot(h);
    row[h] = m < tile.m_end ? tile.phase + (i64)PERIOD * m : -1;
  }
  // The tile's affine items, staged in shared memory by the whole block at once (all loads in
  // flight together): each thread reading them from global memory itself, through the group's
  // binary search, was a chain of up to ten dependent loads before the first key tile (ncu: a fifth
  // of the window kernel's stall samples in the start-up). Tiles with more items search as before.
  constexpr int kStaged = 32, kItemWords = sizeof(Item) / sizeof(i64);
  __shared__ i64 staged_words[kStaged * kItemWords];
  const Item* staged = reinterpret_cast<const Item*>(staged_words);
  const bool use_staged = tile.item_total <= kStaged;
  if (use_staged)
    for (int x = threadIdx.x; x < tile.item_total * kItemWords; x += blockDim.x) {
      const int n = x / kItemWords;
      const int idx = n == 0 ? tile.item0 : n == 1 ? tile.item1 : n == 2 ? tile.item2 : n == 3 ? tile.item3
                                                                                    : group_items[tile.item_begin + n];
      staged_words[x] = reinterpret_cast<const i64*>(items + idx)[x % kItemWords];
    }
  E e;
  // Split chunks other than the lead start from an empty state; the lead continues the state
  // handed over by earlier passes.
  e.begin(smem_raw, q, k, v, row, bh, FIRST || (tile.split_slot >= 0 && !tile.split_lead), ws);
  if constexpr (UsesTma<E>::value) e.tma_setup(tmaps, bh);
  (void)tmaps;
  // cp.async pipeline of S stages: the tile's key tiles, over all its walks and groups, form one
  // stream; loads run LA tiles (S - 1, or fewer: Lookahead) ahead of the computation, across walk
  // and group boundaries (so short walks, e.g. one lattice tile each, do not each wait for a load). The c-th computed tile
  // is the c-th loaded one, in stage c % S. One commit group per tile slot (empty past the end)
  // keeps the wait count uniform. The first loads are issued before the group and item tables are
  // read (a chain of dependent loads), so that their latency overlaps the run look-up.
  constexpr int S = E::STAGES, LA = Lookahead<E>::value;
  int lw = -1, lu = 0, issued = 0, computed = 0;  // load cursor: walk lw of the tile, key offset lu
  WalkD lwalk = {0, 1, 0, 0, 0, 0};
  auto next_walk = [&]() {  // the next walk with keys (the compute loop skips empty ones too)
    lu = 0;
    do {
      if (++lw >= tile.walk_total) return;
      lwalk = walks[tile.first_walk + lw];
    } while (lwalk.count <= 0);
  };
  auto load_next = [&]() {
    if (lw < tile.walk_total) {
      e.load(issued % S, lwalk, lu, GKEYS ? table : nullptr);
      lu += BC;
      if (lu >= lwalk.count) next_walk();
    }
    cp_async_commit();
    ++issued;
  };
  if (S > 1) {
    next_walk();
#pragma unroll
    for (int p = 0; p < LA; ++p) load_next();
  }
  // The staged items are visible; with TMA stages also the stage barriers thread 0 initialised
  // (before its first copies), which no other thread waits on before this.
  if (use_staged || UsesTma<E>::value) __syncthreads();
  for (int gi = 0; gi < tile.group_count; ++gi) {
    // From global memory, not staged: the compiler reloads its fields (read-only data) instead of
    // keeping them in registers through the walks (staged in shared memory, the window kernel
    // spilled 492 bytes).
    const GroupD g = groups[tile.group_begin + gi];
    // The rows' runs in this group.
    int rs[E::ROWS][R], rst[E::ROWS][R], rc[E::ROWS][R];
    int nr[E::ROWS];
    const Item* tab = nullptr;
    // Tabulated group: each row's runs [tb, te) in the table's runs at truns, looked up once here
    // (per score, a row search and 64-bit divisions made global-strided's first pass take 739 us).
    const int* truns = nullptr;
    int tb[E::ROWS], te[E::ROWS];
#pragma unroll
    for (int h = 0; h < E::ROWS; ++h) nr[h] = tb[h] = te[h] = 0;
    if (NOMASK) {
    } else if (GKEYS && g.tabulated == 2) {
      // Each row's prefix of the global keys (in tb: no run table here).
      if (GROWS >= 0)
#pragma unroll
        for (int h = 0; h < E::ROWS; ++h) tb[h] = row[h] >= 0 ? table[GROWS + row[h]] : 0;
    } else if (g.tabulated) {
      tab = &items[group_items[g.item_begin]];
      truns = table + tab->tab_runs;
#pragma unroll
      for (int h = 0; h < E::ROWS; ++h)
        if (row[h] >= 0 && item_has_row(*tab, row[h])) {
          const i64 m = (row[h] - tab->row_begin) / tab->row_stride;
          tb[h] = table[tab->tab_row_ptr + m];
          te[h] = table[tab->tab_row_ptr + m + 1];
        }
    } else {
      // Staged: every item of the group, from shared memory. Otherwise the group's items are
      // sorted by first row, pmax is the running max of their row ends: only items from the first
      // whose running end passes my lowest row, up to my highest row. One loop body for both
      // (generic addressing), so that the engines' register budgets see it once.
      i64 imin = 0x7fffffffffffffffll, imax = -1;
#pragma unroll
      for (int h = 0; h < E::ROWS; ++h)
        if (row[h] >= 0) { imin = row[h] < imin ? row[h] : imin; imax = row[h] > imax ? row[h] : imax; }
      int lo = 0, hi = g.item_count;
      while (!use_staged && lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (group_pmax[g.item_begin + mid] > imin) hi = mid; else lo = mid + 1;
      }
      const Item* gstaged = staged + (g.item_begin - tile.item_begin);
      for (int x = lo; x < g.item_count && (use_staged || group_rbeg[g.item_begin + x] <= imax); ++x) {
        const Item it = use_staged ? gstaged[x] : items[group_items[g.item_begin + x]];
#pragma unroll
        for (int h = 0; h < E::ROWS; ++h) {
          i64 st, cn;
          if (item_run(it, row[h], st, cn)) {
#pragma unroll
            for (int r = 0; r < R; ++r)
              if (r == nr[h]) { rs[h][r] = (int)st; rst[h][r] = (int)it.stride; rc[h][r] = (int)cn; }
            ++nr[h];
          }
        }
      }
    }
    for (int wi = 0; wi < g.walk_count; ++wi) {
      const WalkD w = walks[g.walk_begin + wi];
      // Runs in walk units: [lo, hi) with every mod-th unit kept.
      int lo[E::ROWS][R], hi[E::ROWS][R], md[E::ROWS][R];
#pragma unroll
      for (int h = 0; h < E::ROWS; ++h)
#pragma unroll
        for (int r = 0; r < R; ++r) {
          lo[h][r] = 0; hi[h][r] = 0; md[h][r] = 1;
          if (!NOMASK && r < nr[h]) {
            if (w.step > 1) {  // lattice walk: the run shares the walk's lattice
              lo[h][r] = (rs[h][r] - w.base) / w.step;
              hi[h][r] = lo[h][r] + rc[h][r];
            } else {
              lo[h][r] = rs[h][r] - w.base;
              hi[h][r] = lo[h][r] + (rc[h][r] - 1) * rst[h][r] + 1;
              md[h][r] = rst[h][r];
            }
            // Only keys of this walk: a run the plan covers by another walk may start past its end,
            // inside the last tile's zero-filled padding (a 128-key tile's padding reaches further
            // than a 64-key one's: bc=128 counted those zeros as kept keys).
            hi[h][r] = min(hi[h][r], w.count);
          }
        }
      // Modular masks (runs of stride > 1 walked with step 1) only where the plan says a row needs one.
      const bool modular = w.modular != 0;
      const int ntiles = (w.count + BC - 1) / BC;
      for (int kt = 0; kt < ntiles; ++kt) {
        const int buf = S > 1 ? computed % S : 0;
        const int u0 = kt * BC;
        if constexpr (UsesTma<E>::value) {
          e.wait_stage(buf, (u32)(computed / S) & 1u, computed == 0);
          load_next();
        } else if (S > 1 && EarlyWait<E>::value) {
          // This tile has landed (this thread's copies; the barrier below: all), then the next load.
          cp_async_wait<LA - 1>();
          if constexpr (HasLanded<E>::value) e.landed();
          load_next();
        } else if (S > 1) {
          load_next();  // into the stage freed S - LA tiles ago (all threads are past it)
          // This tile has landed (this thread's copies; the barrier below: all).
          cp_async_wait<LA>();
          if constexpr (HasLanded<E>::value) e.landed();
        } else {
          __syncthreads();
          e.load(0, w, u0, GKEYS ? table : nullptr);
        }
        // Full key tiles come from the plan (every row keeps every key): no per-tile vote. The
        // plan counts 64-key tiles; an engine tile of BC = 128 keys is full when both of its are.
        constexpr int R64 = BC / 64;
        const bool full = kt * R64 >= w.full_begin && (kt + 1) * R64 <= w.full_end;
        (void)full;  // unused with NOMASK
        if constexpr (!UsesTma<E>::value) __syncthreads();  // the stage is complete for every thread (landed, or stored when S == 1)
        if constexpr (NOMASK) {
          e.compute(buf, true, scale_log2, [](int, int) { return true; });
        } else if (GKEYS && g.tabulated == 2) {  // global keys: every key of the walk, or the row's prefix
          if (GROWS >= 0)
            e.compute(buf, full, scale_log2, [&](int h, int c) { return w.base - GTAB + u0 + c < tb[h]; });
          else
            e.compute(buf, full, scale_log2, [&](int, int c) { return u0 + c < w.count; });
        } else if (tab == nullptr && !modular) {
          e.compute(buf, full, scale_log2, [&](int h, int c) {
            const int u = u0 + c;
            bool kp = false;
#pragma unroll
            for (int r = 0; r < R; ++r) kp = kp || (u >= lo[h][r] && u < hi[h][r]);
            return kp;
          });
        } else if (tab == nullptr) {
          e.compute(buf, full, scale_log2, [&](int h, int c) {
            const int u = u0 + c;
            bool kp = false;
#pragma unroll
            for (int r = 0; r < R; ++r)
              kp = kp || (u >= lo[h][r] && u < hi[h][r] && (md[h][r] == 1 || (u - lo[h][r]) % md[h][r] == 0));
            return kp;
          });
        } else {
          e.compute(buf, full, scale_log2, [&](int h, int c) {
            const int u = u0 + c;
            if (u >= w.count) return false;
            const int j = w.base + u * w.step;  // keys and runs are int32 (plan: check_int32)
            bool kp = false;
            for (int r = tb[h]; r < te[h] && !kp; ++r) {
              const int d = j - truns[3 * r], st = truns[3 * r + 1];
              kp = d >= 0 && d <= (truns[3 * r + 2] - 1) * st && (st == 1 || d % st == 0);
            }
            return kp;
          });
        }
        if (S > 1 && RefillBarrier<E>::value) __syncthreads();  // no thread still reads the stage the next load refills
        ++computed;
      }
    }
  }
  if (NSLOTS > 0 && tile.split_slot >= 0) {
    e.end_partial(bh, NSLOTS, tile.split_slot, ws + (i64)gridDim.y * SEQ * (HD + 2));
  } else {
    // The tile's rows are phase + PERIOD * m, m in [m_begin, m_end); every copy has landed.
    if constexpr (StagedEnd<E>::value && LAST)
      e.end_band((int)(tile.phase + (i64)PERIOD * tile.m_begin), PERIOD, (int)(tile.m_end - tile.m_begin), bh, o);
    else
      e.end(row, bh, LAST, o, ws);
  }
}

// ================================================================================================
// Band driver (Plan::band: row i keeps keys i + D*k, KLO <= k <= KHI, within [0, SEQ); SEQ == KV,
// a multiple of D): everything a row tile needs is a closed form of its block index, so there are
// no tables to read before the first key tile (the table driver's start-up read ~300 instructions
// and three dependent loads per block; ncu: a fifth of the window kernel's stall samples). Rows of
// phase ph are ph + D*m, keys ph + D*u (m, u < M = SEQ / D); row tile t holds m in [64t, 64t + 64)
// and walks key tiles of 64 from u = 64t + KLO (the grid covers every head, phase and t). TMA
// stages only: key tiles reach below u = 0 or past M (their boxes hold other heads' keys or zeros,
// all masked).
// band_tile (plan.cpp) and the CPU model's band walk compute the same tiles.
// ================================================================================================
// The band kernel's mask of one key tile for this thread's rows m0 and m0 + 8 (keep(h, c): row
// m0 + 8h keeps key u0 + c). A tile cut by one edge of the band only, with every row and key inside
// the sequence (the two edge tiles of an interior row tile), masks by one comparison per score
// against a constant of its position: keep iff c - 8h >= KLO - u0 + m0 (lower edge) or <= KHI - u0 + m0
// (upper edge). Every other masked tile tests all four bounds (tile(): TileMask). band_pass's EMASK
// (tuning key emask) selects the one-sided forms: on the H200 they made the dilated kernel ~1%
// faster, and the unit-step windows slower (ptxas spilled 12 bytes in the window kernel).
// Kind 3 is a band-with-globals row tile's key tile of keys [0, 64) (band_pass, G > 0): row m keeps
// global key c < G only outside its window (c - m < KLO or > KHI; inside, a band tile keeps it).
template <int M, int KLO, int KHI, int G = 0>
struct BandMask {
  static constexpr bool TILE_MASK = true;
  int u0, m0, kind;  // kind: 1 lower edge only, 2 upper edge only, 3 global keys, 0 any
  // Every kind (MmaEngine::softmax masks score by score; tile() is the wgmma engine's).
  __device__ __forceinline__ bool operator()(int h, int c) const {
    const int u = u0 + c, m = m0 + 8 * h;
    if (G > 0 && kind == 3) return m < M && u < G && (u - m < KLO || u - m > KHI);
    return m < M && (unsigned)u < (unsigned)M && u - m >= KLO && u - m <= KHI;
  }
  __device__ __forceinline__ void tile(float (&s)[8][4]) const {
    const int t4 = threadIdx.x & 3;
    // Score (n, e): row h = e / 2, key column c = 8n + 2 t4 + e % 2.
    if (kind == 1) {
      const int thr = KLO - u0 + m0 - 2 * t4;
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (8 * n + (e & 1) - 8 * (e >> 1) < thr) s[n][e] = neg_inf();
    } else if (kind == 2) {
      const int thr = KHI - u0 + m0 - 2 * t4;
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (8 * n + (e & 1) - 8 * (e >> 1) > thr) s[n][e] = neg_inf();
    } else if (G > 0 && kind == 3) {
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = n * 8 + 2 * t4 + (e & 1), d = c - (m0 + 8 * (e >> 1));
          if (!(c < G && (d < KLO || d > KHI) && m0 + 8 * (e >> 1) < M)) s[n][e] = neg_inf();
        }
    } else {
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!(*this)(e >> 1, n * 8 + 2 * t4 + (e & 1))) s[n][e] = neg_inf();
    }
  }
};

// G > 0: a band with G global tokens (Plan: Band::globals; D == 1). The first row tile (the global
// rows) is the plan's table pass's, so its block returns; every other row tile computes its band
// tiles and then, where some row keeps a global key outside its window (band_global_tile), one
// key tile of keys [0, 64) masked to those (last: the band's first tile still holds every row's
// first kept key, which the checked softmax's exact step relies on).
// B0, BX: the band's blocks are blockIdx.x in [B0, B0 + BX) of a grid shared with a table pass
// (BX = 0: the whole grid).
// LAST = false: the first pass of a window plus a lattice (Plan::lattice): hands its softmax state
// over through ws instead of writing O.
template <class E, class T, int SEQ, int HD, int D, int KLO, int KHI, bool DPV = false, bool EMASK = false, int G = 0,
          int B0 = 0, int BX = 0, bool LAST = true>
__device__ __forceinline__ void band_pass(float scale_log2, const T* q, const T* k, const T* v, T* o, float* ws,
                                          const void* tmaps, i64 nb = -1) {
  static_assert(UsesTma<E>::value, "band tiles start at any key: TMA boxes");
  constexpr int M = SEQ / D, TPP = (M + 63) / 64, S = E::STAGES, LA = Lookahead<E>::value;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Blocks in launch order take the row tiles whose keys are not clipped first, over every head and
  // phase, and the shorter ones at the sequence ends last (the last blocks to start finish sooner).
  constexpr int LEAD0 = KLO < 0 ? (63 - KLO) / 64 : 0, LEAD = LEAD0 < TPP ? LEAD0 : TPP;
  constexpr int TRAIL0 = KHI > 0 ? (63 + KHI) / 64 : 0, TRAIL = TRAIL0 < TPP - LEAD ? TRAIL0 : TPP - LEAD;
  constexpr int MID = TPP - LEAD - TRAIL;
  // nb >= 0: the band's block number, given by an entry that orders blocks itself (chunks first).
  const i64 n = nb >= 0 ? nb : (blockIdx.x - B0) + (i64)(BX > 0 ? BX : gridDim.x) * blockIdx.y, groups = (i64)gridDim.y * D;
  i64 g;
  int t;
  if (n < groups * MID) {
    g = n / max(MID, 1);
    t = LEAD + (int)(n % max(MID, 1));
  } else {
    const i64 r = n - groups * MID;
    g = r / max(LEAD + TRAIL, 1);
    const int e = (int)(r % max(LEAD + TRAIL, 1));
    t = e < LEAD ? e : TPP - TRAIL + (e - LEAD);
  }
  static_assert(G == 0 || (D == 1 && G <= 64), "global tokens: one key tile, unit-step band");
  if (G > 0 && 64 * t < G) return;  // the global rows' tile: the table pass's
  const int ph = (int)(g % D);
  const i64 bh = g / D;
  const int m_first = 64 * t, m_last = min(64 * t + 63, M - 1), u_start = m_first + KLO;
  // Keys some row keeps, and keys every row keeps (full key tiles), both clipped to [0, M).
  const int lo = max(0, m_first + KLO), hi = min(M - 1, m_last + KHI);
  const int flo = max(0, m_last + KLO), fhi = min(M - 1, m_first + KHI);
  const int first = (lo - u_start) / 64, count = hi < lo ? 0 : (hi - u_start) / 64 + 1 - first;
  const int full_begin = flo <= u_start ? 0 : (flo - u_start + 63) / 64;
  const int full_end = fhi < u_start + 63 ? 0 : (fhi - u_start - 63) / 64 + 1;
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const int m = m_first + E::slot(h);
    row[h] = m < M ? ph + (i64)D * m : -1;
  }
  // This thread's rows m0 + 8h keep keys u in [0, M) with KLO <= u - m <= KHI (padding rows,
  // m >= M, none): bounds computed in the masked tiles rather than held in registers.
  static_assert(E::ROWS == 2, "one warpgroup: rows slot(0) and slot(0) + 8");
  const int m0 = m_first + E::slot(0);
  E e;
  e.begin(smem_raw, q, k, v, row, bh, true, ws);
  cp_async_commit();  // Q's copies (QS), waited for before the first key tile (wait_stage)
  e.tma_setup(tmaps, bh);
  const WalkD w = {ph, D, 0, 0, 0, 0};  // keys ph + D*u (the engine adds the head's first key row)
  // The band's tiles, then (G > 0) the global keys' tile where some row keeps one outside its window.
  const bool gtile = G > 0 && (m_last + KLO > 0 || G - 1 > m_first + KHI);
  const int total = count + (gtile ? 1 : 0);
#pragma unroll
  for (int p = 0; p < LA; ++p)
    if (p < total) e.load(p, w, G > 0 && p >= count ? 0 : u_start + 64 * (first + p));
  __syncthreads();  // the stage barriers thread 0 initialised
  // Stage of key tile c (c % S) and its barrier's phase parity ((c / S) & 1), counted along (the
  // divisions by S cost a tenth of the loop's issue slots); tile c + LA refills stage (buf + LA) % S.
  // Loop state in the tiles' own count c: first key u_first + 64c, no mask for c in [fb, fe).
  const int u_first = u_start + 64 * first, fb = full_begin - first, fe = full_end - first;
  int buf = 0;
  u32 parity = 0;
  for (int c = 0; c < total; ++c) {
    e.wait_stage(buf, parity, c == 0);
    const bool gt = G > 0 && c >= count;  // the global keys' tile
    const int u0 = gt ? 0 : u_first + 64 * c, lbuf = buf + LA < S ? buf + LA : buf + LA - S;
    const bool full = !gt && c >= fb && c < fe;
    // One-sided edge tiles: rows and keys inside the sequence and the other edge uncut.
    const bool inside = m_first + 63 < M && u0 >= 0 && u0 + 63 < M;
    const BandMask<M, KLO, KHI, G> keep = {
        u0, m0, gt ? 3 : !EMASK || !inside ? 0 : u0 + 63 - m_first <= KHI ? 1 : u0 - m_first - 63 >= KLO ? 2 : 0};
    if constexpr (DPV) {
      float s[1][8][4];
      e.s_wait(buf, s);  // also the previous tile's P.V: its stage may be refilled now
      if (c + LA < total) e.load(lbuf, w, G > 0 && c + LA >= count ? 0 : u0 + 64 * LA);
      // Every row's first kept key is in the row tile's first key tile (rows keep one contiguous run
      // from max(0, m + KLO), and the walk starts at the tile holding the lowest), so the checked
      // softmax takes the exact step there and needs no vote on missing references after it.
      e.s_finish(buf, s, full, scale_log2, keep, c == 0 ? 1 : 0);
    } else {
      if (c + LA < total) e.load(lbuf, w, G > 0 && c + LA >= count ? 0 : u0 + 64 * LA);
      e.compute(buf, full, scale_log2, keep);
    }
    if (++buf == S) {
      buf = 0;
      parity ^= 1u;
    }
  }
  if constexpr (DPV) e.pv_done();
  if (total == 0) cp_async_wait<0>();  // no key tile (a one-sided band's last rows): Q's copies (QS)
  if constexpr (StagedEnd<E>::value && LAST)
    e.end_band(ph + D * m_first, D, min(64, M - m_first), bh, o);
  else
    e.end(row, bh, LAST, o, ws);  // ovl=1: its last P.V is still deferred (flush)
}

// ================================================================================================
// Lattice driver (Plan::lattice: the second pass of a window plus a key lattice; strided
// patterns): row c + P*m keeps keys c + P*u for every u in [0, M) (M = SEQ / P) except the hole
// HLO <= u - m <= HHI, whose keys lie in the row's window and were the first pass's. Its softmax
// state is merged with the first pass's at the end, and O written. Row tile t of phase c holds
// m in [64t, 64t + 64) and walks the key tiles u0 = 64k, k < ceil(M / 64), by TMA boxes of the
// tensor maps' stride-P view; no tables. Why: on the plan's tables this pass took 149 of
// strided-16k's 214 us (H200, session 11), its blocks waiting on table reads and the stride-64
// key gathers (cp.async, 16 per thread and tile).
// ================================================================================================
// Masked score by score (the engines' generic path; no tile()).
template <int M, int HLO, int HHI>
struct LatticeMask {
  int u0, m0;
  __device__ __forceinline__ bool operator()(int h, int c) const {
    const int u = u0 + c, m = m0 + 8 * h;
    return m < M && u < M && (u - m < HLO || u - m > HHI);
  }
};

template <class E, class T, int SEQ, int HD, int P, int HLO, int HHI, bool DPV = false, bool PDL = false>
__device__ __forceinline__ void lattice_pass(float scale_log2, const T* q, const T* k, const T* v, T* o, float* ws,
                                             const void* tmaps) {
  static_assert(UsesTma<E>::value, "stride-P key tiles: TMA boxes");
  static_assert(SEQ % P == 0, "every phase has M rows");
  constexpr int M = SEQ / P, TPP = (M + 63) / 64, S = E::STAGES, LA = Lookahead<E>::value;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Block n: row tile n % TPP of group n / TPP (head bh, phase c); consecutive blocks share keys.
  const i64 n = blockIdx.x + (i64)gridDim.x * blockIdx.y, g = n / TPP;
  const int t = (int)(n % TPP), ph = (int)(g % P);
  const i64 bh = g / P;
  const int m_first = 64 * t, m_last = min(64 * t + 63, M - 1);
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const int m = m_first + E::slot(h);
    row[h] = m < M ? ph + (i64)P * m : -1;
  }
  static_assert(E::ROWS == 2, "one warpgroup: rows slot(0) and slot(0) + 8");
  const int m0 = m_first + E::slot(0);
  E e;
  e.begin(smem_raw, q, k, v, row, bh, true, ws);  // a fresh state, merged with the first pass's at the end
  cp_async_commit();  // Q's copies (QS), waited for before the first key tile (wait_stage)
  e.tma_setup(tmaps, bh);
  const WalkD w = {ph, P, 0, 0, 0, 0};  // keys ph + P*u (the engine adds the head's first key row)
#pragma unroll
  for (int p = 0; p < LA; ++p)
    if (p < TPP) e.template tma_load_step<P>(p, w, 64 * p);
  __syncthreads();  // the stage barriers thread 0 initialised
  int buf = 0;
  u32 parity = 0;
  for (int c = 0; c < TPP; ++c) {
    e.wait_stage(buf, parity, c == 0);
    const int u0 = 64 * c, lbuf = buf + LA < S ? buf + LA : buf + LA - S;
    // Full (lattice_tile_full): inside the keys, and no row's hole in the tile.
    const bool full = u0 + 63 < M && (HLO > HHI || u0 - m_last > HHI || u0 + 63 - m_first < HLO);
    const LatticeMask<M, HLO, HHI> keep = {u0, m0};
    // The checked softmax's vote (first = -1) sends a warp with a row that has no reference yet to
    // the exact step: every warp on the first tile, later ones whose rows had no kept key before
    // (the hole, padding rows).
    if constexpr (DPV) {
      float s[1][8][4];
      e.s_wait(buf, s);  // also the previous tile's P.V: its stage may be refilled now
      if (c + LA < TPP) e.template tma_load_step<P>(lbuf, w, u0 + 64 * LA);
      e.s_finish(buf, s, full, scale_log2, keep, -1);
    } else {
      if (c + LA < TPP) e.template tma_load_step<P>(lbuf, w, u0 + 64 * LA);
      e.compute(buf, full, scale_log2, keep);
    }
    if (++buf == S) {
      buf = 0;
      parity ^= 1u;
    }
  }
  if constexpr (DPV) e.pv_done();
  if constexpr (PDL) pdl_wait();  // a programmatic launch: the window's kernel has completed from here on
  e.merge_state(row, bh, ws);
  if constexpr (StagedEnd<E>::value)
    e.end_band(ph + P * m_first, P, min(64, M - m_first), bh, o);
  else
    e.end(row, bh, true, o, ws);
}

// Combine of split-KV chunks: merges the partial states of a split tile's rows and writes O (last
// pass) or the handed-over state. Block b takes rows [RB (b % (64 / RB)), + RB) of split tile
// b / (64 / RB) with WPR warps per row: the row's first warp reduces its (max, sum) over the
// chunks, then each of the row's warps sums every WPR-th chunk's O row (lanes over d) and the
// block adds the WPR partial rows. Why so parallel: one block per split tile, looping over all
// 64 x HD outputs and every chunk, took ~100 us on the H200 at longformer-16k (16 blocks in all),
// against ~145 us for the pass itself. Launched with 32 * RB * WPR threads (codegen's KernelDesc).
template <class T, int SEQ, int HD, int PERIOD, int NSLOTS, bool LAST, int RB, int WPR, bool PDL = false>
__device__ __forceinline__ void fused_combine(const SplitD* splits, T* o, float* ws) {
  static_assert(64 % RB == 0, "row groups tile the 64 rows of a split tile");
  if constexpr (PDL) pdl_wait();  // a programmatic launch: the chunks' pass has completed from here on
  constexpr int ND = (HD + 31) / 32;  // outputs per lane
  const SplitD sp = splits[blockIdx.x / (64 / RB)];
  const int r0 = (int)(blockIdx.x % (64 / RB)) * RB;
  const i64 bh = blockIdx.y;
  const float* wsplit = ws + (i64)gridDim.y * SEQ * (HD + 2);
  const float* pml = wsplit + (i64)gridDim.y * NSLOTS * 64 * HD;  // slots' (m, l), state_ml's layout
  // Slot row of chunk c for tile row r: slot0 + 64 c + r (O row at wsplit + HD slot, (m, l) at pml + 2 slot).
  const i64 slot0 = (bh * NSLOTS + sp.slot_begin) * 64;
  __shared__ float s_max[RB], s_ref[RB], s_sum[RB];
  __shared__ float s_part[RB][WPR][HD];
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, rr = w / WPR, sub = w % WPR, r = r0 + rr;
  const bool live = sp.m_begin + r < sp.m_end;  // warp-uniform
  if (live && sub == 0) {
    float M = neg_inf();
    for (int c = lane; c < sp.slot_count; c += 32) M = fmaxf(M, pml[(slot0 + (i64)c * 64 + r) * 2]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, off));
    const float ref = M == neg_inf() ? 0.f : M;
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
      o[(bh * SEQ + i) * HD + d] = from_f<T>(L > 0.f ? acc / L : 0.f);
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

// ================================================================================================
// SPLAT pipeline (three kernels, scores written compressed in ACSR order, fp32): one block of 128
// threads per row. Rows are enumerated segment by segment (blockIdx.x -> segment by binary search
// over the segments' first row index), so no per-row index is needed except the compressed row
// offsets (int64, in the table).
// ================================================================================================
struct Seg {
  i64 row_begin, row_stride;
  int first_block;  // prefix over segments of their row counts
  int run_begin, run_count;  // affine families in seg_runs; run_count < 0: tabulated item index
};
struct SegRun { i64 start_slope, start_offset, stride, count_slope, count_offset, den; };

constexpr int kMaxRowRuns = 32;

// Runs of the block's row, sorted by start, in shared memory; returns the row and run count.
__device__ __forceinline__ int row_runs(const Seg* segs, int nseg, const SegRun* seg_runs, const Item* tab_items,
                                        const int* table, i64& row, i64* rs, i64* rst, i64* rc, i64* rpre) {
  int lo = 0, hi = nseg - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (segs[mid].first_block <= (int)blockIdx.x) lo = mid; else hi = mid - 1;
  }
  const Seg sg = segs[lo];
  row = sg.row_begin + sg.row_stride * (i64)(blockIdx.x - sg.first_block);
  int n = 0;
  if (sg.run_count >= 0) {
    for (int r = 0; r < sg.run_count && n < kMaxRowRuns; ++r) {
      const SegRun f = seg_runs[sg.run_begin + r];
      i64 c = (f.count_slope * row + f.count_offset) / f.den;
      if (c <= 0) continue;
      rs[n] = (f.start_slope * row + f.start_offset) / f.den;
      rst[n] = f.stride;
      rc[n] = c;
      ++n;
    }
    // Insertion sort by start (families of one segment are few).
    for (int a = 1; a < n; ++a)
      for (int b = a; b > 0 && rs[b] < rs[b - 1]; --b) {
        i64 x;
        x = rs[b]; rs[b] = rs[b - 1]; rs[b - 1] = x;
        x = rst[b]; rst[b] = rst[b - 1]; rst[b - 1] = x;
        x = rc[b]; rc[b] = rc[b - 1]; rc[b - 1] = x;
      }
  } else {
    const Item it = tab_items[-sg.run_count - 1];
    i64 m = (row - it.row_begin) / it.row_stride;
    int b = table[it.tab_row_ptr + m], e = table[it.tab_row_ptr + m + 1];
    for (int r = b; r < e && n < kMaxRowRuns; ++r) {
      const int* run = table + it.tab_runs + 3 * (i64)r;
      rs[n] = run[0]; rst[n] = run[1]; rc[n] = run[2];
      ++n;
    }
  }
  i64 acc = 0;
  for (int r = 0; r < n; ++r) { rpre[r] = acc; acc += rc[r]; }
  rpre[n] = acc;
  return n;
}

template <class T, int HD, int SEQ, int KV>
__device__ __forceinline__ void sddmm_row(const Seg* segs, int nseg, const SegRun* seg_runs, const Item* tab_items,
                                          const int* table, i64 off_word, i64 nnz, float scale, const T* q,
                                          const T* k, float* scores) {
  __shared__ i64 rs[kMaxRowRuns], rst[kMaxRowRuns], rc[kMaxRowRuns], rpre[kMaxRowRuns + 1];
  __shared__ float qs[HD];
  __shared__ i64 row_s;
  __shared__ int n_s;
  if (threadIdx.x == 0) {
    i64 row;
    n_s = row_runs(segs, nseg, seg_runs, tab_items, table, row, rs, rst, rc, rpre);
    row_s = row;
  }
  __syncthreads();
  const i64 bh = blockIdx.y, row = row_s;
  const int n = n_s;
  for (int x = threadIdx.x; x < HD; x += blockDim.x) qs[x] = to_f(q[(bh * SEQ + row) * HD + x]);
  __syncthreads();
  const i64* offs = reinterpret_cast<const i64*>(table + off_word);
  float* out = scores + bh * nnz + offs[row];
  const i64 total = rpre[n];
  for (i64 s = threadIdx.x; s < total; s += blockDim.x) {
    int r = 0;
    while (rpre[r + 1] <= s) ++r;
    const i64 j = rs[r] + (s - rpre[r]) * rst[r];
    const T* kr = k + (bh * KV + j) * HD;
    float dot = 0.f;
#pragma unroll 4
    for (int x = 0; x < HD; x += 4) {
      float kv[4];
      load4(kr + x, kv);
      dot = fmaf(qs[x], kv[0], fmaf(qs[x + 1], kv[1], fmaf(qs[x + 2], kv[2], fmaf(qs[x + 3], kv[3], dot))));
    }
    out[s] = dot * scale;
  }
}

__device__ __forceinline__ float block_reduce(float v, bool is_max, float* red) {
  for (int o = 16; o > 0; o >>= 1) {
    float u = __shfl_xor_sync(0xffffffffu, v, o);
    v = is_max ? fmaxf(v, u) : v + u;
  }
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < (int)(blockDim.x >> 5); ++w) r = is_max ? fmaxf(r, red[w]) : r + red[w];
  return r;
}

template <int SEQ>
__device__ __forceinline__ void softmax_row(const Seg* segs, int nseg, const int* table, i64 off_word, i64 nnz,
                                            float* scores) {
  __shared__ float red[32];
  int lo = 0, hi = nseg - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) >> 1;
    if (segs[mid].first_block <= (int)blockIdx.x) lo = mid; else hi = mid - 1;
  }
  const i64 row = segs[lo].row_begin + segs[lo].row_stride * (i64)(blockIdx.x - segs[lo].first_block);
  const i64* offs = reinterpret_cast<const i64*>(table + off_word);
  const i64 b = offs[row], n = offs[row + 1] - b;
  float* s = scores + (i64)blockIdx.y * nnz + b;
  float mx = neg_inf();
  for (i64 x = threadIdx.x; x < n; x += blockDim.x) mx = fmaxf(mx, s[x]);
  mx = block_reduce(mx, true, red);
  float sum = 0.f;
  for (i64 x = threadIdx.x; x < n; x += blockDim.x) sum += __expf(s[x] - mx);
  sum = block_reduce(sum, false, red);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (i64 x = threadIdx.x; x < n; x += blockDim.x) s[x] = __expf(s[x] - mx) * inv;
}

template <class T, int HD, int SEQ, int KV>
__device__ __forceinline__ void spmm_row(const Seg* segs, int nseg, const SegRun* seg_runs, const Item* tab_items,
                                         const int* table, i64 off_word, i64 nnz, const float* probs, const T* v,
                                         T* o) {
  constexpr int G = 128 / HD > 0 ? 128 / HD : 1;  // slot groups per block
  __shared__ i64 rs[kMaxRowRuns], rst[kMaxRowRuns], rc[kMaxRowRuns], rpre[kMaxRowRuns + 1];
  __shared__ float part[128];
  __shared__ i64 row_s;
  __shared__ int n_s;
  if (threadIdx.x == 0) {
    i64 row;
    n_s = row_runs(segs, nseg, seg_runs, tab_items, table, row, rs, rst, rc, rpre);
    row_s = row;
  }
  __syncthreads();
  const i64 bh = blockIdx.y, row = row_s;
  const int n = n_s;
  const i64* offs = reinterpret_cast<const i64*>(table + off_word);
  const float* p = probs + bh * nnz + offs[row];
  for (int d0 = 0; d0 < HD; d0 += 128 / G) {
    const int dim = d0 + (int)threadIdx.x % (128 / G), grp = (int)threadIdx.x / (128 / G);
    float acc = 0.f;
    if (dim < HD) {
      for (int r = 0; r < n; ++r)
        for (i64 x = grp; x < rc[r]; x += G)
          acc = fmaf(p[rpre[r] + x], to_f(v[(bh * KV + rs[r] + x * rst[r]) * HD + dim]), acc);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    if (grp == 0 && dim < HD) {
      float sum = 0.f;
      for (int gg = 0; gg < G; ++gg) sum += part[gg * (128 / G) + threadIdx.x];
      o[(bh * SEQ + row) * HD + dim] = from_f<T>(sum);
    }
    __syncthreads();
  }
}
)CUDA";
}

}  // namespace

const std::string& device_code() {
  static const std::string text =
      std::string(device_common()) + engine_mma() + engine_wgmma() + engine_tf32() + engine_tf32x3() + engine_simt() +
      device_driver();
  return text;
}

}  // namespace splat
