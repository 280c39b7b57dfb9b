// The decode driver: few query rows (decode, short chunks of prefill) against long rows of keys, on
// CUDA cores, over the plan's tables (the fused pass's tiles, groups, walks and items).
//
// A block serves one row tile (or one split-KV chunk of it) for all G query heads of one K/V head:
// each key is read once per group instead of once per query head, and the block's NR = rows * G
// (query head, row) pairs share it. grid.y stays batch*heads (the module's one grid.y): block
// (x, y) takes plan tile x*G + y%G for K/V head y/G, so the G blocks of a group take G different
// tiles (the plan splits with batch*kv_heads blocks in mind) and every block x*G + y%G past the
// last tile returns at once.
//
// The NW warps walk the tile's key stream (every walk of every group, in 32-key steps) taking every
// NW-th step: no block barrier per step. In a step, lane c holds key u0 + c: its K row from global
// memory (16-byte loads), its NR scores against Q (in shared memory, broadcast), its mask per row
// (the rows' runs, as the fused pass's masks), then each (head, row)'s online softmax over the 32
// keys (warp max) and P.V with the lane's output column pairs, P read back from shared memory. The
// warps' states are merged through shared memory at the end, and the block writes O (and the
// log-sum-exp), or a split chunk's partial state for fused_combine.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"
#include "splat/online_softmax.cuh"
#include "splat/runs.cuh"
#include "splat/geometry.cuh"

// Element pairs: the 16-bit types as one 32-bit word, fp32 as a float2.
template <class T> struct DecodePair { typedef u32 type; };
template <> struct DecodePair<float> { typedef float2 type; };
// A pair as two floats.
template <class T> __device__ __forceinline__ void pair_f(typename DecodePair<T>::type w, float& a, float& b) {
  if constexpr (sizeof(T) == 4) {
    a = w.x, b = w.y;
  } else {
    T lo, hi;
    lo.x = (u16)(w & 0xffff);
    hi.x = (u16)(w >> 16);
    a = to_f(lo), b = to_f(hi);
  }
}
// Pair e of a 16-byte chunk of T (E = 16 / sizeof(T) elements), by its 32-bit words: no pointer
// casts between the chunk and the pair types (the host compilers that run this code on the CPU,
// tests/device, optimise such type puns away).
template <class T> __device__ __forceinline__ void chunk_pair(const uint4& r, int e, float& a, float& b) {
  if constexpr (sizeof(T) == 4) {
    a = __uint_as_float(e == 0 ? r.x : r.z);
    b = __uint_as_float(e == 0 ? r.y : r.w);
  } else {
    pair_f<T>(e == 0 ? r.x : e == 1 ? r.y : e == 2 ? r.z : r.w, a, b);
  }
}

// Whether row h keeps walk unit u (its group's runs in walk units, or a tabulated group's runs, or
// the plan's global keys): the fused pass's masks (compute_key_tile) for one score.
template <int DR, int R, int GTAB, int GROWS>
struct DecodeMask {
  const WalkD& w;
  int tabulated;
  bool modular;
  const int* truns;
  const int (&tb)[DR];
  const int (&te)[DR];
  const int (&lo)[DR][R];
  const int (&hi)[DR][R];
  const int (&md)[DR][R];
  __device__ __forceinline__ bool operator()(int h, int u) const {
    if (u >= w.count) return false;
    if (GTAB >= 0 && tabulated == 2) return GROWS < 0 || w.base - GTAB + u < tb[h];
    if (truns == nullptr) {
      bool kp = false;
#pragma unroll
      for (int r = 0; r < R; ++r)
        kp = kp || (u >= lo[h][r] && u < hi[h][r] && (!modular || md[h][r] == 1 || (u - lo[h][r]) % md[h][r] == 0));
      return kp;
    }
    const int j = w.base + u * w.step;
    bool kp = false;
    for (int r = tb[h]; r < te[h] && !kp; ++r) {
      const int d = j - truns[3 * r], st = truns[3 * r + 1];
      kp = d >= 0 && d <= (truns[3 * r + 2] - 1) * st && (st == 1 || d % st == 0);
    }
    return kp;
  }
};

