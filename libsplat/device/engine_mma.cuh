// Tensor-core engine for bf16/fp16 (mma.sync m16n8k16, ldmatrix, cp.async).
#pragma once
#include "splat/common.cuh"
#include "splat/geometry.cuh"
#include "splat/plan.cuh"
#include "splat/online_softmax.cuh"

// ================================================================================================
// Engine: tensor cores (bf16 / fp16, head_dim % 8 == 0, <= 256; width HW: head_dim rounded up to 16;
// the padding columns zero and never stored). 64-row tiles as 4 warps x 16 rows
// (MW = 1) or 2 warps x 32 rows (MW = 2: each K/V fragment read from shared memory feeds two
// mma instead of one, halving the ldmatrix traffic that bounds the MW = 1 kernel). Key tiles of
// 64 keys gathered through cp.async into STAGES shared-memory stages; S = Q.K^T and O += P.V with
// mma.m16n8k16; online softmax in registers (OnlineSoftmax; P reused from the S accumulators as
// the A operand). A thread owns rows g + 8h of its warp's 16*MW (g = lane / 4,
// h < 2*MW); m-tile mt holds h = 2mt (accumulator elements 0, 1) and h = 2mt + 1 (2, 3).
// ================================================================================================
// BCOLS: keys per online-softmax step (64, or 128: half the max/sum shuffles and O rescales per
// key, twice the S registers).
template <class T, int HD, int SEQ, int KV, int MW, int NSTAGES, int BCOLS = 64>
struct MmaEngine : OnlineSoftmax<2 * MW, 4> {
  static constexpr int NT = splat::geometry::mma_threads(MW), BR = 64, BC = BCOLS, ROWS = 2 * MW;
  static constexpr int HW = splat::geometry::mma_width(HD), LDS = HW + 8;
  static_assert(HD % 8 == 0, "rows of whole 16-byte chunks");
  static constexpr int STAGES = NSTAGES, SMEM = splat::geometry::mma_smem(STAGES, BC, HD), KV_LEN = KV;
  using State = OnlineSoftmax<ROWS, 4>;
  using State::m;
  using State::l;
  u16* Ks;
  u16* Vs;
  const T* kg;
  const T* vg;
  u32 qf[MW][HW / 16][4];
  float acc[MW][HW / 8][4];

  __device__ __forceinline__ static int slot(int h) {
    return (threadIdx.x >> 5) * 16 * MW + ((threadIdx.x & 31) >> 2) + 8 * h;
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* q, const T* k, const T* v, const i64* row, const Head& hv,
                                        bool first, const float* ws) {
    const i64 bh = hv.bh;
    Ks = reinterpret_cast<u16*>(smem);
    Vs = Ks + STAGES * BC * LDS;
    kg = k + head_k_elems<KV, HD>(hv);
    vg = v + head_k_elems<KV, HD>(hv);
    const T* qg = q + head_q_elems<SEQ, HD>(hv);
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int kb = 0; kb < HW / 16; ++kb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          i64 i = row[2 * mt + (e & 1)];
          int col = kb * 16 + 2 * t4 + (e >> 1) * 8;
          qf[mt][kb][e] = i >= 0 && (HD == HW || col < HD) ? *reinterpret_cast<const u32*>(qg + i * (kQStep * HD) + col) : 0u;
        }
    this->template init_state<SEQ, HD>(row, bh, first, ws);
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int d = 0; d < HW / 8; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          i64 i = row[2 * mt + (e >> 1)];
          acc[mt][d][e] = (!first && i >= 0 && d * 8 < HD) ? ws[(bh * SEQ + i) * HD + d * 8 + 2 * t4 + (e & 1)] : 0.f;
        }
  }

  // Keys base + u*step, u in [u0, u0 + BC), into stage buf (gather_kv).
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0, const int* table = nullptr) {
    gather_kv<HD, HW, BC, NT, LDS, LDS>(Ks + buf * BC * LDS, Vs + buf * BC * LDS, kg, vg, w, u0, table);
  }

  // One key tile: scores, online softmax (scores become probabilities in place), O += P.V.
  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    float s[MW][BC / 8][4];
    scores(buf, s);
    softmax(s, full, scale_log2, keep);
    accumulate(buf, s);
  }

  // S = Q.K^T for the tile in stage buf.
  __device__ __forceinline__ void scores(int buf, float (&s)[MW][BC / 8][4]) {
    const u16* Kb = Ks + buf * BC * LDS;
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < HW / 16; ++kb) {
#pragma unroll
      for (int np = 0; np < BC / 16; ++np) {
        u32 b0, b1, b2, b3;
        ldmatrix_x4(b0, b1, b2, b3, Kb + (16 * np + (lane & 7) + ((lane >> 4) << 3)) * LDS + kb * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) {
          mma16816<T>(s[mt][2 * np], qf[mt][kb], b0, b1);
          mma16816<T>(s[mt][2 * np + 1], qf[mt][kb], b2, b3);
        }
      }
    }
  }

  // Max and sum of this thread's scores of row half hh (BC / 4 values) as balanced trees: depth
  // log2 instead of a serial chain of dependent FMNMX / FADD (ncu: "wait" stalls led).
  __device__ __forceinline__ static float row_max(const float (&s)[BC / 8][4], int hh) {
    float t[BC / 8];
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) t[n] = fmaxf(s[n][2 * hh], s[n][2 * hh + 1]);
#pragma unroll
    for (int w = BC / 16; w >= 1; w >>= 1)
