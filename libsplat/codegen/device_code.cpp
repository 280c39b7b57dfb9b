// The pattern-independent part of every emitted module: element types, PTX helpers, and the
// kernel bodies (fused tensor-core, fused CUDA-core, and the three-kernel pipeline). The emitted
// file defines the SPLAT_* constants and the pattern tables before this text and the extern "C"
// entry points after it. No #include: NVRTC compiles it with no header search path.
#include "libsplat/codegen/device_code.h"

namespace splat {

const char* device_code() {
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
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

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
struct TileD { int phase, m_begin, m_end, group_begin, group_count, split_slot, split_lead; };
// Split-KV: the rows of a split tile and the slots of its chunks' partial states.
struct SplitD { int phase, m_begin, m_end, slot_begin, slot_count; };
struct GroupD { int walk_begin, walk_count, item_begin, item_count, tabulated; };
struct WalkD { int base, step, count; };

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
__device__ __forceinline__ bool in_run(i64 j, i64 start, i64 stride, i64 count) {
  i64 d = j - start;
  return d >= 0 && d % stride == 0 && d / stride < count;
}
// Key j kept for row i of a tabulated item (runs read from the table).
__device__ __forceinline__ bool tab_kept(const Item& it, const int* table, i64 i, i64 j) {
  if (i < 0 || !item_has_row(it, i)) return false;
  i64 m = (i - it.row_begin) / it.row_stride;
  int b = table[it.tab_row_ptr + m], e = table[it.tab_row_ptr + m + 1];
  for (int r = b; r < e; ++r) {
    const int* run = table + it.tab_runs + 3 * (i64)r;
    if (in_run(j, run[0], run[1], run[2])) return true;
  }
  return false;
}

// ================================================================================================
// Engine: tensor cores (bf16 / fp16, head_dim % 16 == 0). 64-row tiles as 4 warps x 16 rows
// (MW = 1) or 2 warps x 32 rows (MW = 2: each K/V fragment read from shared memory feeds two
// mma instead of one, halving the ldmatrix traffic that bounds the MW = 1 kernel). Key tiles of
// 64 keys gathered through cp.async into STAGES shared-memory stages; S = Q.K^T and O += P.V with
// mma.m16n8k16; online softmax in registers (FlashAttention-2 scheme, P reused from the S
// accumulators as the A operand). A thread owns rows g + 8h of its warp's 16*MW (g = lane / 4,
// h < 2*MW); m-tile mt holds h = 2mt (accumulator elements 0, 1) and h = 2mt + 1 (2, 3).
// ================================================================================================
// BCOLS: keys per online-softmax step (64, or 128: half the max/sum shuffles and O rescales per
// key, twice the S registers). LAZY: the O rescale is skipped when no row of the warp raised its
// running max (warp vote; alpha is exactly 1 then, so the result is unchanged).
template <class T, int HD, int SEQ, int KV, int MW, int NSTAGES, int BCOLS = 64, bool LAZY = false>
struct MmaEngine {
  static constexpr int NT = 128 / MW, BR = 64, BC = BCOLS, LDS = HD + 8, ROWS = 2 * MW, STAGES = NSTAGES;
  static constexpr int SMEM = STAGES * 2 * BC * LDS * 2;
  u16* Ks;
  u16* Vs;
  const T* kg;
  const T* vg;
  u32 qf[MW][HD / 16][4];
  float m[ROWS], l[ROWS];
  float acc[MW][HD / 8][4];

  __device__ __forceinline__ static int slot(int h) {
    return (threadIdx.x >> 5) * 16 * MW + ((threadIdx.x & 31) >> 2) + 8 * h;
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* q, const T* k, const T* v, const i64* row, i64 bh,
                                        bool first, const float* ws) {
    Ks = reinterpret_cast<u16*>(smem);
    Vs = Ks + STAGES * BC * LDS;
    kg = k + bh * KV * HD;
    vg = v + bh * KV * HD;
    const T* qg = q + bh * SEQ * HD;
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int kb = 0; kb < HD / 16; ++kb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          i64 i = row[2 * mt + (e & 1)];
          int col = kb * 16 + 2 * t4 + (e >> 1) * 8;
          qf[mt][kb][e] = i >= 0 ? *reinterpret_cast<const u32*>(qg + i * HD + col) : 0u;
        }
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      m[h] = neg_inf();
      l[h] = 0.f;
      if (!first && row[h] >= 0) {
        const float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + row[h]) * 2;
        m[h] = ml[0];
        l[h] = t4 == 0 ? ml[1] : 0.f;  // l is summed over the 4 lanes of a row at the end
      }
    }
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          i64 i = row[2 * mt + (e >> 1)];
          acc[mt][d][e] = (!first && i >= 0) ? ws[(bh * SEQ + i) * HD + d * 8 + 2 * t4 + (e & 1)] : 0.f;
        }
  }

  // Gathers keys base + u*step, u in [u0, u0 + BC) (zeros past the walk) into stage buf.
  // Thread t copies 16-byte chunk t % CH of rows t / CH + k*(NT/CH): one multiply per tile.
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0) {
    constexpr int CH = HD / 8, RSTEP = NT / CH;
    u16* kd = Ks + buf * BC * LDS;
    u16* vd = Vs + buf * BC * LDS;
    const int c = threadIdx.x % CH, r0 = threadIdx.x / CH;
    const i64 off = ((i64)w.base + (i64)(u0 + r0) * w.step) * HD + c * 8;
    const i64 dstep = (i64)RSTEP * w.step * HD;
#pragma unroll
    for (int k = 0; k < (BC + RSTEP - 1) / RSTEP; ++k) {
      const int r = r0 + k * RSTEP;
      if (r >= BC) break;  // head_dim < 32: fewer chunks than threads
      const bool ok = u0 + r < w.count;
      const i64 o = ok ? off + k * dstep : 0;
      cp_async16(kd + r * LDS + c * 8, kg + o, ok ? 16 : 0);
      cp_async16(vd + r * LDS + c * 8, vg + o, ok ? 16 : 0);
    }
  }

  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    const u16* Kb = Ks + buf * BC * LDS;
    const u16* Vb = Vs + buf * BC * LDS;
    const int lane = threadIdx.x & 31, t4 = lane & 3;
    float s[MW][BC / 8][4];
