// splatc bench's support kernels: seeded random inputs, conversion to float64, and the float64
// reference attention (a plain masked attention with no tiling: each row's kept keys, given as
// runs, in float64 with a two-sweep softmax). Compiled once per (dtype, head_dim) by
// libsplat/runtime/bench.cpp, whose module defines SPLAT_HD and instantiates these for its T.
#pragma once
#include "splat/common.cuh"

__device__ __forceinline__ unsigned long long splitmix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
// Standard normal values (Box-Muller on two hashed uniforms), rounded to T.
template <class T>
__device__ __forceinline__ void reference_fill(void* out, long long n, unsigned long long seed) {
  for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n; x += (long long)gridDim.x * blockDim.x) {
    unsigned long long h = splitmix(seed ^ splitmix((unsigned long long)x));
    double u1 = ((h >> 11) + 1.0) * (1.0 / 9007199254740993.0);
    double u2 = (splitmix(h) >> 11) * (1.0 / 9007199254740992.0);
    double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    static_cast<T*>(out)[x] = from_f<T>((float)z);
  }
}
template <class T>
__device__ __forceinline__ void reference_to_double(const void* in, double* out, long long n) {
  for (long long x = blockIdx.x * (long long)blockDim.x + threadIdx.x; x < n; x += (long long)gridDim.x * blockDim.x)
    out[x] = (double)to_f(static_cast<const T*>(in)[x]);
}
// The keys of a run below len (runs ascend): its count clipped.
__device__ __forceinline__ long long reference_run_count(const int* run, long long len) {
  if (run[0] >= len) return 0;
  if (run[1] <= 0) return run[2];  // one key (a run of one may have stride 0)
  const long long n = (len - run[0] + run[1] - 1) / run[1];
  return n < run[2] ? n : run[2];
}
// Query row `row` of query head bh (batch or sequence x heads): its Q/out row qrow, and K/V row
// k0 + j * kstep of key j for keys below len. A packed batch (cu_seqlens): the sequence's rows and
// keys; false for a row past its sequence's length.
__device__ __forceinline__ bool reference_row(long long row, long long bh, long long seq, long long kvl, long long group,
                                              const int* cu_seqlens, long long heads, long long& qrow, long long& k0,
                                              long long& kstep, long long& len) {
  qrow = bh * seq + row;
  k0 = bh / group * kvl;
  kstep = 1;
  len = kvl;
  if (cu_seqlens == nullptr) return true;
  const long long b = bh / heads, h = bh % heads, start = cu_seqlens[b];
  len = cu_seqlens[b + 1] - start;
  qrow = (start + row) * heads + h;
  kstep = heads / group;
  k0 = start * kstep + h / group;
  return row < len;
}
// One block of 128 threads per (row, batch*head); group query heads share a K/V head (kv_head = bh / group).
// cu_seqlens != nullptr: a packed variable-length batch (q, out [total, heads, hd], k, v [total, kv_heads,
// hd]; blockIdx.y = sequence * heads + head): the block's row and keys are those below its sequence's
// length, the rows' runs (the pattern at seq) clipped to it; a row past the length returns.
// lse[qrow]: the row's log-sum-exp (max + log(sum)), -inf for a row with no kept key.
template <class T>
__device__ __forceinline__ void reference_attention(const void* qv, const void* kv, const void* vv, double* out,
                                                    const long long* row_ptr, const int* runs, long long seq,
                                                    long long kvl, double scale, long long group, const int* cu_seqlens,
                                                    long long heads, const int* head_ids, long long group_heads,
                                                    double* lse) {
  const T* q = static_cast<const T*>(qv);
  const T* k = static_cast<const T*>(kv);
  const T* v = static_cast<const T*>(vv);
  __shared__ double qs[SPLAT_HD];
  __shared__ double ps[128];
  __shared__ long long js[128];
  __shared__ double red[4];
  const long long row = blockIdx.x;
  long long bh = blockIdx.y;
  // A head group (per-head patterns): blockIdx.y runs over batch (or sequences) x its group_heads heads.
  if (head_ids != nullptr) bh = bh / group_heads * heads + head_ids[bh % group_heads];
  long long qrow, k0, kstep, len;
  if (!reference_row(row, bh, seq, kvl, group, cu_seqlens, heads, qrow, k0, kstep, len)) return;
  for (int x = threadIdx.x; x < SPLAT_HD; x += 128) qs[x] = (double)to_f(q[qrow * SPLAT_HD + x]);
  __syncthreads();
  const long long rb = row_ptr[row], re = row_ptr[row + 1];
  double mx = -1.0 / 0.0;
  for (long long r = rb; r < re; ++r) {
    const int* run = runs + 3 * r;
    const long long cnt = reference_run_count(run, len);
    for (long long t = threadIdx.x; t < cnt; t += 128) {
      const long long j = run[0] + t * (long long)run[1];
      double dot = 0.0;
      for (int x = 0; x < SPLAT_HD; ++x) dot += qs[x] * (double)to_f(k[(k0 + j * kstep) * SPLAT_HD + x]);
      mx = fmax(mx, dot * scale);
    }
  }
  for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = mx;
  __syncthreads();
  mx = fmax(fmax(red[0], red[1]), fmax(red[2], red[3]));
  constexpr int NA = (SPLAT_HD + 127) / 128;
  double acc[NA];
  for (int a = 0; a < NA; ++a) acc[a] = 0.0;
  double l = 0.0;
  for (long long r = rb; r < re; ++r) {
    const int* run = runs + 3 * r;
    const long long cnt = reference_run_count(run, len);
    for (long long t0 = 0; t0 < cnt; t0 += 128) {
      const long long t = t0 + threadIdx.x;
      __syncthreads();
      if (t < cnt) {
        const long long j = run[0] + t * (long long)run[1];
        double dot = 0.0;
        for (int x = 0; x < SPLAT_HD; ++x) dot += qs[x] * (double)to_f(k[(k0 + j * kstep) * SPLAT_HD + x]);
        ps[threadIdx.x] = exp(dot * scale - mx);
        js[threadIdx.x] = j;
      } else {
        ps[threadIdx.x] = 0.0;
        js[threadIdx.x] = -1;
      }
      __syncthreads();
      const int nc = (int)min((long long)128, cnt - t0);
      for (int c = 0; c < nc; ++c) {
        l += ps[c];
        for (int a = 0; a < NA; ++a) {
          const int d = threadIdx.x + 128 * a;
          if (d < SPLAT_HD) acc[a] += ps[c] * (double)to_f(v[(k0 + js[c] * kstep) * SPLAT_HD + d]);
        }
      }
    }
  }
  for (int a = 0; a < NA; ++a) {
    const int d = threadIdx.x + 128 * a;
    if (d < SPLAT_HD) out[qrow * SPLAT_HD + d] = l > 0.0 ? acc[a] / l : 0.0;
  }
  if (threadIdx.x == 0) lse[qrow] = l > 0.0 ? mx + log(l) : -1.0 / 0.0;
}

