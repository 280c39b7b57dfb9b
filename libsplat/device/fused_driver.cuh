// The fused pass driver on the plan's tables (row tiles, groups, walks).
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"
#include "splat/runs.cuh"
#include "splat/engine_traits.cuh"

// ================================================================================================
// Fused pass driver: one block per row tile; for each group of the tile, each row's runs in that
// group (closed forms) in registers, then each walk of the group in key tiles of 64 keys. A key
// tile is "full" (no mask) when every row keeps all of its keys (the plan's full_begin/end).
// R: most runs a row has in one group (from the plan).
// ================================================================================================

// One key tile of a walk (keys u0 + c) computed with its group's mask: none (NOMASK), the global
// keys (or each row's prefix of them), the rows' affine runs (modular: some run has a stride > 1),
// or a tabulated group's runs (tab, truns, tb, te).
template <int R, bool NOMASK, bool GKEYS, int GTAB, int GROWS, class E, int ROWS>
__device__ __forceinline__ void compute_key_tile(E& e, int buf, bool full, float scale_log2, const WalkD& w, int u0,
                                                 int tabulated, bool modular, const Item* tab, const int* truns,
                                                 const int (&tb)[ROWS], const int (&te)[ROWS], const int (&lo)[ROWS][R],
                                                 const int (&hi)[ROWS][R], const int (&md)[ROWS][R]) {
  if constexpr (NOMASK) {
    e.compute(buf, true, scale_log2, [](int, int) { return true; });
  } else if (GKEYS && tabulated == 2) {  // global keys: every key of the walk, or the row's prefix
    // Only keys of this walk: a split-KV chunk's part of the walk may end inside a 128-key step, whose
    // rest is the next chunk's keys (bc=128 counted them twice).
    if (GROWS >= 0)
      e.compute(buf, full, scale_log2, [&](int h, int c) { return u0 + c < w.count && w.base - GTAB + u0 + c < tb[h]; });
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
}


// A tile's items (up to kStagedItems), staged in shared memory by the whole block at once.
enum : int { kStagedItems = 32, kItemWords = (int)(sizeof(Item) / sizeof(i64)) };
__device__ __forceinline__ void stage_tile_items(const TileD& tile, const Item* items, const int* group_items, i64* words) {
  for (int x = threadIdx.x; x < tile.item_total * kItemWords; x += blockDim.x) {
    const int n = x / kItemWords;
    const int idx = n == 0 ? tile.item0 : n == 1 ? tile.item1 : n == 2 ? tile.item2 : n == 3 ? tile.item3
                                                                                  : group_items[tile.item_begin + n];
    words[x] = reinterpret_cast<const i64*>(items + idx)[x % kItemWords];
  }
}

// NOMASK: every key tile of the pass is full (Plan: pass_unmasked, e.g. BigBird's 64-key blocks):
// no run bounds in registers and no mask code (BigBird-16k's kernel: 168 registers, 200 bytes of
// spills and 3 blocks per SM with its five runs per row, for masks it never applies).
// extra: the engine's own arguments, handed to its bind() where it has one (BwdMmaEngine).
// GTAB >= 0: the pass walks the plan's global keys (a group with tabulated == 2), at table word
// GTAB; GROWS >= 0: row i keeps only the first table[GROWS + i] of them (else all).
// A packed variable-length batch (SPLAT_VARLEN): the plan is that of the longest sequence; a block
// keeps the rows and keys of its tile below its sequence's length (cu_seqlens), and a block whose
// tile starts past it returns at once.
template <class E, class T, int SEQ, int HD, int PERIOD, int R, int NSLOTS, bool FIRST, bool LAST, bool NOMASK = false,
          int GTAB = -1, int GROWS = -1>
__device__ __forceinline__ void fused_pass(const Item* items, const TileD* tiles, const GroupD* groups, const WalkD* walks,
                                           const int* group_items, const int* group_rbeg, const int* group_pmax,
                                           float scale_log2, const T* q, const T* k, const T* v,
                                           T* o, float* ws, float* lse, const int* table, const void* tmaps,
                                           const int* cu_seqlens, int tix = -1, i64 bhx = -1, const void* extra = nullptr) {
  constexpr int BC = E::BC;
  constexpr bool GKEYS = GTAB >= 0;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // The block's tile and head: (tix, bhx) where the entry orders blocks itself (chunks first), else
  // (blockIdx.x, blockIdx.y).
  const TileD tile = tiles[tix >= 0 ? tix : (int)blockIdx.x];
  const i64 bh = bhx >= 0 ? bhx : (i64)blockIdx.y;
  const Head hv = make_head<SEQ, E::KV_LEN>(bh, cu_seqlens, lse);
  if (SPLAT_VARLEN && tile.phase + (i64)PERIOD * tile.m_begin >= hv.len) return;  // no row of this sequence
  // The tile's rows below m_rows (varlen: below the sequence's length).
  const i64 m_rows = !SPLAT_VARLEN ? tile.m_end : min((i64)tile.m_end, (i64)((hv.len - tile.phase + PERIOD - 1) / PERIOD));
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const i64 m = tile.m_begin + E::slot(h);
    row[h] = m < m_rows ? tile.phase + (i64)PERIOD * m : -1;
  }
  // The plan's walks (varlen: clipped to the sequence's keys).
  auto walk_at = [&](int x) { return SPLAT_VARLEN ? clip_walk(walks[x], hv.len, table) : walks[x]; };
  // The tile's affine items, staged in shared memory by the whole block at once (all loads in
  // flight together): each thread reading them from global memory itself, through the group's
  // binary search, was a chain of up to ten dependent loads before the first key tile (ncu: a fifth
  // of the window kernel's stall samples in the start-up). Tiles with more items search as before.
  __shared__ i64 staged_words[kStagedItems * kItemWords];
  const Item* staged = reinterpret_cast<const Item*>(staged_words);
  const bool use_staged = tile.item_total <= kStagedItems;
  if (use_staged) stage_tile_items(tile, items, group_items, staged_words);
  E e;
  if constexpr (HasBind<E>::value) e.bind(extra);  // the engine's own arguments (the backward's)
  (void)extra;
  // Split chunks other than the lead start from an empty state; the lead continues the state
  // handed over by earlier passes.
  e.begin(smem_raw, q, k, v, row, hv, FIRST || (tile.split_slot >= 0 && !tile.split_lead), ws);
  if constexpr (UsesTma<E>::value) e.tma_setup(tmaps, hv);
  (void)tmaps;
  // cp.async pipeline of S stages: the tile's key tiles, over all its walks and groups, form one
  // stream; loads run LA = S - 1 tiles ahead of the computation, across walk and group boundaries
  // (so short walks, e.g. one lattice tile each, do not each wait for a load). The c-th computed
  // tile is the c-th loaded one, in stage c % S. One commit group per tile slot (empty past the end)
  // keeps the wait count uniform. The first loads are issued before the group and item tables are
  // read (a chain of dependent loads), so that their latency overlaps the run look-up.
  constexpr int S = E::STAGES, LA = S - 1;
  static_assert(S >= 2, "a load runs ahead of the computation");
  int lw = -1, lu = 0, issued = 0, computed = 0;  // load cursor: walk lw of the tile, key offset lu
  WalkD lwalk = {0, 1, 0, 0, 0, 0};
  auto next_walk = [&]() {  // the next walk with keys (the compute loop skips empty ones too)
    lu = 0;
    do {
      if (++lw >= tile.walk_total) return;
      lwalk = walk_at(tile.first_walk + lw);
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
  next_walk();
#pragma unroll
  for (int p = 0; p < LA; ++p) load_next();
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
      global_prefix_runs<E::ROWS, GROWS>(row, table, tb);
    } else if (g.tabulated) {
      tabulated_runs<E::ROWS>(g, row, items, group_items, table, tab, truns, tb, te);
    } else {
      group_affine_runs<E::ROWS, R>(g, row, items, group_items, group_rbeg, group_pmax,
                                    staged + (g.item_begin - tile.item_begin), use_staged, rs, rst, rc, nr);
    }
    for (int wi = 0; wi < g.walk_count; ++wi) {
      const WalkD w = walk_at(g.walk_begin + wi);
      // Runs in walk units: [lo, hi) with every mod-th unit kept.
      int lo[E::ROWS][R], hi[E::ROWS][R], md[E::ROWS][R];
      walk_run_bounds<E::ROWS, R, NOMASK>(w, nr, rs, rst, rc, lo, hi, md);
      // Modular masks (runs of stride > 1 walked with step 1) only where the plan says a row needs one.
      const bool modular = w.modular != 0;
      const int ntiles = (w.count + BC - 1) / BC;
      for (int kt = 0; kt < ntiles; ++kt) {
        const int buf = computed % S;
        const int u0 = kt * BC;
        if constexpr (UsesTma<E>::value) {
          e.wait_stage(buf, (u32)(computed / S) & 1u, computed == 0);
          load_next();
        } else if constexpr (EarlyWait<E>::value) {
          // This tile has landed (this thread's copies; the barrier below: all); the next load after
          // the barrier.
          cp_async_wait<LA - 1>();
          if constexpr (HasLanded<E>::value) e.landed();
        } else {
          load_next();  // into the stage freed S - LA tiles ago (all threads are past it)
          // This tile has landed (this thread's copies; the barrier below: all).
          cp_async_wait<LA>();
          if constexpr (HasLanded<E>::value) e.landed();
        }
        // Full key tiles come from the plan (every row keeps every key): no per-tile vote. The
        // plan counts 64-key tiles; an engine tile of BC = 128 keys is full when both of its are.
        constexpr int R64 = BC / 64;
        const bool full = kt * R64 >= w.full_begin && (kt + 1) * R64 <= w.full_end;
        if constexpr (!UsesTma<E>::value) __syncthreads();  // the stage is complete for every thread
        // EarlyWait (no barrier before refills): the load refills the stage the previous tile was
        // computed from, so it waits for the barrier above, which every warp passes only once done
        // with that tile. The wgmma reads are warpgroup-wide, but a warp's rare recompute of scores
        // (mma.sync, ldmatrix from the K stage) runs alone: issued before the barrier, a faster
        // warp's refill raced with it (racecheck, varlen-fixed-causal-bf16).
        if constexpr (!UsesTma<E>::value && EarlyWait<E>::value) load_next();
        compute_key_tile<R, NOMASK, GKEYS, GTAB, GROWS>(e, buf, full, scale_log2, w, u0, g.tabulated, modular, tab, truns, tb,
                                                        te, lo, hi, md);
        if (RefillBarrier<E>::value) __syncthreads();  // no thread still reads the stage the next load refills
        ++computed;
      }
    }
  }
  if constexpr (NSLOTS > 0) {
    if (tile.split_slot >= 0) return e.end_partial(bh, NSLOTS, tile.split_slot, split_region<SEQ, HD>(ws));
  }
  // The tile's rows are phase + PERIOD * m, m in [m_begin, m_end); every copy has landed.
  if constexpr (StagedEnd<E>::value && LAST)
    e.end_band((int)(tile.phase + (i64)PERIOD * tile.m_begin), PERIOD, (int)(m_rows - tile.m_begin), hv, o);
  else
    e.end(row, hv, LAST, o, ws);
}