#pragma unroll
    for (int mt = 0; mt < MW; ++mt)
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) s[mt][n][0] = s[mt][n][1] = s[mt][n][2] = s[mt][n][3] = 0.f;
#pragma unroll
    for (int kb = 0; kb < HD / 16; ++kb) {
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
    const float mul = pos ? scale_log2 : 1.f;
    if (LAZY) {
      // Maxima first, then one vote: interior tiles of a window rarely raise any row's max.
      float ref[ROWS], alpha[ROWS];
      bool raised = false;
#pragma unroll
      for (int h = 0; h < ROWS; ++h) {
        const int mt = h >> 1, hh = h & 1;
        float mx = neg_inf();
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hh], s[mt][n][2 * hh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx * mul);
        raised = raised || m_new > m[h];
        ref[h] = m_new == neg_inf() ? 0.f : m_new;
        alpha[h] = fast_exp2(m[h] - ref[h]);  // 1 when the max held (0 only while l and O are 0)
        m[h] = m_new;
      }
      if (__any_sync(0xffffffffu, raised)) {
#pragma unroll
        for (int h = 0; h < ROWS; ++h) {
          const int mt = h >> 1, hh = h & 1;
          l[h] *= alpha[h];
#pragma unroll
          for (int d = 0; d < HD / 8; ++d) {
            acc[mt][d][2 * hh] *= alpha[h];
            acc[mt][d][2 * hh + 1] *= alpha[h];
          }
        }
      }
#pragma unroll
      for (int h = 0; h < ROWS; ++h) {
        const int mt = h >> 1, hh = h & 1;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) {
          float p0 = fast_exp2(fmaf(s[mt][n][2 * hh], mul, -ref[h])), p1 = fast_exp2(fmaf(s[mt][n][2 * hh + 1], mul, -ref[h]));
          s[mt][n][2 * hh] = p0;
          s[mt][n][2 * hh + 1] = p1;
          sum += p0 + p1;
        }
        l[h] += sum;
      }
    } else {
#pragma unroll
      for (int h = 0; h < ROWS; ++h) {
        const int mt = h >> 1, hh = h & 1;
        float mx = neg_inf();
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) mx = fmaxf(mx, fmaxf(s[mt][n][2 * hh], s[mt][n][2 * hh + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[h], mx * mul);
        const float ref = m_new == neg_inf() ? 0.f : m_new;
        const float alpha = fast_exp2(m[h] - ref);
        m[h] = m_new;
        float sum = 0.f;
#pragma unroll
        for (int n = 0; n < BC / 8; ++n) {
          float p0 = fast_exp2(fmaf(s[mt][n][2 * hh], mul, -ref)), p1 = fast_exp2(fmaf(s[mt][n][2 * hh + 1], mul, -ref));
          s[mt][n][2 * hh] = p0;
          s[mt][n][2 * hh + 1] = p1;
          sum += p0 + p1;
        }
        l[h] = l[h] * alpha + sum;
#pragma unroll
        for (int d = 0; d < HD / 8; ++d) {
          acc[mt][d][2 * hh] *= alpha;
          acc[mt][d][2 * hh + 1] *= alpha;
        }
      }
    }
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
      for (int dp = 0; dp < HD / 16; ++dp) {
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

  // Partial state of a split-KV chunk: acc [bh][slot][64][HD], then (m, l) [bh][slot][64].
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const int mt = h >> 1, hh = h & 1;
      const i64 base = (bh * nslots + split_slot) * 64 + slot(h);
#pragma unroll
      for (int d = 0; d < HD / 8; ++d)
        *reinterpret_cast<float2*>(wsplit + base * HD + d * 8 + 2 * t4) = make_float2(acc[mt][d][2 * hh], acc[mt][d][2 * hh + 1]);
      if (t4 == 0) {
        float* ml = wsplit + (i64)gridDim.y * nslots * 64 * HD + base * 2;
        ml[0] = m[h];
        ml[1] = l[h];
      }
    }
  }

  __device__ __forceinline__ void end(const i64* row, i64 bh, bool last, T* o, float* ws) {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
      const int mt = h >> 1, hh = h & 1;
      const i64 i = row[h];
      if (i < 0) continue;
      if (last) {
        const float inv = l[h] > 0.f ? 1.f / l[h] : 0.f;
#pragma unroll
        for (int d = 0; d < HD / 8; ++d)
          *reinterpret_cast<u32*>(o + (bh * SEQ + i) * HD + d * 8 + 2 * t4) =
              pack2<T>(acc[mt][d][2 * hh] * inv, acc[mt][d][2 * hh + 1] * inv);
      } else {
#pragma unroll
        for (int d = 0; d < HD / 8; ++d)
          *reinterpret_cast<float2*>(ws + (bh * SEQ + i) * HD + d * 8 + 2 * t4) =
              make_float2(acc[mt][d][2 * hh], acc[mt][d][2 * hh + 1]);
        if (t4 == 0) {
          float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + i) * 2;
          ml[0] = m[h];
          ml[1] = l[h];
        }
      }
    }
  }
};