// One warp's running state: NR (row, head) pairs, each lane holding DP column pairs of O; and its
// steps' K and V rows in shared memory (kst, vst: [32][LD] elements each).
template <class T, int HD, int NR, int NW>
struct DecodeWarp {
  static constexpr int EPC = 16 / (int)sizeof(T), DP = (HD / 2 + 31) / 32, NCH = HD / EPC, LD = HD + EPC;
  float m[NR], l[NR], acc[NR][DP][2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      m[n] = neg_inf();
      l[n] = 0.f;
#pragma unroll
      for (int c = 0; c < DP; ++c) acc[n][c][0] = acc[n][c][1] = 0.f;
    }
  }

  // The K and V rows of the 32 lanes' keys (lane c's `key`; -1: none, zero rows) into kst and vst
  // by cp.async, one commit group. The warp's copies go row-major over the 32 x NCH 16-byte chunks
  // (consecutive lanes, consecutive chunks of a row), so that consecutive keys are read coalesced.
  __device__ __forceinline__ void stage(T* kst, T* vst, const T* kh, const T* vh, int key) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int i = 0; i < NCH; ++i) {
      const int x = i * 32 + lane, row = x / NCH, ch = x % NCH;
      const int kj = __shfl_sync(0xffffffffu, key, row);
      const i64 off = (i64)(kj >= 0 ? kj : 0) * HD + ch * EPC;
      cp_async16(kst + row * LD + ch * EPC, kh + off, kj >= 0 ? 16 : 0);
      cp_async16(vst + row * LD + ch * EPC, vh + off, kj >= 0 ? 16 : 0);
    }
    cp_async_commit();
  }

  // A staged step: lane c's key (live: it has one) against the NR pairs' Q rows (qs: [NR][HD] floats,
  // times scale*log2(e)), keep[r] its mask per tile row (pair n = r * G + g), each pair's online
  // softmax over the 32 keys (warp max), then P.V with the lane's column pairs, P through pw (this
  // warp's [32][NR] floats).
  template <int G>
  __device__ __forceinline__ void step(const T* kst, const T* vst, bool live, const bool* keep, const float* qs, float* pw) {
    const int lane = threadIdx.x & 31;
    typedef typename DecodePair<T>::type P;
    float s[NR];
#pragma unroll
    for (int n = 0; n < NR; ++n) s[n] = 0.f;
    if (live) {
      const T* kr = kst + lane * LD;
#pragma unroll
      for (int c = 0; c < NCH; ++c) {
        const uint4 raw = load_as<uint4>(kr + c * EPC);
#pragma unroll
        for (int e = 0; e < EPC / 2; ++e) {
          float a, b;
          chunk_pair<T>(raw, e, a, b);
#pragma unroll
          for (int n = 0; n < NR; ++n) {
            const float2 qq = load_as<float2>(qs + n * HD + c * EPC + 2 * e);
            s[n] = fmaf(qq.x, a, fmaf(qq.y, b, s[n]));
          }
        }
      }
    }
#pragma unroll
    for (int n = 0; n < NR; ++n) {
      const float sc = keep[n / G] ? s[n] : neg_inf();
      float mx = sc;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      const float m_new = fmaxf(m[n], mx), ref = softmax_ref(m_new), alpha = fast_exp2(m[n] - ref);
      m[n] = m_new;
      const float p = fast_exp2(sc - ref);
      l[n] = l[n] * alpha + p;
#pragma unroll
      for (int c = 0; c < DP; ++c) acc[n][c][0] *= alpha, acc[n][c][1] *= alpha;
      pw[lane * NR + n] = p;
    }
    __syncwarp();
#pragma unroll
    for (int c = 0; c < DP; ++c) {
      const int col = 2 * (lane + 32 * c);
      if (HD % 64 != 0 && col >= HD) continue;
#pragma unroll 8
      for (int j = 0; j < 32; ++j) {
        float a, b;
        pair_f<T>(load_as<P>(vst + j * LD + col), a, b);
#pragma unroll
        for (int n = 0; n < NR; ++n) {
          const float p = pw[j * NR + n];
          acc[n][c][0] = fmaf(p, a, acc[n][c][0]);
          acc[n][c][1] = fmaf(p, b, acc[n][c][1]);
        }
      }
    }
    __syncwarp();
  }
};

// The block's Q rows: pair n = r * G + g is tile row r (rows[r] < 0: none, zeros) of query head
// qy0 + g, copied as they are into qraw ([NR][HD] elements) by cp.async (one commit group), so
// that the copies overlap the reads of the tile's tables; decode_q_ready converts them.
template <class T, int SEQ, int HD, int G, int DR>
__device__ __forceinline__ void decode_stage_q(T* qraw, const T* q, i64 qy0, const i64 (&rows)[DR]) {
  constexpr int EPC = 16 / (int)sizeof(T), NCH = HD / EPC;
  for (int x = threadIdx.x; x < DR * G * NCH; x += blockDim.x) {
    const int n = x / NCH, ch = x % NCH, r = n / G, g = n % G;
    const i64 row = rows[r] < 0 ? 0 : (q_head(qy0 + g) * SEQ + rows[r]) * HD;
    cp_async16(qraw + n * HD + ch * EPC, q + row + ch * EPC, rows[r] < 0 ? 0 : 16);
  }
  cp_async_commit();
}
// Q as floats times scale_log2 (qs: [NR][HD]) once every thread's copies have landed.
template <class T, int NR, int HD>
__device__ __forceinline__ void decode_q_ready(float* qs, const T* qraw, float scale_log2) {
  cp_async_wait<0>();
  __syncthreads();
  for (int x = threadIdx.x; x < NR * HD; x += blockDim.x) qs[x] = to_f(qraw[x]) * scale_log2;
  __syncthreads();
}

