// Tile geometry that the code generator (host C++) and the kernels (NVRTC) both compute: the
// engines' threads and shared memory, and the closed-form kernels' row and key tiles (band_pass,
// lattice_pass; plan.cpp's band_tile and the CPU model walk the same tiles). Included by
// libsplat/codegen as an ordinary C++ header and by the device headers as splat/geometry.cuh.
// Integer arithmetic is a template over the type (int in the kernels, int64_t on the host), so
// that each side keeps its own width.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SPLAT_GEOMETRY_FN __host__ __device__ __forceinline__ constexpr
#else
#define SPLAT_GEOMETRY_FN inline constexpr
#endif

namespace splat::geometry {

// Rows of a fused row tile (every engine; split-KV state slots hold 64 rows) and keys of a plan key
// tile (a 128-key engine step covers two).
inline constexpr int kTileRows = 64, kTileKeys = 64;
// Shared memory a block may use (sm_80, sm_90).
inline constexpr int kSmemPerBlock = 227 * 1024;

// ---- threads and shared memory per engine (bytes of dynamic shared memory) ----
// An engine's width: the head columns its fragments and stages hold, head_dim rounded up to its
// k-step (16 for mma.sync m16n8k16; 32 for the tf32 engines, whose O fragments cover 32 columns).
// Columns from head_dim on are zero in Q's fragments and in the stages and are never stored, so a
// head_dim of 72 runs as 80 with the tensors' rows as they are (72 elements apart).
SPLAT_GEOMETRY_FN int mma_width(int hd) { return (hd + 15) / 16 * 16; }
SPLAT_GEOMETRY_FN int tf32_width(int hd) { return (hd + 31) / 32 * 32; }
// MmaEngine (bf16/fp16 mma.sync): 16 * mw rows per warp, a 64-row tile; stages of key_tile keys of K
// and V, rows padded to width + 8 elements.
SPLAT_GEOMETRY_FN int mma_threads(int mw) { return 128 / mw; }
SPLAT_GEOMETRY_FN int mma_smem(int stages, int key_tile, int hd) { return stages * 2 * key_tile * (mma_width(hd) + 8) * 2; }
// WgmmaEngine: one warpgroup; stages of 64 keys x hd of K and of V (TILE bytes each), Q after them
// when q_shared, and slack to align the stages to 1024 bytes.
SPLAT_GEOMETRY_FN int wgmma_tile_bytes(int hd) { return 64 * hd * 2; }
SPLAT_GEOMETRY_FN int wgmma_smem(int stages, bool q_shared, int hd) {
  return (2 * stages + (q_shared ? 1 : 0)) * wgmma_tile_bytes(hd) + 1024;
}
// MmaTf32Engine (and 3xTF32): stages of 64 fp32 keys, K rows padded to width + 16, V rows to width + 4.
SPLAT_GEOMETRY_FN int tf32_smem(int stages, int hd) {
  return stages * 64 * ((tf32_width(hd) + 16) + (tf32_width(hd) + 4)) * 4;
}
// MmaTf32x3Engine: Q's lo fragments in shared memory after the stages ([k-step][thread] 16-byte
// slots) where the width is over 96 and they fit.
SPLAT_GEOMETRY_FN int tf32x3_qlo_bytes(int hd) { return tf32_width(hd) / 8 * 128 * 16; }
SPLAT_GEOMETRY_FN bool tf32x3_q_lo_shared(int stages, int hd) {
  return tf32_width(hd) > 96 && tf32_smem(stages, hd) + tf32x3_qlo_bytes(hd) <= kSmemPerBlock;
}
SPLAT_GEOMETRY_FN int tf32x3_smem(int stages, int hd) {
  return tf32_smem(stages, hd) + (tf32x3_q_lo_shared(stages, hd) ? tf32x3_qlo_bytes(hd) : 0);
}

// decode_pass: NW warps, each staging a 32-key step's K and V rows (row stride hd + 16 bytes, so
// that the lanes' own K rows fall in different banks) by cp.async; NW as many as fit in
// kDecodeStageBytes (at least 2, at most 8). Shared memory: Q of the block's (row, query head) pairs
// as floats and as loaded, each warp's P of a step, and the stages, which the warps' states (m, l,
// O) reuse for the merge at the end.
inline constexpr int kDecodeStageBytes = 80 * 1024;
SPLAT_GEOMETRY_FN int decode_step_bytes(int hd, int esz) { return 2 * 32 * (hd * esz + 16); }
SPLAT_GEOMETRY_FN int decode_warps(int hd, int esz) {
  const int nw = kDecodeStageBytes / decode_step_bytes(hd, esz);
  return nw < 2 ? 2 : nw > 8 ? 8 : nw;
}
SPLAT_GEOMETRY_FN int decode_smem(int pairs, int hd, int esz) {
  const int nw = decode_warps(hd, esz), stages = nw * decode_step_bytes(hd, esz), merge = 4 * nw * pairs * (hd + 2);
  return pairs * hd * (4 + esz) + 4 * nw * 32 * pairs + (stages > merge ? stages : merge);
}

// BwdMmaEngine (backward, bf16/fp16 mma.sync): the tile's two row operands (64 rows each), stages
// of 64 keys of the two walked operands (rows padded to width + 8 elements), and for the dK/dV
// kernel each walked row's log-sum-exp and D (2 floats a row and stage).
// fast_cw > 0 (the fast mode's dK/dV kernel, fast_cw walked rows a step): a step's dS^T, [fast_cw
// walked rows][64 + 8 keys] of 16 bits, and each stage's walked rows' indices.
SPLAT_GEOMETRY_FN int bwd_mma_smem(int stages, int hd, bool dkv, int fast_cw = 0) {
  return (2 + 2 * stages) * 64 * (mma_width(hd) + 8) * 2 + (dkv ? stages * 2 * 64 * 4 : 0) +
         (dkv && fast_cw > 0 ? fast_cw * 72 * 2 + stages * 64 * 4 : 0);
}
// BwdWgmmaEngine (backward, bf16/fp16 wgmma, head_dim 64): stages of the two walked operands and the
// tile's two row operands (64 rows of 128 bytes each, swizzled, 1024-aligned: 1024 bytes of slack),
// and for the dK/dV kernel each stage's walked rows' lse and D; the fast mode's dK/dV kernel adds a
// tile for dS^T (the A operand of dQ's product) and each stage's walked rows' indices.
SPLAT_GEOMETRY_FN int bwd_wgmma_smem(int stages, int hd, bool dkv, bool fast = false) {
  return (2 * stages + 2) * wgmma_tile_bytes(hd) + (dkv ? stages * 2 * 64 * 4 : 0) + 1024 +
         (dkv && fast ? wgmma_tile_bytes(hd) + stages * 64 * 4 : 0);
}
// bwd_delta and bwd_dq_store: a group of lanes per query row, the power of two at or above the
// row's 16-byte pieces (rows of whole 16-byte pieces; else 32 lanes, one element each), at most 32;
// a block of 128 threads takes 128 / lanes rows.
SPLAT_GEOMETRY_FN int bwd_row_lanes(int hd, int esz) {
  const int pieces = (hd * esz) % 16 == 0 ? hd * esz / 16 : 32;
  int g = 1;
  while (g < pieces && g < 32) g *= 2;
  return g;
}
SPLAT_GEOMETRY_FN int bwd_rows_per_block(int hd, int esz) { return 128 / bwd_row_lanes(hd, esz); }
// Column slices of BwdMmaEngine: at a width over 128 its dQ, dK and dV accumulators hold 128 output
// columns (the slice from column co: width - co of them in the last), and each slice is an entry
// point of its own.
SPLAT_GEOMETRY_FN int bwd_col_slices(int hd) { return (mma_width(hd) + 127) / 128; }
SPLAT_GEOMETRY_FN int bwd_slice_width(int width, int co) { return width - co < 128 ? width - co : 128; }
// The joint launch of a one-pass dK/dV plan (nkv tiles) and a one-pass dQ plan (nq tiles) over
// `heads` grid rows (splat_bwd_p0, grid (nkv + nq, heads)): block n, counted in the order blocks start
// (x + grid.x * y), is dK/dV tile n % nkv of head n / nkv for n < nkv * heads, else dQ tile m % nq of
// head m / nq (m = n - nkv * heads): the longer dK/dV blocks first, the dQ blocks fill the last wave.
template <class I> struct JointBlock {
  bool dkv;
  I tile, head;
};
template <class I> SPLAT_GEOMETRY_FN JointBlock<I> bwd_joint_block(I n, I nkv, I nq, I heads) {
  const I kv_blocks = nkv * heads;
  if (n < kv_blocks) return {true, n % nkv, n / nkv};
  return {false, (n - kv_blocks) % nq, (n - kv_blocks) / nq};
}
// The same blocks head by head (tuning order=1): block n is head n / (nkv + nq)'s dK/dV tile r (r = n %
// (nkv + nq) < nkv), else its dQ tile r - nkv, so that the blocks running at a time read fewer heads'
// tensors (the dK/dV and dQ blocks of a head walk the same Q, K, V and dO).
template <class I> SPLAT_GEOMETRY_FN JointBlock<I> bwd_joint_block_by_head(I n, I nkv, I nq) {
  const I r = n % (nkv + nq), head = n / (nkv + nq);
  if (r < nkv) return {true, r, head};
  return {false, r - nkv, head};
}
// BwdTf32Engine (backward, fp32 storage): the tile's two row operands (64 rows of width + 16 floats
// each), stages of the two walked operands (64 rows of width + 4 floats each), and for dK/dV each
// stage's walked rows' lse and D.
// fast_cw > 0 (the fast mode's dK/dV kernel): a step's dS^T, [fast_cw walked rows][64 + 4 keys] floats,
// and each stage's walked rows' indices.
SPLAT_GEOMETRY_FN int bwd_tf32_smem(int stages, int hd, bool dkv, int fast_cw = 0) {
  return (2 * 64 * (tf32_width(hd) + 16) + 2 * stages * 64 * (tf32_width(hd) + 4)) * 4 + (dkv ? stages * 2 * 64 * 4 : 0) +
         (dkv && fast_cw > 0 ? fast_cw * 68 * 4 + stages * 64 * 4 : 0);
}

// ---- closed-form row and key tiles ----
template <class I> SPLAT_GEOMETRY_FN I geometry_min(I a, I b) { return a < b ? a : b; }
template <class I> SPLAT_GEOMETRY_FN I geometry_max(I a, I b) { return a < b ? b : a; }

// A band (row m of a phase keeps keys u, klo <= u - m <= khi, u in [0, rows)): row tile t holds m in
// [m_first, m_last] (64t, min(64t + 63, rows - 1)) and walks key tiles of 64 from u_start = m_first
// + klo. Its key tiles first .. first + count - 1 hold every key some row keeps; tiles [full_begin,
// full_end) (counted from u_start, not clipped to the walked ones) keep every key of every real row.
template <class I> struct BandKeyTiles {
  I u_start, first, count, full_begin, full_end;
};
template <class I> SPLAT_GEOMETRY_FN BandKeyTiles<I> band_key_tiles(I m_first, I m_last, I rows, I klo, I khi) {
  const I u_start = m_first + klo;
  // Keys some row keeps, and keys every row keeps, both clipped to [0, rows).
  const I lo = geometry_max<I>(0, m_first + klo), hi = geometry_min<I>(rows - 1, m_last + khi);
  const I flo = geometry_max<I>(0, m_last + klo), fhi = geometry_min<I>(rows - 1, m_first + khi);
  const I first = (lo - u_start) / 64, count = hi < lo ? 0 : (hi - u_start) / 64 + 1 - first;
  const I full_begin = flo <= u_start ? 0 : (flo - u_start + 63) / 64;
  const I full_end = fhi < u_start + 63 ? 0 : (fhi - u_start - 63) / 64 + 1;
  return {u_start, first, count, full_begin, full_end};
}
// A packed batch's band (band_pass_varlen): key tile u0 of a sequence of len keys is loaded as the
// 64-key box from min(u0, len - 64), so that no box reads a key past the sequence's last (past the
// last sequence: past the tensor); a box moved down holds keys of the tile before, masked.
template <class I> SPLAT_GEOMETRY_FN I band_box_start(I u0, I len) { return geometry_min<I>(u0, len - 64); }
// A band with `globals` global tokens (unit step): whether the row tile [m_first, m_last] has a key
// tile of the global keys [0, globals) that some row keeps outside its window.
template <class I> SPLAT_GEOMETRY_FN bool band_global_key_tile(I m_first, I m_last, I klo, I khi, I globals) {
  return m_last + klo > 0 || globals - 1 > m_first + khi;
}
// A window plus a lattice: whether every real row m in [m_first, m_last] keeps every key u in
// [u0, u0 + 63] of the lattice's `rows` keys, its hole being hole_lo <= u - m <= hole_hi (none when
// hole_lo > hole_hi). (lattice_pass writes the expression out: see there.)
template <class I> SPLAT_GEOMETRY_FN bool lattice_key_tile_full(I u0, I m_first, I m_last, I rows, I hole_lo, I hole_hi) {
  return u0 + 63 < rows && (hole_lo > hole_hi || u0 - m_last > hole_hi || u0 + 63 - m_first < hole_lo);
}

}  // namespace splat::geometry
