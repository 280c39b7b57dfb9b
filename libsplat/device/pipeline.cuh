// The three-kernel SPLAT pipeline (SDDMM, row softmax, SpMM) over compressed ACSR scores.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"

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

// The block's row and its runs (row_runs) in shared memory: thread 0 finds them, every thread reads
// them after the barrier.
struct BlockRowRuns {
  i64 rs[kMaxRowRuns], rst[kMaxRowRuns], rc[kMaxRowRuns], rpre[kMaxRowRuns + 1];
  i64 row;
  int n;
};
__device__ __forceinline__ const BlockRowRuns& block_row_runs(const Seg* segs, int nseg, const SegRun* seg_runs,
                                                              const Item* tab_items, const int* table) {
  __shared__ BlockRowRuns rr;
  if (threadIdx.x == 0) rr.n = row_runs(segs, nseg, seg_runs, tab_items, table, rr.row, rr.rs, rr.rst, rr.rc, rr.rpre);
  __syncthreads();
  return rr;
}

template <class T, int HD, int SEQ, int KV>
__device__ __forceinline__ void sddmm_row(const Seg* segs, int nseg, const SegRun* seg_runs, const Item* tab_items,
                                          const int* table, i64 off_word, i64 nnz, float scale, const T* q,
                                          const T* k, float* scores) {
  __shared__ float qs[HD];
  const BlockRowRuns& rr = block_row_runs(segs, nseg, seg_runs, tab_items, table);
  const i64 *rs = rr.rs, *rst = rr.rst, *rpre = rr.rpre;
  const i64 bh = blockIdx.y, row = rr.row;
  const int n = rr.n;
  for (int x = threadIdx.x; x < HD; x += blockDim.x) qs[x] = to_f(q[(q_head(bh) * SEQ + row) * HD + x]);
  __syncthreads();
  const i64* offs = reinterpret_cast<const i64*>(table + off_word);
  float* out = scores + bh * nnz + offs[row];
  const i64 total = rpre[n];
  for (i64 s = threadIdx.x; s < total; s += blockDim.x) {
    int r = 0;
    while (rpre[r + 1] <= s) ++r;
    const i64 j = rs[r] + (s - rpre[r]) * rst[r];
    const T* kr = k + (kv_head(q_head(bh)) * KV + j) * HD;
    float dot = 0.f;
    if constexpr (HD % 4 == 0) {  // rows of whole 8- or 16-byte vectors
#pragma unroll 4
      for (int x = 0; x < HD; x += 4) {
        float kv[4];
        load4(kr + x, kv);
        dot = fmaf(qs[x], kv[0], fmaf(qs[x + 1], kv[1], fmaf(qs[x + 2], kv[2], fmaf(qs[x + 3], kv[3], dot))));
      }
    } else {
#pragma unroll 4
      for (int x = 0; x < HD; ++x) dot = fmaf(qs[x], to_f(kr[x]), dot);
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

// lse (SPLAT_LSE, may be null): each row's natural log-sum-exp at lse[q_head(bh) * SEQ + row].
template <int SEQ>
__device__ __forceinline__ void softmax_row(const Seg* segs, int nseg, const int* table, i64 off_word, i64 nnz,
                                            float* scores, float* lse = nullptr) {
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
  if (SPLAT_LSE && lse != nullptr && threadIdx.x == 0)
    lse[q_head(blockIdx.y) * SEQ + row] = sum > 0.f ? mx + logf(sum) : neg_inf();
  for (i64 x = threadIdx.x; x < n; x += blockDim.x) s[x] = __expf(s[x] - mx) * inv;
}

template <class T, int HD, int SEQ, int KV>
__device__ __forceinline__ void spmm_row(const Seg* segs, int nseg, const SegRun* seg_runs, const Item* tab_items,
                                         const int* table, i64 off_word, i64 nnz, const float* probs, const T* v,
                                         T* o) {
  constexpr int G = 128 / HD > 0 ? 128 / HD : 1;  // slot groups per block
  __shared__ float part[128];
  const BlockRowRuns& rr = block_row_runs(segs, nseg, seg_runs, tab_items, table);
  const i64 *rs = rr.rs, *rst = rr.rst, *rc = rr.rc, *rpre = rr.rpre;
  const i64 bh = blockIdx.y, row = rr.row;
  const int n = rr.n;
  const i64* offs = reinterpret_cast<const i64*>(table + off_word);
  const float* p = probs + bh * nnz + offs[row];
  for (int d0 = 0; d0 < HD; d0 += 128 / G) {
    const int dim = d0 + (int)threadIdx.x % (128 / G), grp = (int)threadIdx.x / (128 / G);
    float acc = 0.f;
    if (dim < HD) {
      for (int r = 0; r < n; ++r)
        for (i64 x = grp; x < rc[r]; x += G)
          acc = fmaf(p[rpre[r] + x], to_f(v[(kv_head(q_head(bh)) * KV + rs[r] + x * rst[r]) * HD + dim]), acc);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    if (grp == 0 && dim < HD) {
      float sum = 0.f;
      for (int gg = 0; gg < G; ++gg) sum += part[gg * (128 / G) + threadIdx.x];
      o[(q_head(bh) * SEQ + row) * HD + dim] = from_f<T>(sum);
    }
    __syncthreads();
  }
}