// ================================================================================================
// Engine: tensor cores, tf32 (fp32 storage, head_dim % 32 == 0). 64-row tiles as 4 warps x 16
// rows; key tiles of 64 fp32 keys gathered by cp.async into STAGES shared-memory stages;
// S = Q.K^T and O += P.V with mma.m16n8k8.tf32 (operands rounded by cvt.rna.tf32.f32 as the
// fragments are loaded), online softmax in fp32 as in MmaEngine. ldmatrix moves 16-bit pairs, so
// fragments come from plain shared loads. Both contractions are free in the order of their k
// slots, which are mapped so that every shared load is a conflict-free 16-byte vector:
//  * S, k-step 2j+s: slot t (a0/a1, b0) is head column 16j + 4t + 2s, slot t+4 (a2/a3, b1) the
//    next one. Lane (g, t) reads K row 8n+g, columns 16j + 4t .. +3 (one float4 per two
//    k-steps); K rows hold HD + 16 floats, so rows g and g+1 are 16 banks apart and a quarter
//    warp covers the 32 banks once.
//  * P.V, 8-key step: slot t is key 2t, slot t+4 key 2t+1 -- exactly the keys the S accumulators
//    hold (c0/c2: 2t, c1/c3: 2t+1), so P feeds the mma with no shuffle.
//  * O, n-tile dn, column c: head column 32(dn/4) + 4c + dn%4. The V operand of lane (g, t) is
//    then V[key][32j + 4g .. +3] (one float4 per four n-tiles); V rows hold HD + 4 floats (keys
//    2t and 2t+2 are 8 banks apart). A lane's O columns are 32j + 8t .. +7.
// A thread owns rows g and g+8 of its warp's 16 (h = 0, 1), like MmaEngine with MW = 1.
// ================================================================================================
template <int HD, int SEQ, int KV, int NSTAGES>
struct MmaTf32Engine {
  static constexpr int NT = 128, BR = 64, BC = 64, LDK = HD + 16, LDV = HD + 4, ROWS = 2, STAGES = NSTAGES;
  static constexpr int SMEM = STAGES * BC * (LDK + LDV) * 4;
  float* Ks;
  float* Vs;
  const float* kg;
  const float* vg;
  u32 qf[HD / 8][4];
  float m[2], l[2];
  float acc[HD / 8][4];

  __device__ __forceinline__ static int slot(int h) {
    return (threadIdx.x >> 5) * 16 + ((threadIdx.x & 31) >> 2) + 8 * h;
  }
  // Head column of O accumulator element e of n-tile dn (lane t = t4).
  __device__ __forceinline__ static int ocol(int dn, int e, int t4) {
    return (dn >> 2) * 32 + (2 * t4 + (e & 1)) * 4 + (dn & 3);
  }

  __device__ __forceinline__ void begin(unsigned char* smem, const float* q, const float* k, const float* v,
                                        const i64* row, i64 bh, bool first, const float* ws) {
    Ks = reinterpret_cast<float*>(smem);
    Vs = Ks + STAGES * BC * LDK;
    kg = k + bh * KV * HD;
    vg = v + bh * KV * HD;
    const float* qg = q + bh * SEQ * HD;
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int j = 0; j < HD / 16; ++j) {
        float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
        if (row[h] >= 0) x = *reinterpret_cast<const float4*>(qg + row[h] * HD + 16 * j + 4 * t4);
        qf[2 * j][h] = to_tf32(x.x);
        qf[2 * j][h + 2] = to_tf32(x.y);
        qf[2 * j + 1][h] = to_tf32(x.z);
        qf[2 * j + 1][h + 2] = to_tf32(x.w);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = neg_inf();
      l[h] = 0.f;
      if (!first && row[h] >= 0) {
        const float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + row[h]) * 2;
        m[h] = ml[0];
        l[h] = t4 == 0 ? ml[1] : 0.f;  // l is summed over the 4 lanes of a row at the end
      }
    }