// The warps' states merged (max, then sums rescaled to it); O (last pass) or the split chunk's
// partial state (slot split_slot) for each (row, head).
template <class T, int SEQ, int HD, int G, int DR, int NW, int NSLOTS>
__device__ __forceinline__ void decode_merge_store(const DecodeWarp<T, HD, DR * G, NW>& st, float* sm, const TileD& tile,
                                                   const i64 (&rows)[DR], i64 qy0, T* o, float* ws, float* lse) {
  constexpr int NR = DR * G, DP = DecodeWarp<T, HD, NR, NW>::DP;
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  float* sm_m = sm;                 // [NW][NR]
  float* sm_l = sm + NW * NR;       // [NW][NR]
  float* sm_o = sm + 2 * NW * NR;   // [NW][NR][HD]
#pragma unroll
  for (int n = 0; n < NR; ++n) {
    const float l = lane_sum<32>(st.l[n]);
    if (lane == 0) sm_m[wid * NR + n] = st.m[n], sm_l[wid * NR + n] = l;
#pragma unroll
    for (int c = 0; c < DP; ++c) {
      const int col = 2 * (lane + 32 * c);
      if (col < HD) sm_o[(wid * NR + n) * HD + col] = st.acc[n][c][0], sm_o[(wid * NR + n) * HD + col + 1] = st.acc[n][c][1];
    }
  }
  __syncthreads();
  float* wsplit = NSLOTS > 0 ? split_region<SEQ, HD>(ws) : nullptr;
  for (int x = threadIdx.x; x < NR * HD; x += blockDim.x) {
    const int n = x / HD, d = x % HD, r = n / G, g = n % G;
    if (rows[r] < 0) continue;
    float M = neg_inf();
#pragma unroll
    for (int w = 0; w < NW; ++w) M = fmaxf(M, sm_m[w * NR + n]);
    const float ref = softmax_ref(M);
    float L = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < NW; ++w) {
      const float f = fast_exp2(sm_m[w * NR + n] - ref);
      L += sm_l[w * NR + n] * f;
      acc += sm_o[(w * NR + n) * HD + d] * f;
    }
    const i64 qy = qy0 + g;
    if (NSLOTS > 0 && tile.split_slot >= 0) {
      const i64 srow = split_row(qy, NSLOTS, tile.split_slot, r);
      wsplit[srow * HD + d] = acc;
      if (d == 0) split_ml(wsplit, NSLOTS, HD, srow)[0] = M, split_ml(wsplit, NSLOTS, HD, srow)[1] = L;
    } else {
      o[(q_head(qy) * SEQ + rows[r]) * HD + d] = from_f<T>(L > 0.f ? acc / L : 0.f);
      if (SPLAT_LSE && d == 0 && lse != nullptr) lse[q_head(qy) * SEQ + rows[r]] = row_lse(ref, L);
    }
  }
}

// The plan's tables this pass reads (as fused_pass: tiles, groups, walks, items).
struct DecodeTables {
  const Item* items;
  const TileD* tiles;
  int n_tiles;
  const GroupD* groups;
  const WalkD* walks;
  const int *group_items, *group_rbeg, *group_pmax;
};

