// Element types, conversions, PTX wrappers (cp.async, ldmatrix, mma.sync), lane sums and
// programmatic dependent launch: what every kernel of an emitted module uses.
#pragma once

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
// Grouped-query attention: SPLAT_KV_GROUP query heads share one K/V head. K and V are
// [batch, kv_heads, kv_len, head_dim] with heads = kv_heads * SPLAT_KV_GROUP, so the block of query
// head bh = b*heads + h reads K/V head b*kv_heads + h / SPLAT_KV_GROUP = bh / SPLAT_KV_GROUP.
#ifndef SPLAT_KV_GROUP
#define SPLAT_KV_GROUP 1
#endif
__device__ __forceinline__ i64 kv_head(i64 bh) { return bh / SPLAT_KV_GROUP; }

// Per-head patterns: a module serves one head group, the SPLAT_HEAD_GROUP query heads SPLAT_HEAD_IDS
// (ascending, of SPLAT_HEADS). grid.y runs over batch (or sequences) x the group's heads, and block bh
// serves query head q_head(bh) = (bh / SPLAT_HEAD_GROUP) * SPLAT_HEADS + kGroupHeads[bh % SPLAT_HEAD_GROUP]
// of Q, K, V and O; the workspaces stay per block (bh). Without a group q_head is the identity.
#ifndef SPLAT_HEADS
#define SPLAT_HEADS 1
#endif
#ifndef SPLAT_KV_HEADS
#define SPLAT_KV_HEADS 1
#endif
#ifdef SPLAT_HEAD_GROUP
__device__ const int kGroupHeads[SPLAT_HEAD_GROUP] = {SPLAT_HEAD_IDS};
__device__ __forceinline__ i64 q_head(i64 bh) {
  return bh / SPLAT_HEAD_GROUP * SPLAT_HEADS + kGroupHeads[bh % SPLAT_HEAD_GROUP];
}
#else
__device__ __forceinline__ i64 q_head(i64 bh) { return bh; }
#endif

// Where a block's head lives in the tensors. By default Q and O are [batch, heads, SEQ, HD] and K, V
// [batch, kv_heads, KV, HD]. A packed variable-length batch (SPLAT_VARLEN; SPLAT_HEADS and
// SPLAT_KV_HEADS defined too) has Q and O [total_tokens, heads, HD], K and V [total_tokens, kv_heads,
// HD]; sequence b is tokens cu_seqlens[b] .. cu_seqlens[b + 1] and grid.y runs over sequences x heads.
#ifndef SPLAT_VARLEN
#define SPLAT_VARLEN 0
#endif
// The softmax statistics for a backward pass: each row's natural log-sum-exp of its scaled scores
// (fp32, laid out as Q's rows without head_dim: [batch, heads, SEQ] or [total_tokens, heads]; -inf
// for a row with no kept key), written where O is, when the entry points take `float* lse`.
#ifndef SPLAT_LSE
#define SPLAT_LSE 0
#endif
// Rows (of HD elements) between a head's consecutive rows of Q and O, and of K and V (enumerators:
// no module-scope variables in the PTX).
enum : int { kQStep = SPLAT_VARLEN ? SPLAT_HEADS : 1, kKvStep = SPLAT_VARLEN ? SPLAT_KV_HEADS : 1 };
struct Head {
  i64 bh;   // the block's grid.y: the workspaces' rows of this head are bh * SEQ + i
  i64 q0;   // varlen: Q and O row i of this head at element (q0 + i * kQStep) * HD (head_q0)
  i64 k0;   // varlen: K and V key j at element (k0 + j * kKvStep) * HD (head_k0)
  int len;  // rows and keys of this head's sequence: cu_seqlens[b + 1] - cu_seqlens[b] (varlen), else SEQ
  float* lse;  // SPLAT_LSE: row i's log-sum-exp at lse[head_q0 + i * kQStep] (null: not saved)
};
// Row 0 of the head in Q and O, and key 0 in K and V, in rows of HD elements, and (head_q_elems,
// head_k_elems) in elements. Outside varlen they are computed where they are used, from bh, with
// the constant product SEQ * HD folded, as the kernels did before Head: formed as (bh * SEQ) * HD,
// Q's row address became ((bh * SEQ) + i) * HD, the value of the hand-over's workspace row, which
// the compiler then kept live through the kernel (strided-16k's band kernel spilled 16 bytes and ran
// 5% slower).
template <int SEQ> __device__ __forceinline__ i64 head_q0(const Head& hv) { return SPLAT_VARLEN ? hv.q0 : q_head(hv.bh) * SEQ; }
template <int KV> __device__ __forceinline__ i64 head_k0(const Head& hv) {
  return SPLAT_VARLEN ? hv.k0 : kv_head(q_head(hv.bh)) * KV;
}
template <int SEQ, int HD> __device__ __forceinline__ i64 head_q_elems(const Head& hv) {
  return SPLAT_VARLEN ? hv.q0 * HD : q_head(hv.bh) * ((i64)SEQ * HD);
}
template <int KV, int HD> __device__ __forceinline__ i64 head_k_elems(const Head& hv) {
  return SPLAT_VARLEN ? hv.k0 * HD : kv_head(q_head(hv.bh)) * ((i64)KV * HD);
}
template <int SEQ, int KV>
__device__ __forceinline__ Head make_head(i64 bh, const int* cu_seqlens, float* lse = nullptr) {
  if constexpr (SPLAT_VARLEN) {
    const i64 qh = q_head(bh), b = qh / SPLAT_HEADS, h = qh % SPLAT_HEADS, start = cu_seqlens[b];
    return {bh, start * SPLAT_HEADS + h, start * SPLAT_KV_HEADS + h / SPLAT_KV_GROUP, (int)(cu_seqlens[b + 1] - start),
            lse};
  } else {
    (void)cu_seqlens;
    return {bh, 0, 0, SEQ, lse};
  }
}
// A row's natural log-sum-exp from its exponents' reference (log2 units, scaled) and its sum of
// exp2(s - ref); -inf for a row with no kept key.
__device__ __forceinline__ float row_lse(float ref, float l) {
  return l > 0.f ? (ref + log2f(l)) * 0.693147180559945309f : __int_as_float(0xff800000);
}
// Row i's log-sum-exp (row_lse(ref, l)) where the Head says (SPLAT_LSE; nothing otherwise).
template <int SEQ> __device__ __forceinline__ void store_lse(const Head& hv, i64 i, float ref, float l) {
  if constexpr (SPLAT_LSE) {
    if (hv.lse != nullptr) hv.lse[head_q0<SEQ>(hv) + i * kQStep] = row_lse(ref, l);
  } else {
    (void)hv, (void)i, (void)ref, (void)l;
  }
}
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }
// A key-tile mask that masks a whole tile itself (tile(s), e.g. BandMask) rather than per score.
template <class K, class = void> struct TileMask { static constexpr bool value = false; };
template <class K> struct TileMask<K, decltype(void(K::TILE_MASK))> { static constexpr bool value = K::TILE_MASK; };

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

// The block's dynamic shared memory (the launch's bytes), 16-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  return smem_raw;
}
__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
// A value of type P read from p (a shared-memory row read as 16-byte chunks or element pairs).
template <class P, class S> __device__ __forceinline__ P load_as(const S* p) { return *reinterpret_cast<const P*>(p); }
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