#pragma unroll
    for (int d = 0; d < HD / 8; ++d)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const i64 i = row[e >> 1];
        acc[d][e] = (!first && i >= 0) ? ws[(bh * SEQ + i) * HD + ocol(d, e, t4)] : 0.f;
      }
  }

  // Gathers keys base + u*step, u in [u0, u0 + BC) (zeros past the walk) into stage buf.
  __device__ __forceinline__ void load(int buf, const WalkD& w, int u0) {
    constexpr int CH = HD / 4, RSTEP = NT / CH;
    float* kd = Ks + buf * BC * LDK;
    float* vd = Vs + buf * BC * LDV;
    const int c = threadIdx.x % CH, r0 = threadIdx.x / CH;
    const i64 off = ((i64)w.base + (i64)(u0 + r0) * w.step) * HD + c * 4;
    const i64 dstep = (i64)RSTEP * w.step * HD;
#pragma unroll
    for (int k = 0; k < BC / RSTEP; ++k) {
      const int r = r0 + k * RSTEP;
      const bool ok = u0 + r < w.count;
      const i64 o = ok ? off + k * dstep : 0;
      cp_async16(kd + r * LDK + c * 4, kg + o, ok ? 16 : 0);
      cp_async16(vd + r * LDV + c * 4, vg + o, ok ? 16 : 0);
    }
  }

  template <class Keep>
  __device__ __forceinline__ void compute(int buf, bool full, float scale_log2, Keep keep) {
    const float* Kb = Ks + buf * BC * LDK;
    const float* Vb = Vs + buf * BC * LDV;
    const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
    float s[BC / 8][4];
#pragma unroll
    for (int n = 0; n < BC / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
    // k outer, key n-tiles inner: 8 independent accumulator chains between dependent mma.
#pragma unroll
    for (int j = 0; j < HD / 16; ++j) {
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        const float4 x = *reinterpret_cast<const float4*>(Kb + (8 * n + g) * LDK + 16 * j + 4 * t4);
        mma1688_tf32(s[n], qf[2 * j], to_tf32(x.x), to_tf32(x.y));
        mma1688_tf32(s[n], qf[2 * j + 1], to_tf32(x.z), to_tf32(x.w));
      }
    }
    // Masked scores become -inf; with a positive scale the row max is taken on raw scores and the
    // scale folds into the exponent (one FFMA + EX2 per score).
    const bool pos = scale_log2 > 0.f;
    if (!pos) {
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[n][e] *= scale_log2;
    }
    if (!full) {  // uniform branch: interior key tiles skip the mask
#pragma unroll
      for (int n = 0; n < BC / 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (!keep(e >> 1, n * 8 + 2 * t4 + (e & 1))) s[n][e] = neg_inf();
    }
    const float mul = pos ? scale_log2 : 1.f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = neg_inf();
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * h], s[n][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * mul);
      const float ref = m_new == neg_inf() ? 0.f : m_new;
      const float alpha = fast_exp2(m[h] - ref);
      m[h] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BC / 8; ++n) {
        const float p0 = fast_exp2(fmaf(s[n][2 * h], mul, -ref)), p1 = fast_exp2(fmaf(s[n][2 * h + 1], mul, -ref));
        s[n][2 * h] = p0;
        s[n][2 * h + 1] = p1;
        sum += p0 + p1;
      }
      l[h] = l[h] * alpha + sum;
#pragma unroll
      for (int d = 0; d < HD / 8; ++d) {
        acc[d][2 * h] *= alpha;
        acc[d][2 * h + 1] *= alpha;
      }
    }
    // O += P.V, one 8-key step per S n-tile kb (slot t: key 2t, slot t+4: key 2t+1).
#pragma unroll
    for (int kb = 0; kb < BC / 8; ++kb) {
      const u32 a[4] = {to_tf32(s[kb][0]), to_tf32(s[kb][2]), to_tf32(s[kb][1]), to_tf32(s[kb][3])};
      const float* v0 = Vb + (8 * kb + 2 * t4) * LDV + 4 * g;
#pragma unroll
      for (int j = 0; j < HD / 32; ++j) {
        const float4 x0 = *reinterpret_cast<const float4*>(v0 + 32 * j);
        const float4 x1 = *reinterpret_cast<const float4*>(v0 + LDV + 32 * j);
        mma1688_tf32(acc[4 * j], a, to_tf32(x0.x), to_tf32(x1.x));
        mma1688_tf32(acc[4 * j + 1], a, to_tf32(x0.y), to_tf32(x1.y));
        mma1688_tf32(acc[4 * j + 2], a, to_tf32(x0.z), to_tf32(x1.z));
        mma1688_tf32(acc[4 * j + 3], a, to_tf32(x0.w), to_tf32(x1.w));
      }
    }
  }

  // Row h's values at head columns 32j + 4(2t + p) .. +3 (p = 0, 1), times f.
  __device__ __forceinline__ float4 ovec(int h, int j, int p, float f) const {
    const int e = 2 * h + p;
    return make_float4(acc[4 * j][e] * f, acc[4 * j + 1][e] * f, acc[4 * j + 2][e] * f, acc[4 * j + 3][e] * f);
  }

  // Partial state of a split-KV chunk: acc [bh][slot][64][HD], then (m, l) [bh][slot][64].
  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 base = (bh * nslots + split_slot) * 64 + slot(h);