// ---- the backward pass in float64 (splatc bench --pass backward) ----
// The gradients: P_ij = exp(scale q_i.k_j - lse_i) with the float64 reference's log-sum-exp,
// dP_ij = dO_i.v_j, D_i = sum_j P_ij dP_ij, dS_ij = P_ij (dP_ij - D_i); dQ_i = scale sum_j dS_ij k_j,
// dK_j = scale sum_i dS_ij q_i, dV_j = sum_i P_ij dO_i (summed over a K/V head's query heads).
// cu_seqlens != nullptr: a packed variable-length batch, as reference_attention takes it (lse and
// delta at the query rows' [total, heads] index); the runs are clipped to the sequence's length.
// One block of 128 threads per (row, batch*head or sequence*head): D_i (delta) and dQ_i over the row's runs.
template <class T>
__device__ __forceinline__ void reference_backward_rows(const void* qv, const void* kv, const void* vv, const void* dov,
                                                        const double* lse, const long long* row_ptr, const int* runs,
                                                        long long seq, long long kvl, double scale, long long group,
                                                        const int* cu_seqlens, long long heads, double* delta, double* dq) {
  const T* q = static_cast<const T*>(qv);
  const T* k = static_cast<const T*>(kv);
  const T* v = static_cast<const T*>(vv);
  const T* dout = static_cast<const T*>(dov);
  __shared__ double qs[SPLAT_HD], ds_row[SPLAT_HD], ps[128];
  __shared__ long long js[128];
  __shared__ double red[4];
  const long long row = blockIdx.x, bh = blockIdx.y;
  long long qrow, k0, kstep, len;
  if (!reference_row(row, bh, seq, kvl, group, cu_seqlens, heads, qrow, k0, kstep, len)) return;
  for (int x = threadIdx.x; x < SPLAT_HD; x += 128) {
    qs[x] = (double)to_f(q[qrow * SPLAT_HD + x]);
    ds_row[x] = (double)to_f(dout[qrow * SPLAT_HD + x]);
  }
  __syncthreads();
  const double l = lse[qrow];
  const long long rb = row_ptr[row], re = row_ptr[row + 1];
  // P and dP of key j, this thread's.
  auto p_dp = [&](long long j, double& p, double& dp) {
    double s = 0.0, d = 0.0;
    for (int x = 0; x < SPLAT_HD; ++x) {
      s += qs[x] * (double)to_f(k[(k0 + j * kstep) * SPLAT_HD + x]);
      d += ds_row[x] * (double)to_f(v[(k0 + j * kstep) * SPLAT_HD + x]);
    }
    p = exp(s * scale - l);
    dp = d;
  };
  double dsum = 0.0;
  for (long long r = rb; r < re; ++r) {
    const int* run = runs + 3 * r;
    const long long cnt = reference_run_count(run, len);
    for (long long t = threadIdx.x; t < cnt; t += 128) {
      double p, dp;
      p_dp(run[0] + t * (long long)run[1], p, dp);
      dsum += p * dp;
    }
  }
  for (int o = 16; o > 0; o >>= 1) dsum += __shfl_xor_sync(0xffffffffu, dsum, o);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = dsum;
  __syncthreads();
  const double D = red[0] + red[1] + red[2] + red[3];
  constexpr int NA = (SPLAT_HD + 127) / 128;
  double acc[NA];
  for (int a = 0; a < NA; ++a) acc[a] = 0.0;
  for (long long r = rb; r < re; ++r) {
    const int* run = runs + 3 * r;
    const long long cnt = reference_run_count(run, len);
    for (long long t0 = 0; t0 < cnt; t0 += 128) {
      const long long t = t0 + threadIdx.x;
      __syncthreads();
      if (t < cnt) {
        double p, dp;
        js[threadIdx.x] = run[0] + t * (long long)run[1];
        p_dp(js[threadIdx.x], p, dp);
        ps[threadIdx.x] = p * (dp - D);
      }
      __syncthreads();
      const int nc = (int)min((long long)128, cnt - t0);
      for (int c = 0; c < nc; ++c)
        for (int a = 0; a < NA; ++a) {
          const int x = threadIdx.x + 128 * a;
          if (x < SPLAT_HD) acc[a] += ps[c] * (double)to_f(k[(k0 + js[c] * kstep) * SPLAT_HD + x]);
        }
    }
  }
  for (int a = 0; a < NA; ++a) {
    const int x = threadIdx.x + 128 * a;
    if (x < SPLAT_HD) dq[qrow * SPLAT_HD + x] = scale * acc[a];
  }
  if (threadIdx.x == 0) delta[qrow] = D;
}

