// The online softmax every engine runs (FlashAttention-2 scheme): the rows' running max and sum, the
// rescale to a new max, the final normalisation, and the state's layout in the fused workspaces (the
// hand-over between passes and the split-KV slots that fused_combine merges).
#pragma once
#include "splat/common.cuh"

// ---- softmax state in the fused workspaces ----
// Every row's unnormalised O (rows of hd floats per head, heads gridDim.y), then every row's (m, l).
// The pass hand-over holds seq_len rows per head, the split-KV slots slots * 64 (fused_combine and
// end_partial index those directly, by slot row).
// Row r of head bh's (m, l) in the hand-over.
template <class F> __device__ __forceinline__ F* state_ml(F* ws, i64 rows, int hd, i64 bh, i64 r) {
  return ws + (i64)gridDim.y * rows * hd + (bh * rows + r) * 2;
}
// Slot row of tile row r of split-KV slot `slot` (head bh, nslots slots per head): its O row is at
// wsplit + row * hd, its (m, l) at split_ml(wsplit, nslots, hd, row).
__device__ __forceinline__ i64 split_row(i64 bh, int nslots, int slot, int r) { return (bh * nslots + slot) * 64 + r; }
template <class F> __device__ __forceinline__ F* split_ml(F* wsplit, int nslots, int hd, i64 row) {
  return wsplit + (i64)gridDim.y * nslots * 64 * hd + row * 2;
}
// The split partials' region: after the pass-to-pass state (gridDim.y * SEQ * (HD + 2) floats),
// from the next multiple of 4 floats, as the fp32 engines store their O rows as float4 (that
// state's size is 8 mod 16 bytes when gridDim.y * SEQ is odd). codegen's workspace_floats counts
// the 4 floats.
template <int SEQ, int HD, class F> __device__ __forceinline__ F* split_region(F* ws) {
  return ws + (((i64)gridDim.y * SEQ * (HD + 2) + 3) & ~(i64)3);
}

// The exponents' reference for a running max m: m, or 0 for a row with no kept key yet (m = -inf),
// so that exp2(-inf - ref) = 0 rather than NaN.
__device__ __forceinline__ float softmax_ref(float m) { return m == neg_inf() ? 0.f : m; }

// The running state of a thread's ROWS row slots, each row spread over LANES lanes: m[h], the row's
// max so far (log2 units, scaled) and the exponents' reference; l[h], this lane's part of the row's
// sum of exp2(s - m) until reduce() sums the row's lanes. O (the engine's accumulators) shares m.
// FAST_RCP: the normalisation by the special function unit's reciprocal (1 ulp), else IEEE division.
template <int ROWS, int LANES, bool FAST_RCP = true>
struct OnlineSoftmax {
  float m[ROWS], l[ROWS];

  // A fresh state (first), or the one handed over in ws for rows row[h] (< 0: padding rows); the
  // row's sum goes to the first of its lanes.
  template <int SEQ, int HD>
  __device__ __forceinline__ void init_state(const i64* row, i64 bh, bool first, const float* ws) {
    const int lane = threadIdx.x % LANES;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      m[h] = neg_inf();
      l[h] = 0.f;
      if (!first && row[h] >= 0) {
        const float* ml = state_ml(ws, SEQ, HD, bh, row[h]);
        m[h] = ml[0];
        l[h] = lane == 0 ? ml[1] : 0.f;  // l is summed over the lanes of a row at the end
      }
    }
  }

  // Row h to the max of its state and mx (a tile's scaled row max): returns O's and l's factor
  // alpha = exp2(m_old - ref) and the new reference in ref.
  __device__ __forceinline__ float rebase(int h, float mx, float& ref) {
    const float m_new = fmaxf(m[h], mx);
    ref = softmax_ref(m_new);
    const float alpha = fast_exp2(m[h] - ref);
    m[h] = m_new;
    return alpha;
  }

  // 1 / (a row's sum), 0 for a row with no kept key.
  __device__ __forceinline__ static float inverse(float lsum) {
    if constexpr (FAST_RCP)
      return lsum > 0.f ? fast_rcp(lsum) : 0.f;
    else
      return lsum > 0.f ? 1.f / lsum : 0.f;
  }

  // Each row's sum over its lanes (every lane gets it); then the state can be normalised or stored.
  __device__ __forceinline__ void reduce() {
#pragma unroll
    for (int h = 0; h < ROWS; ++h) l[h] = lane_sum<LANES>(l[h]);
  }
  // This thread's lane among its rows' LANES (0: the one that stores their (m, l)).
  __device__ __forceinline__ static int row_lane() { return threadIdx.x % LANES; }
  // Row h's (m, l) to ml (after reduce()).
  __device__ __forceinline__ void store_ml(float* ml, int h) const {
    ml[0] = m[h];
    ml[1] = l[h];
  }
};

// ---- the end of a row tile, for an engine E whose state is an OnlineSoftmax (reduced here) ----
// E provides slot(h) (the tile row of row slot h), store_o(h, dst, inv, lane) (row h of O times inv,
// in the output type, to the row at dst) and store_acc(h, dst, lane) (row h of O as it is, fp32);
// lane: row_lane().
// Partial state of a split-KV chunk: O rows and (m, l) of slot split_slot's rows.
template <class E>
__device__ __forceinline__ void softmax_end_partial(E& e, i64 bh, int nslots, int split_slot, float* wsplit, int hd) {
  const int lane = E::row_lane();
  e.reduce();
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const i64 r = split_row(bh, nslots, split_slot, E::slot(h));
    e.store_acc(h, wsplit + r * hd, lane);
    if (lane == 0) e.store_ml(split_ml(wsplit, nslots, hd, r), h);
  }
}
// Rows row[h] (< 0: padding): normalised O (last pass), or the state handed over in ws.
template <class E, int SEQ, int HD, class T>
__device__ __forceinline__ void softmax_end(E& e, const i64* row, const Head& hv, bool last, T* o, float* ws) {
  const i64 bh = hv.bh;
  const int lane = E::row_lane();
  e.reduce();
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const i64 i = row[h];
    if (i < 0) continue;
    if (last) {
      e.store_o(h, o + (head_q0<SEQ>(hv) + i * kQStep) * HD, e.inverse(e.l[h]), lane);
      if (lane == 0) store_lse<SEQ>(hv, i, softmax_ref(e.m[h]), e.l[h]);
    } else {
      e.store_acc(h, ws + (bh * SEQ + i) * HD, lane);
      if (lane == 0) e.store_ml(state_ml(ws, SEQ, HD, bh, i), h);
    }
  }
}