#pragma unroll
      for (int j = 0; j < HD / 32; ++j)
#pragma unroll
        for (int p = 0; p < 2; ++p)
          *reinterpret_cast<float4*>(wsplit + base * HD + 32 * j + 4 * (2 * t4 + p)) = ovec(h, j, p, 1.f);
      if (t4 == 0) {
        float* ml = wsplit + (i64)gridDim.y * nslots * 64 * HD + base * 2;
        ml[0] = m[h];
        ml[1] = l[h];
      }
    }
  }

  __device__ __forceinline__ void end(const i64* row, i64 bh, bool last, float* o, float* ws) {
    const int t4 = threadIdx.x & 3;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const i64 i = row[h];
      if (i < 0) continue;
      const float f = last ? (l[h] > 0.f ? 1.f / l[h] : 0.f) : 1.f;
      float* dst = (last ? o : ws) + (bh * SEQ + i) * HD;
#pragma unroll
      for (int j = 0; j < HD / 32; ++j)
#pragma unroll
        for (int p = 0; p < 2; ++p)
          *reinterpret_cast<float4*>(dst + 32 * j + 4 * (2 * t4 + p)) = ovec(h, j, p, f);
      if (!last && t4 == 0) {
        float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + i) * 2;
        ml[0] = m[h];
        ml[1] = l[h];
      }
    }
  }
};

// ================================================================================================
// Engine: CUDA cores (fp32 storage; any dtype with head_dim % 8 == 0). 128 threads as
// 16 x 8: a thread owns 4 rows x 8 keys of S and 4 rows x HD/8 columns of O. Q^T, K^T, V and P^T
// tiles in shared memory (float4 reads, conflict-free); one stage.
// ================================================================================================
template <class T, int HD, int SEQ, int KV, bool ALIAS, bool BATCH>
struct SimtEngine {
  static constexpr int NT = 128, BR = 64, BC = 64, PAD = 4, LDQ = BR + PAD, LDK = BC + PAD, DPT = HD / 8, ROWS = 4, STAGES = 1;
  // Keys of S and columns of O per thread interleaved by 32 so that the 8 lanes of a quarter
  // warp read 128 contiguous bytes (conflict-free 16-byte loads).
  static constexpr bool ILV = HD % 32 == 0;
  __device__ __forceinline__ static int key_of(int tx, int c) { return (c >> 2) * 32 + tx * 4 + (c & 3); }
  __device__ __forceinline__ static int col_of(int tx, int d) { return ILV ? (d >> 2) * 32 + tx * 4 + (d & 3) : tx * DPT + d; }
  // ALIAS: P^T reuses K^T's space (one more barrier per key tile, 17 KB less shared memory:
  // four blocks per SM instead of three).
  static constexpr int QT = HD * LDQ, KT = HD * LDK, VS = BC * HD, PT = BC * LDQ;
  static constexpr int KPT = ALIAS ? (KT > PT ? KT : PT) : KT + PT;
  static constexpr int SMEM = (QT + VS + KPT) * 4;
  float *Qt, *Kt, *Vs, *Pt;
  const T* kg;
  const T* vg;
  float m[4], l[4];
  float acc[4][DPT];

  __device__ __forceinline__ static int slot(int h) { return (threadIdx.x >> 3) * 4 + h; }