// One block of 128 threads per (key, batch*kv_head or sequence*kv_head): dK_j and dV_j over the
// column runs (the rows keeping key j) of each of the K/V head's group query heads; head_on != nullptr:
// only of the query heads h (of heads) with head_on[h] (a head group's, with per-head patterns).
template <class T>
__device__ __forceinline__ void reference_backward_cols(const void* qv, const void* kv, const void* vv, const void* dov,
                                                        const double* lse, const double* delta, const long long* col_ptr,
                                                        const int* runs, long long seq, long long kvl, double scale,
                                                        long long group, const int* cu_seqlens, long long heads,
                                                        const int* head_on, double* dk, double* dv) {
  const T* q = static_cast<const T*>(qv);
  const T* k = static_cast<const T*>(kv);
  const T* v = static_cast<const T*>(vv);
  const T* dout = static_cast<const T*>(dov);
  __shared__ double ks[SPLAT_HD], vs[SPLAT_HD], ps[128], dss[128];
  __shared__ long long is[128];
  const long long j = blockIdx.x, kvh = blockIdx.y;
  // K/V row of this block; query row i of the group's head g: q0 + g * qhead + i * qstep; rows below len.
  long long krow = kvh * kvl + j, q0 = kvh * group * seq, qhead = seq, qstep = 1, len = seq;
  if (cu_seqlens != nullptr) {
    const long long kvheads = heads / group, b = kvh / kvheads, kh = kvh % kvheads, start = cu_seqlens[b];
    len = cu_seqlens[b + 1] - start;
    if (j >= len) return;
    krow = (start + j) * kvheads + kh;
    q0 = start * heads + kh * group;
    qhead = 1;
    qstep = heads;
  }
  for (int x = threadIdx.x; x < SPLAT_HD; x += 128) {
    ks[x] = (double)to_f(k[krow * SPLAT_HD + x]);
    vs[x] = (double)to_f(v[krow * SPLAT_HD + x]);
  }
  constexpr int NA = (SPLAT_HD + 127) / 128;
  double ak[NA], av[NA];
  for (int a = 0; a < NA; ++a) ak[a] = av[a] = 0.0;
  const long long rb = col_ptr[j], re = col_ptr[j + 1];
  for (long long g = 0; g < group; ++g) {
    if (head_on != nullptr && !head_on[kvh % (heads / group) * group + g]) continue;  // block-uniform
    for (long long r = rb; r < re; ++r) {
      const int* run = runs + 3 * r;
      const long long cnt = reference_run_count(run, len);
      for (long long t0 = 0; t0 < cnt; t0 += 128) {
        const long long t = t0 + threadIdx.x;
        __syncthreads();
        if (t < cnt) {
          const long long i = q0 + g * qhead + (run[0] + t * (long long)run[1]) * qstep;
          double s = 0.0, d = 0.0;
          for (int x = 0; x < SPLAT_HD; ++x) {
            s += (double)to_f(q[i * SPLAT_HD + x]) * ks[x];
            d += (double)to_f(dout[i * SPLAT_HD + x]) * vs[x];
          }
          const double p = exp(s * scale - lse[i]);
          is[threadIdx.x] = i;
          ps[threadIdx.x] = p;
          dss[threadIdx.x] = p * (d - delta[i]);
        }
        __syncthreads();
        const int nc = (int)min((long long)128, cnt - t0);
        for (int c = 0; c < nc; ++c)
          for (int a = 0; a < NA; ++a) {
            const int x = threadIdx.x + 128 * a;
            if (x < SPLAT_HD) {
              ak[a] += dss[c] * (double)to_f(q[is[c] * SPLAT_HD + x]);
              av[a] += ps[c] * (double)to_f(dout[is[c] * SPLAT_HD + x]);
            }
          }
      }
    }
  }
  for (int a = 0; a < NA; ++a) {
    const int x = threadIdx.x + 128 * a;
    if (x < SPLAT_HD) {
      dk[krow * SPLAT_HD + x] = scale * ak[a];
      dv[krow * SPLAT_HD + x] = av[a];
    }
  }
}