#pragma unroll
      for (int n = 0; n < w; ++n) t[n] = fmaxf(t[n], t[n + w]);
    return t[0];
  }
  __device__ __forceinline__ static float row_sum(const float (&s)[BC / 8][4], int hh) {
    float t[BC / 8];
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) t[n] = s[n][2 * hh] + s[n][2 * hh + 1];
#pragma unroll
    for (int w = BC / 16; w >= 1; w >>= 1)
#pragma unroll
      for (int n = 0; n < w; ++n) t[n] += t[n + w];
    return t[0];
  }

  // O's row slot h to a new row max: scaled by alpha.
  __device__ __forceinline__ void rescale_row(int h, float alpha) {
    const int mt = h >> 1, hh = h & 1;
#pragma unroll
    for (int d = 0; d < HW / 8; ++d) {
      acc[mt][d][2 * hh] *= alpha;
      acc[mt][d][2 * hh + 1] *= alpha;
    }
  }

  // The exact online-softmax step on masked scores (mul: the scale still to apply, 1 if applied):
  // references to the row maxima, l and O rescaled, S becomes the probabilities in place.
  __device__ __forceinline__ void exact_step(float (&s)[MW][BC / 8][4], float mul) {
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const int mt = h >> 1, hh = h & 1;
      float mx = row_max(s[mt], hh);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float ref;
      const float alpha = this->rebase(h, mx * mul, ref);
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        s[mt][n][2 * hh] = fast_exp2(fmaf(s[mt][n][2 * hh], mul, -ref));
        s[mt][n][2 * hh + 1] = fast_exp2(fmaf(s[mt][n][2 * hh + 1], mul, -ref));
      }
      l[h] = l[h] * alpha + row_sum(s[mt], hh);
      rescale_row(h, alpha);
    }
  }

  // Masks, scales and exponentiates S in place (probabilities, not yet normalised) and rescales
  // the running sums and O to the new row maxima.
  template <class Keep>
  __device__ __forceinline__ void softmax(float (&s)[MW][BC / 8][4], bool full, float scale_log2, Keep keep) {
    const int t4 = threadIdx.x & 3;
    // Masked scores become -inf; with a positive scale the row max is taken on raw scores and the
    // scale folds into the exponent (one FFMA + EX2 per score).
    const bool pos = scale_log2 > 0.f;
    if (!pos) {
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][n][e] *= scale_log2;
    }
    // Uniform branch: interior key tiles skip the mask entirely.
    if (!full) {
#pragma unroll
      for (int mt = 0; mt < MW; ++mt)
#pragma unroll
        for (int n = 0; n < BC / 8; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (!keep(2 * mt + (e >> 1), n * 8 + 2 * t4 + (e & 1))) s[mt][n][e] = neg_inf();
    }
    exact_step(s, pos ? scale_log2 : 1.f);
  }

  // O += P.V for the tile in stage buf, P the probabilities left in s by softmax().
  __device__ __forceinline__ void accumulate(int buf, const float (&s)[MW][BC / 8][4]) {
    const u16* Vb = Vs + buf * BC * LDS;
    const int lane = threadIdx.x & 31;
    // O += P.V: the S accumulators of n-tiles 2kb, 2kb+1 are the A fragment of k-block kb.
#pragma unroll
    for (int kb = 0; kb < BC / 16; ++kb) {
      u32 a[MW][4];
#pragma unroll
      for (int mt = 0; mt < MW; ++mt) {
        a[mt][0] = pack2<T>(s[mt][2 * kb][0], s[mt][2 * kb][1]);
        a[mt][1] = pack2<T>(s[mt][2 * kb][2], s[mt][2 * kb][3]);
        a[mt][2] = pack2<T>(s[mt][2 * kb + 1][0], s[mt][2 * kb + 1][1]);
        a[mt][3] = pack2<T>(s[mt][2 * kb + 1][2], s[mt][2 * kb + 1][3]);
      }
#pragma unroll
      for (int dp = 0; dp < HW / 16; ++dp) {
        u32 b0, b1, b2, b3;
        ldmatrix_x4_trans(b0, b1, b2, b3, Vb + (16 * kb + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + 16 * dp + (lane >> 4) * 8);
#pragma unroll
        for (int mt = 0; mt < MW; ++mt) {
          mma16816<T>(acc[mt][2 * dp], a[mt], b0, b1);
          mma16816<T>(acc[mt][2 * dp + 1], a[mt], b2, b3);
        }
      }
    }
  }

  // Row h of O: times inv in T (packed pairs), or as it is in fp32 (float2), to the row at dst (its
  // HD columns; the width's padding columns are not stored).
  __device__ __forceinline__ void store_o(int h, T* dst, float inv, int t4) const {
    const int mt = h >> 1, hh = h & 1;
#pragma unroll
    for (int d = 0; d < HD / 8; ++d)
      *reinterpret_cast<u32*>(dst + d * 8 + 2 * t4) = pack2<T>(acc[mt][d][2 * hh] * inv, acc[mt][d][2 * hh + 1] * inv);
  }
  __device__ __forceinline__ void store_acc(int h, float* dst, int t4) const {
    const int mt = h >> 1, hh = h & 1;
#pragma unroll
    for (int d = 0; d < HD / 8; ++d)
      *reinterpret_cast<float2*>(dst + d * 8 + 2 * t4) = make_float2(acc[mt][d][2 * hh], acc[mt][d][2 * hh + 1]);
  }
  // Partial state of a split-KV chunk (OnlineSoftmax's split slots).
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    softmax_end_partial(*this, bh, nslots, split_slot, wsplit, HD);
  }

  // O of a last pass's row tile (rows row0 + rstep * r, r < nrows of 64), normalised, through
  // stage 0's K rows: each warp writes its rows there (conflict-free with the padded rows) and
  // stores them whole, 16 bytes per thread and instruction, instead of 4-byte stores that each
  // touch 8 rows (as WgmmaEngine::end_band; fused_pass calls it once every copy has landed).
  static constexpr bool STAGED_END = true;
  __device__ __forceinline__ void end_band(int row0, int rstep, int nrows, const Head& hv, T* o) {
    constexpr int RW = 16 * MW, CH = HD / 8;  // rows per warp, 16-byte chunks per row
    const int lane = threadIdx.x & 31, t4 = lane & 3;
    __syncthreads();  // every warp done reading the stages
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const int mt = h >> 1, hh = h & 1, r = slot(h);
      const float lsum = lane_sum<4>(this->l[h]), inv = this->inverse(lsum);
      if (t4 == 0 && r < nrows) store_lse<SEQ>(hv, row0 + (i64)rstep * r, softmax_ref(this->m[h]), lsum);
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
        *reinterpret_cast<u32*>(Ks + r * LDS + d * 8 + 2 * t4) = pack2<T>(acc[mt][d][2 * hh] * inv, acc[mt][d][2 * hh + 1] * inv);
    }
    __syncwarp();
    const int w0 = (threadIdx.x >> 5) * RW;
#pragma unroll
    for (int x = lane; x < RW * CH; x += 32) {
      const int r = w0 + x / CH, c = x % CH;
      const uint4 val = *reinterpret_cast<const uint4*>(Ks + r * LDS + c * 8);
      if (r < nrows) *reinterpret_cast<uint4*>(o + (head_q0<SEQ>(hv) + (i64)(row0 + rstep * r) * kQStep) * HD + c * 8) = val;
    }
  }

  __device__ __forceinline__ void end(const i64* row, const Head& hv, bool last, T* o, float* ws) {
    softmax_end<MmaEngine, SEQ, HD>(*this, row, hv, last, o, ws);
  }
};