  __device__ __forceinline__ void begin(unsigned char* smem, const T* q, const T* k, const T* v, const i64* row, i64 bh,
                                        bool first, const float* ws) {
    Qt = reinterpret_cast<float*>(smem);
    Vs = Qt + QT;
    Kt = Vs + VS;
    Pt = ALIAS ? Kt : Kt + KT;
    kg = k + bh * KV * HD;
    vg = v + bh * KV * HD;
    const T* qg = q + bh * SEQ * HD;
    const int tx = threadIdx.x & 7;
    // Q^T tile: the row of slot r is shared through shared memory (rows are known per thread).
    __shared__ i64 rows_s[64];
#pragma unroll
    for (int h = 0; h < 4; ++h)
      if (tx == 0) rows_s[slot(h)] = row[h];
    __syncthreads();
    for (int x = threadIdx.x; x < BR * (HD / 4); x += 128) {
      int r = x % BR, c = x / BR;
      float qv[4] = {0.f, 0.f, 0.f, 0.f};
      if (rows_s[r] >= 0) load4(qg + rows_s[r] * HD + c * 4, qv);
#pragma unroll
      for (int e = 0; e < 4; ++e) Qt[(c * 4 + e) * LDQ + r] = qv[e];
    }
#pragma unroll
    for (int h = 0; h < 4; ++h) {
      m[h] = neg_inf();
      l[h] = 0.f;
      if (!first && row[h] >= 0) {
        const float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + row[h]) * 2;
        m[h] = ml[0];
        l[h] = tx == 0 ? ml[1] : 0.f;
      }
#pragma unroll
      for (int d = 0; d < DPT; ++d) acc[h][d] = (!first && row[h] >= 0) ? ws[(bh * SEQ + row[h]) * HD + col_of(tx, d)] : 0.f;
    }
  }

  // K^T: key fastest (conflict-free transposed stores); V: column fastest (contiguous loads and
  // stores). BATCH: all global loads of a batch of 8 are issued before any shared store (one
  // L2/HBM latency per batch; 32 more live registers during the load).
  __device__ __forceinline__ void load(int, const WalkD& w, int u0) {
    constexpr int C4 = HD / 4, NK = BC * C4 / NT, NB = NK < 8 ? NK : 8;
    if (!BATCH) {
      for (int x = threadIdx.x; x < BC * C4; x += NT) {
        const int r = x % BC, c = x / BC;
        float kv[4] = {0.f, 0.f, 0.f, 0.f};
        if (u0 + r < w.count) load4(kg + ((i64)w.base + (i64)(u0 + r) * w.step) * HD + c * 4, kv);
#pragma unroll
        for (int e = 0; e < 4; ++e) Kt[(c * 4 + e) * LDK + r] = kv[e];
      }
      for (int x = threadIdx.x; x < BC * C4; x += NT) {
        const int c = x % C4, r = x / C4;
        float vv[4] = {0.f, 0.f, 0.f, 0.f};
        if (u0 + r < w.count) load4(vg + ((i64)w.base + (i64)(u0 + r) * w.step) * HD + c * 4, vv);
        *reinterpret_cast<float4*>(Vs + r * HD + c * 4) = make_float4(vv[0], vv[1], vv[2], vv[3]);
      }
      return;
    }
    {
      const int r = threadIdx.x % BC, c0 = threadIdx.x / BC;  // element x = tid + NT*k: c = c0 + 2k
      const bool ok = u0 + r < w.count;
      const T* src = kg + (ok ? ((i64)w.base + (i64)(u0 + r) * w.step) * HD : 0);
#pragma unroll
      for (int b = 0; b < NK; b += NB) {
        float kv[NB][4];
#pragma unroll
        for (int x = 0; x < NB; ++x) {
          kv[x][0] = kv[x][1] = kv[x][2] = kv[x][3] = 0.f;
          if (ok && b + x < NK) load4(src + (c0 + 2 * (b + x)) * 4, kv[x]);
        }
#pragma unroll
        for (int x = 0; x < NB; ++x)
          if (b + x < NK)
#pragma unroll
            for (int e = 0; e < 4; ++e) Kt[((c0 + 2 * (b + x)) * 4 + e) * LDK + r] = kv[x][e];
      }
    }
#pragma unroll
    for (int b = 0; b < NK; b += NB) {
      float vv[NB][4];
#pragma unroll
      for (int x = 0; x < NB; ++x) {
        const int e = threadIdx.x + NT * (b + x), c = e % C4, r = e / C4;
        vv[x][0] = vv[x][1] = vv[x][2] = vv[x][3] = 0.f;
        if (b + x < NK && u0 + r < w.count) load4(vg + ((i64)w.base + (i64)(u0 + r) * w.step) * HD + c * 4, vv[x]);
      }
#pragma unroll
      for (int x = 0; x < NB; ++x) {
        const int e = threadIdx.x + NT * (b + x), c = e % C4, r = e / C4;
        if (b + x < NK) *reinterpret_cast<float4*>(Vs + r * HD + c * 4) = make_float4(vv[x][0], vv[x][1], vv[x][2], vv[x][3]);
      }
    }
  }

  template <class Keep>
  __device__ __forceinline__ void compute(int, bool full, float scale_log2, Keep keep) {
    const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
    float s[4][8];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) s[r][c] = 0.f;
#pragma unroll 8
    for (int kk = 0; kk < HD; ++kk) {
      float4 qv = *reinterpret_cast<const float4*>(Qt + kk * LDQ + ty * 4);
      float4 k0 = *reinterpret_cast<const float4*>(Kt + kk * LDK + tx * 4);
      float4 k1 = *reinterpret_cast<const float4*>(Kt + kk * LDK + 32 + tx * 4);
      float qa[4] = {qv.x, qv.y, qv.z, qv.w};
      float ka[8] = {k0.x, k0.y, k0.z, k0.w, k1.x, k1.y, k1.z, k1.w};
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) s[r][c] = fmaf(qa[r], ka[c], s[r][c]);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) s[r][c] *= scale_log2;
    if (!full) {  // uniform branch: interior key tiles skip the mask
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c)
          if (!keep(r, key_of(tx, c))) s[r][c] = neg_inf();
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float mx = neg_inf();
#pragma unroll
      for (int c = 0; c < 8; ++c) mx = fmaxf(mx, s[r][c]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_new = fmaxf(m[r], mx);
      const float ref = m_new == neg_inf() ? 0.f : m_new;
      const float alpha = fast_exp2(m[r] - ref);
      m[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
        float p = fast_exp2(s[r][c] - ref);
        s[r][c] = p;
        sum += p;
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int d = 0; d < DPT; ++d) acc[r][d] *= alpha;
    }
    if (ALIAS) __syncthreads();  // every warp is done reading K^T before P^T overwrites it