// One pass (the plan's only one) for DR = SEQ rows at most per tile, G query heads per K/V head,
// NW warps (launched with 32 NW threads and splat::geometry::decode_smem bytes of dynamic shared
// memory; NW = geometry::decode_warps). GTAB / GROWS as fused_pass (the plan's global keys).
template <class T, int SEQ, int KV, int HD, int PERIOD, int R, int NSLOTS, int G, int NW, int GTAB = -1, int GROWS = -1>
__device__ __forceinline__ void decode_pass(DecodeTables pt, float scale_log2, const T* q, const T* k, const T* v, T* o,
                                            float* ws, float* lse, const int* table) {
  constexpr int DR = SEQ < 64 ? SEQ : 64, NR = DR * G;
  typedef DecodeWarp<T, HD, NR, NW> Warp;
  static_assert(HD % (16 / (int)sizeof(T)) == 0 && HD % 2 == 0, "rows of whole 16-byte chunks");
  const int tix = (int)blockIdx.x * G + (int)(blockIdx.y % G);
  if (tix >= pt.n_tiles) return;
  const TileD tile = pt.tiles[tix];
  const i64 qy0 = (i64)blockIdx.y / G * G;  // the group's first query head (grid.y index)
  const i64 k0 = kv_head(q_head(qy0)) * ((i64)KV * HD);
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  // Shared memory (geometry::decode_smem): qs, qraw, every warp's pw, then every warp's stage (its
  // K rows, then its V rows), which the merge reuses.
  float* qs = reinterpret_cast<float*>(dynamic_smem());
  T* qraw = reinterpret_cast<T*>(qs + NR * HD);
  float* pw = reinterpret_cast<float*>(qraw + NR * HD) + wid * 32 * NR;
  float* sm = reinterpret_cast<float*>(qraw + NR * HD) + NW * 32 * NR;
  T* kst = reinterpret_cast<T*>(sm) + wid * 2 * 32 * Warp::LD;
  T* vst = kst + 32 * Warp::LD;
  i64 rows[DR];
#pragma unroll
  for (int r = 0; r < DR; ++r) {
    const i64 m = tile.m_begin + r;
    rows[r] = m < tile.m_end ? tile.phase + (i64)PERIOD * m : -1;
  }
  decode_stage_q<T, SEQ, HD, G, DR>(qraw, q, qy0, rows);
  bool q_ready = false;  // block-uniform
  Warp st;
  st.init();
  const int* gtable = GTAB >= 0 ? table : nullptr;
  int step = 0;  // 32-key steps of the tile's key stream so far; this warp takes step % NW == wid
  for (int gi = 0; gi < tile.group_count; ++gi) {
    const GroupD g = pt.groups[tile.group_begin + gi];
    int rs[DR][R], rst[DR][R], rc[DR][R], nr[DR], rb[DR], te[DR];
    const Item* tab = nullptr;
    const int* truns = nullptr;
#pragma unroll
    for (int h = 0; h < DR; ++h) nr[h] = rb[h] = te[h] = 0;
    if (GTAB >= 0 && g.tabulated == 2)
      global_prefix_runs<DR, GROWS>(rows, table, rb);
    else if (g.tabulated)
      tabulated_runs<DR>(g, rows, pt.items, pt.group_items, table, tab, truns, rb, te);
    else
      group_affine_runs<DR, R>(g, rows, pt.items, pt.group_items, pt.group_rbeg, pt.group_pmax, nullptr, false, rs, rst, rc, nr);
    for (int wi = 0; wi < g.walk_count; ++wi) {
      const WalkD w = pt.walks[g.walk_begin + wi];
      int lo[DR][R], hi[DR][R], md[DR][R];
      walk_run_bounds<DR, R, false>(w, nr, rs, rst, rc, lo, hi, md);
      const DecodeMask<DR, R, GTAB, GROWS> mask{w, g.tabulated, w.modular != 0, truns, rb, te, lo, hi, md};
      const int nsteps = (w.count + 31) / 32;
      const int first = (wid - step % NW + NW) % NW;
      // The first step's rows are on their way before Q is converted (the block's one barrier pair).
      if (first < nsteps) {
        const int u = first * 32 + lane;
        st.stage(kst, vst, k + k0, v + k0, u < w.count ? (int)walk_key(w, u, gtable) : -1);
      }
      if (!q_ready) decode_q_ready<T, NR, HD>(qs, qraw, scale_log2), q_ready = true;
      for (int ks = first; ks < nsteps; ks += NW) {
        const int u = ks * 32 + lane;
        const bool in = u < w.count;
        if (ks != first) st.stage(kst, vst, k + k0, v + k0, in ? (int)walk_key(w, u, gtable) : -1);
        bool keep[DR];
        // The plan's full 64-key tiles: every row keeps every key there.
        const bool full = (ks >> 1) >= w.full_begin && (ks >> 1) < w.full_end;
#pragma unroll
        for (int r = 0; r < DR; ++r) keep[r] = rows[r] >= 0 && in && (full || mask(r, u));
        cp_async_wait<0>();
        __syncwarp();
        st.template step<G>(kst, vst, in, keep, qs, pw);
      }
      step += nsteps;
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp's last step read: the stages become the merge's space
  decode_merge_store<T, SEQ, HD, G, DR, NW, NSLOTS>(st, sm, tile, rows, qy0, o, ws, lse);
}
