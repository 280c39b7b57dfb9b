// The lattice driver (Plan::lattice): the second pass of a window plus a key lattice.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"
#include "splat/engine_traits.cuh"

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

template <class E, class T, int SEQ, int HD, int P, int HLO, int HHI, bool PDL = false>
__device__ __forceinline__ void lattice_pass(float scale_log2, const T* q, const T* k, const T* v, T* o, float* ws,
                                             float* lse, const void* tmaps) {
  static_assert(UsesTma<E>::value, "stride-P key tiles: TMA boxes");
  static_assert(SEQ % P == 0, "every phase has M rows");
  constexpr int M = SEQ / P, TPP = (M + 63) / 64, S = E::STAGES, LA = S - 1;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  // Block n: row tile n % TPP of group n / TPP (head bh, phase c); consecutive blocks share keys.
  const i64 n = blockIdx.x + (i64)gridDim.x * blockIdx.y, g = n / TPP;
  const int t = (int)(n % TPP), ph = (int)(g % P);
  const i64 bh = g / P;
  static_assert(!SPLAT_VARLEN, "a lattice of one square head");
  const Head hv = make_head<SEQ, SEQ>(bh, nullptr, lse);
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
  e.begin(smem_raw, q, k, v, row, hv, true, ws);  // a fresh state, merged with the first pass's at the end
  cp_async_commit();  // Q's copies (QS), waited for before the first key tile (wait_stage)
  e.tma_setup(tmaps, hv);
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
    // Full: inside the keys, and no row's hole in the tile: geometry.cuh's lattice_key_tile_full,
    // written out (called, its && compiles to selects instead of this loop's branch).
    const bool full = u0 + 63 < M && (HLO > HHI || u0 - m_last > HHI || u0 + 63 - m_first < HLO);
    const LatticeMask<M, HLO, HHI> keep = {u0, m0};
    // The checked softmax's vote (first = -1) sends a warp with a row that has no reference yet to
    // the exact step: every warp on the first tile, later ones whose rows had no kept key before
    // (the hole, padding rows).
    float s[1][8][4];
    e.s_wait(buf, s);  // also the previous tile's P.V: its stage may be refilled now
    if (c + LA < TPP) e.template tma_load_step<P>(lbuf, w, u0 + 64 * LA);
    e.s_finish(buf, s, full, scale_log2, keep, -1);
    if (++buf == S) {
      buf = 0;
      parity ^= 1u;
    }
  }
  e.pv_done();
  if constexpr (PDL) pdl_wait();  // a programmatic launch: the window's kernel has completed from here on
  e.merge_state(row, bh, ws);
  e.end_band(ph + P * m_first, P, min(64, M - m_first), hv, o);
}