#pragma unroll
    for (int c = 0; c < 8; ++c)
      *reinterpret_cast<float4*>(Pt + key_of(tx, c) * LDQ + ty * 4) = make_float4(s[0][c], s[1][c], s[2][c], s[3][c]);
    __syncthreads();
#pragma unroll 4
    for (int kk = 0; kk < BC; ++kk) {
      float4 pv = *reinterpret_cast<const float4*>(Pt + kk * LDQ + ty * 4);
      float pa[4] = {pv.x, pv.y, pv.z, pv.w};
      float va[DPT];
#pragma unroll
      for (int d = 0; d < DPT; d += 4) {
        float4 x = *reinterpret_cast<const float4*>(Vs + kk * HD + col_of(tx, d));
        va[d] = x.x; va[d + 1] = x.y; va[d + 2] = x.z; va[d + 3] = x.w;
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int d = 0; d < DPT; ++d) acc[r][d] = fmaf(pa[r], va[d], acc[r][d]);
    }
  }

  __device__ __forceinline__ void end_partial(i64 bh, int nslots, int split_slot, float* wsplit) {
    const int tx = threadIdx.x & 7;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 4);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const i64 base = (bh * nslots + split_slot) * 64 + slot(r);
#pragma unroll
      for (int d = 0; d < DPT; ++d) wsplit[base * HD + col_of(tx, d)] = acc[r][d];
      if (tx == 0) {
        float* ml = wsplit + (i64)gridDim.y * nslots * 64 * HD + base * 2;
        ml[0] = m[r];
        ml[1] = l[r];
      }
    }
  }

  __device__ __forceinline__ void end(const i64* row, i64 bh, bool last, T* o, float* ws) {
    const int tx = threadIdx.x & 7;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
      l[r] += __shfl_xor_sync(0xffffffffu, l[r], 4);
    }
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const i64 i = row[r];
      if (i < 0) continue;
      if (last) {
        const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
#pragma unroll
        for (int d = 0; d < DPT; ++d) o[(bh * SEQ + i) * HD + col_of(tx, d)] = from_f<T>(acc[r][d] * inv);
      } else {
#pragma unroll
        for (int d = 0; d < DPT; ++d) ws[(bh * SEQ + i) * HD + col_of(tx, d)] = acc[r][d];
        if (tx == 0) {
          float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + i) * 2;
          ml[0] = m[r];
          ml[1] = l[r];
        }
      }
    }
  }
};

