// The band driver (Plan::band): closed-form row and key tiles, TMA stages, no tables.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"
#include "splat/engine_traits.cuh"
#include "splat/geometry.cuh"

// ================================================================================================
// Band driver (Plan::band: row i keeps keys i + D*k, KLO <= k <= KHI, within [0, SEQ); SEQ == KV,
// a multiple of D): everything a row tile needs is a closed form of its block index, so there are
// no tables to read before the first key tile (the table driver's start-up read ~300 instructions
// and three dependent loads per block; ncu: a fifth of the window kernel's stall samples). Rows of
// phase ph are ph + D*m, keys ph + D*u (m, u < M = SEQ / D); row tile t holds m in [64t, 64t + 64)
// and walks key tiles of 64 from u = 64t + KLO (the grid covers every head, phase and t). TMA
// stages only: key tiles reach below u = 0 or past M (their boxes hold other heads' keys or zeros,
// all masked).
// The tiles are geometry.cuh's band_key_tiles, as plan.cpp's band_tile and the CPU model's walk.
// ================================================================================================
// The band kernel's mask of one key tile for this thread's rows m0 and m0 + 8 (keep(h, c): row
// m0 + 8h keeps key u0 + c). A tile cut by one edge of the band only, with every row and key inside
// the sequence (the two edge tiles of an interior row tile), masks by one comparison per score
// against a constant of its position: keep iff c - 8h >= KLO - u0 + m0 (lower edge) or <= KHI - u0 + m0
// (upper edge). Every other masked tile tests all four bounds (tile(): TileMask). band_pass's EMASK
// selects the one-sided forms (codegen: for dilated bands; on the H200 they made the dilated kernel
// ~1% faster, and the unit-step windows slower: ptxas spilled 12 bytes in the window kernel).
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

// A band block's start (band_pass, band_pass_varlen): the engine's begin on the block's rows, Q's
// copies (QS) as a commit group of their own (waited for before the first key tile, wait_stage),
// and the TMA stage barriers.
template <class E, class T>
__device__ __forceinline__ void band_start(E& e, unsigned char* smem, const T* q, const T* k, const T* v, const i64* row,
                                           const Head& hv, float* ws, const void* tmaps) {
  e.begin(smem, q, k, v, row, hv, true, ws);
  cp_async_commit();
  e.tma_setup(tmaps, hv);
}

// G > 0: a band with G global tokens (Plan: Band::globals; D == 1). The first row tile (the global
// rows) is the plan's table pass's, so its block returns; every other row tile computes its band
// tiles and then, where some row keeps a global key outside its window (band_global_tile), one
// key tile of keys [0, 64) masked to those (last: the band's first tile still holds every row's
// first kept key, which the checked softmax's exact step relies on).
// B0, BX: the band's blocks are blockIdx.x in [B0, B0 + BX) of a grid shared with a table pass
// (BX = 0: the whole grid).
// LAST = false: the first pass of a window plus a lattice (Plan::lattice): hands its softmax state
// over through ws instead of writing O.
template <class E, class T, int SEQ, int HD, int D, int KLO, int KHI, bool EMASK = false, int G = 0, int B0 = 0, int BX = 0,
          bool LAST = true>
__device__ __forceinline__ void band_pass(float scale_log2, const T* q, const T* k, const T* v, T* o, float* ws,
                                          float* lse, const void* tmaps, i64 nb = -1) {
  static_assert(UsesTma<E>::value, "band tiles start at any key: TMA boxes");
  constexpr int M = SEQ / D, TPP = (M + 63) / 64, S = E::STAGES, LA = S - 1;
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
  static_assert(!SPLAT_VARLEN, "a band of one square head");
  const Head hv = make_head<SEQ, SEQ>(bh, nullptr, lse);
  const int m_first = 64 * t, m_last = min(64 * t + 63, M - 1);
  const splat::geometry::BandKeyTiles<int> tiles = splat::geometry::band_key_tiles<int>(m_first, m_last, M, KLO, KHI);
  const int u_start = tiles.u_start, first = tiles.first, count = tiles.count;
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
  band_start(e, smem_raw, q, k, v, row, hv, ws, tmaps);
  const WalkD w = {ph, D, 0, 0, 0, 0};  // keys ph + D*u (the engine adds the head's first key row)
  // The band's tiles, then (G > 0) the global keys' tile where some row keeps one outside its window.
  const bool gtile = G > 0 && splat::geometry::band_global_key_tile<int>(m_first, m_last, KLO, KHI, G);
  const int total = count + (gtile ? 1 : 0);
#pragma unroll
  for (int p = 0; p < LA; ++p)
    if (p < total) e.load(p, w, G > 0 && p >= count ? 0 : u_start + 64 * (first + p));
  __syncthreads();  // the stage barriers thread 0 initialised
  // Stage of key tile c (c % S) and its barrier's phase parity ((c / S) & 1), counted along (the
  // divisions by S cost a tenth of the loop's issue slots); tile c + LA refills stage (buf + LA) % S.
  // Loop state in the tiles' own count c: first key u_first + 64c, no mask for c in [fb, fe).
  const int u_first = u_start + 64 * first, fb = tiles.full_begin - first, fe = tiles.full_end - first;
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
    // The tile's S is issued while the previous tile's P.V may still run; one wait covers both.
    float s[1][8][4];
    e.s_wait(buf, s);  // also the previous tile's P.V: its stage may be refilled now
    if (c + LA < total) e.load(lbuf, w, G > 0 && c + LA >= count ? 0 : u0 + 64 * LA);
    // Every row's first kept key is in the row tile's first key tile (rows keep one contiguous run
    // from max(0, m + KLO), and the walk starts at the tile holding the lowest), so the checked
    // softmax takes the exact step there and needs no vote on missing references after it.
    e.s_finish(buf, s, full, scale_log2, keep, c == 0 ? 1 : 0);
    if (++buf == S) {
      buf = 0;
      parity ^= 1u;
    }
  }
  e.pv_done();
  if (total == 0) cp_async_wait<0>();  // no key tile (a one-sided band's last rows): Q's copies (QS)
  if constexpr (StagedEnd<E>::value && LAST)
    e.end_band(ph + D * m_first, D, min(64, M - m_first), hv, o);
  else
    e.end(row, hv, LAST, o, ws);
}