// ================================================================================================
// Fused pass driver: one block per row tile; for each group of the tile, each row's runs in that
// group (closed forms) in registers, then each walk of the group in key tiles of 64 keys. A key
// tile is "full" (no mask) when every row keeps all of its keys.
// R: most runs a row has in one group (from the plan).
// ================================================================================================
template <class E, class T, int SEQ, int HD, int PERIOD, int R, int NSLOTS, bool FIRST, bool LAST>
__device__ __forceinline__ void fused_pass(const Item* items, const TileD* tiles, const GroupD* groups, const WalkD* walks,
                                           const int* group_items, const int* group_rbeg, const int* group_pmax,
                                           float scale_log2, const T* q, const T* k, const T* v,
                                           T* o, float* ws, const int* table) {
  constexpr int BC = E::BC;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const TileD tile = tiles[blockIdx.x];
  const i64 bh = blockIdx.y;
  i64 row[E::ROWS];
#pragma unroll
  for (int h = 0; h < E::ROWS; ++h) {
    const i64 m = tile.m_begin + E::slot(h);
    row[h] = m < tile.m_end ? tile.phase + (i64)PERIOD * m : -1;
  }
  E e;
  // Split chunks other than the lead start from an empty state; the lead continues the state
  // handed over by earlier passes.
  e.begin(smem_raw, q, k, v, row, bh, FIRST || (tile.split_slot >= 0 && !tile.split_lead), ws);
  for (int gi = 0; gi < tile.group_count; ++gi) {
    const GroupD g = groups[tile.group_begin + gi];
    // The rows' runs in this group.
    int rs[E::ROWS][R], rst[E::ROWS][R], rc[E::ROWS][R];
    int nr[E::ROWS];
    const Item* tab = nullptr;
#pragma unroll
    for (int h = 0; h < E::ROWS; ++h) nr[h] = 0;
    if (g.tabulated) {
      tab = &items[group_items[g.item_begin]];
    } else {
      // The group's items are sorted by first row; pmax is the running max of their row ends.
      // Only items from the first whose running end passes my lowest row, up to my highest row.
      i64 imin = 0x7fffffffffffffffll, imax = -1;
#pragma unroll
      for (int h = 0; h < E::ROWS; ++h)
        if (row[h] >= 0) { imin = row[h] < imin ? row[h] : imin; imax = row[h] > imax ? row[h] : imax; }
      int lo = 0, hi = g.item_count;
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (group_pmax[g.item_begin + mid] > imin) hi = mid; else lo = mid + 1;
      }
      for (int x = lo; x < g.item_count && group_rbeg[g.item_begin + x] <= imax; ++x) {
        const Item it = items[group_items[g.item_begin + x]];
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
          if (r < nr[h]) {
            if (w.step > 1) {  // lattice walk: the run shares the walk's lattice
              lo[h][r] = (rs[h][r] - w.base) / w.step;
              hi[h][r] = lo[h][r] + rc[h][r];
            } else {
              lo[h][r] = rs[h][r] - w.base;
              hi[h][r] = lo[h][r] + (rc[h][r] - 1) * rst[h][r] + 1;
              md[h][r] = rst[h][r];
            }
          }
        }
      // Modular masks (runs of stride > 1 walked with step 1) only when some row needs one.
      bool mine_mod = false;
#pragma unroll
      for (int h = 0; h < E::ROWS; ++h)
#pragma unroll
        for (int r = 0; r < R; ++r) mine_mod = mine_mod || md[h][r] != 1;
      const bool modular = __syncthreads_or(mine_mod);
      const int ntiles = (w.count + BC - 1) / BC;
      // cp.async pipeline of S stages: S - 1 key tiles in flight while one is computed. One
      // commit group per tile slot (empty past the walk) keeps the wait count uniform.
      constexpr int S = E::STAGES;
      if (S > 1) {
#pragma unroll
        for (int p = 0; p < S - 1; ++p) {
          if (p < ntiles) e.load(p, w, p * BC);
          cp_async_commit();
        }
      }
      for (int kt = 0; kt < ntiles; ++kt) {
        const int buf = S > 1 ? kt % S : 0;
        const int u0 = kt * BC;
        if (S > 1) {
          const int nx = kt + S - 1;
          if (nx < ntiles) e.load(nx % S, w, nx * BC);
          cp_async_commit();
          cp_async_wait<S - 1>();  // tile kt has landed (this thread's copies; the barrier below: all)
        } else {
          __syncthreads();
          e.load(0, w, u0);
        }
        bool mine = tab == nullptr;
#pragma unroll
        for (int h = 0; h < E::ROWS; ++h) {
          bool f = false;
#pragma unroll
          for (int r = 0; r < R; ++r) f = f || (md[h][r] == 1 && lo[h][r] <= u0 && hi[h][r] >= u0 + BC);
          mine = mine && f;
        }
        const bool full = __syncthreads_and(mine);
        if (tab == nullptr && !modular) {
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
          e.compute(buf, false, scale_log2, [&](int h, int c) {
            const int u = u0 + c;
            return u < w.count && tab_kept(*tab, table, row[h], (i64)w.base + (i64)u * w.step);
          });
        }
        if (S > 1) __syncthreads();  // the stage is refilled S - 1 tiles later
      }
    }
  }
  if (NSLOTS > 0 && tile.split_slot >= 0)
    e.end_partial(bh, NSLOTS, tile.split_slot, ws + (i64)gridDim.y * SEQ * (HD + 2));
  else
    e.end(row, bh, LAST, o, ws);
}

// Combine of split-KV chunks: merges the partial states of each split tile's rows and writes O
// (last pass) or the handed-over state. One block per split tile.
template <class T, int SEQ, int HD, int PERIOD, int NSLOTS, bool LAST>
__device__ __forceinline__ void fused_combine(const SplitD* splits, T* o, float* ws) {
  const SplitD sp = splits[blockIdx.x];
  const i64 bh = blockIdx.y;
  const float* wsplit = ws + (i64)gridDim.y * SEQ * (HD + 2);
  const float* pml = wsplit + (i64)gridDim.y * NSLOTS * 64 * HD;
  for (int x = threadIdx.x; x < 64 * HD; x += blockDim.x) {
    const int r = x / HD, d = x % HD;
    const i64 m = sp.m_begin + r;
    if (m >= sp.m_end) continue;
    const i64 i = sp.phase + (i64)PERIOD * m;
    float M = neg_inf();
    for (int c = 0; c < sp.slot_count; ++c) M = fmaxf(M, pml[((bh * NSLOTS + sp.slot_begin + c) * 64 + r) * 2]);
    const float ref = M == neg_inf() ? 0.f : M;
    float L = 0.f, acc = 0.f;
    for (int c = 0; c < sp.slot_count; ++c) {
      const i64 b = (bh * NSLOTS + sp.slot_begin + c) * 64 + r;
      const float w = fast_exp2(pml[b * 2] - ref);
      L += pml[b * 2 + 1] * w;
      acc += wsplit[b * HD + d] * w;
    }
    if (LAST) {
      o[(bh * SEQ + i) * HD + d] = from_f<T>(L > 0.f ? acc / L : 0.f);
    } else {
      ws[(bh * SEQ + i) * HD + d] = acc;
      if (d == 0) {
        float* ml = ws + (i64)gridDim.y * SEQ * HD + (bh * SEQ + i) * 2;
        ml[0] = M;
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

}  // namespace splat