// ================================================================================================
// A packed batch's band (SPLAT_VARLEN; Plan::band with D == 1): block (t, y) is row tile t of the
// sequence and head of grid row y (Head, from cu_seqlens), and returns at once when its first row is
// at or past the sequence's length L. Rows m < L keep keys u < L with KLO <= u - m <= KHI; the key
// tiles are band_key_tiles over L rows, each one TMA box per operand and column block from the packed
// K and V's [tokens][kv_heads][head_dim] view (WgmmaEngine's varlen maps), moved down to start at
// L - 64 where it would reach past L (band_box_start), its keys below the tile's first masked then.
// Rows keep one run each, from the row tile's first key tile on, so the checked softmax takes the
// exact step on that tile and votes on nothing after it, as band_pass.
// ================================================================================================
template <int KLO, int KHI>
struct SeqBandMask {
  static constexpr bool TILE_MASK = true;
  int ub, ulo, len, m0;  // the box's first key, the tile's first (at least 0), the sequence's length, row m0
  __device__ __forceinline__ bool operator()(int h, int c) const {
    const int u = ub + c, m = m0 + 8 * h;
    return m < len && u >= ulo && u < len && u - m >= KLO && u - m <= KHI;
  }
  __device__ __forceinline__ void tile(float (&s)[8][4]) const {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        if (!(*this)(e >> 1, n * 8 + 2 * t4 + (e & 1))) s[n][e] = neg_inf();
  }
};

template <class E, class T, int SEQ, int HD, int KLO, int KHI>
__device__ __forceinline__ void band_pass_varlen(float scale_log2, const T* q, const T* k, const T* v, T* o, float* ws,
                                                 float* lse, const void* tmaps, const int* cu_seqlens) {
  static_assert(UsesTma<E>::value && SPLAT_VARLEN, "a packed batch's band: TMA boxes of the packed K and V");
  constexpr int S = E::STAGES, LA = S - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const Head hv = make_head<SEQ, SEQ>(blockIdx.y, cu_seqlens, lse);
  const int len = hv.len, m_first = 64 * (int)blockIdx.x;
  if (m_first >= len) return;  // no row of this sequence
  const int m_last = min(m_first + 63, len - 1);
  const splat::geometry::BandKeyTiles<int> tiles = splat::geometry::band_key_tiles<int>(m_first, m_last, len, KLO, KHI);
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const int m = m_first + E::slot(h);
    row[h] = m < len ? m : -1;
  }
  static_assert(E::ROWS == 2, "one warpgroup: rows slot(0) and slot(0) + 8");
  const int m0 = m_first + E::slot(0);
  E e;
  band_start(e, smem_raw, q, k, v, row, hv, ws, tmaps);
  const WalkD w = {0, 1, 0, 0, 0, 0};  // keys u (the engine adds the sequence's first token)
  const int total = tiles.count, u_first = tiles.u_start + 64 * tiles.first;
  const int fb = tiles.full_begin - tiles.first, fe = tiles.full_end - tiles.first;
  auto box = [&](int c) { return splat::geometry::band_box_start<int>(u_first + 64 * c, len); };
#pragma unroll
  for (int p = 0; p < LA; ++p)
    if (p < total) e.load(p, w, box(p));
  __syncthreads();  // the stage barriers thread 0 initialised
  int buf = 0;
  u32 parity = 0;
  for (int c = 0; c < total; ++c) {
    e.wait_stage(buf, parity, c == 0);
    const int u0 = u_first + 64 * c, lbuf = buf + LA < S ? buf + LA : buf + LA - S;
    const SeqBandMask<KLO, KHI> keep = {box(c), max(u0, 0), len, m0};
    float s[1][8][4];
    e.s_wait(buf, s);  // also the previous tile's P.V: its stage may be refilled now
    if (c + LA < total) e.load(lbuf, w, box(c + LA));
    e.s_finish(buf, s, c >= fb && c < fe, scale_log2, keep, c == 0 ? 1 : 0);
    if (++buf == S) {
      buf = 0;
      parity ^= 1u;
    }
  }
  e.pv_done();
  if (total == 0) cp_async_wait<0>();  // no key tile (a one-sided band's last rows): Q's copies (QS)
  if constexpr (StagedEnd<E>::value)
    e.end_band(m_first, 1, m_last - m_first + 1, hv, o);
  else
    e.end(row, hv, true, o, ws);
}
