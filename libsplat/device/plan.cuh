// The fused plan's tables as the device reads them (values emitted per pattern: Item, TileD, SplitD,
// GroupD, WalkD), a walk's keys, the cp.async K/V gather and an affine item's run of a row.
#pragma once
#include "splat/common.cuh"

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
// A tile's walks are contiguous in the walk table, group after group: first_walk (-1 if none) and
// walk_total let the loads run through all of them as one stream of key tiles. Its groups' item
// lists are contiguous too: item_begin, item_total (in the group item table).
// item0..3: the first four of those items' indices (-1 past item_total), so that staging them
// needs no look-up in the group item table.
struct TileD {
  int phase, m_begin, m_end, group_begin, group_count, split_slot, split_lead, first_walk, walk_total, item_begin, item_total;
  int item0, item1, item2, item3;
};
// Split-KV: the rows of a split tile and the slots of its chunks' partial states.
struct SplitD { int phase, m_begin, m_end, slot_begin, slot_count; };
// tabulated: 1 for a tabulated item, 2 for the plan's global keys (no items; every row keeps
// every key of the group's walks).
struct GroupD { int walk_begin, walk_count, item_begin, item_count, tabulated; };
// Key tiles [full_begin, full_end) need no mask; modular: some row's run has a stride > 1 while
// the walk steps by 1 (its mask tests the residue). step 0: an indexed walk, key u is
// table[base + u] (the plan's global keys).
struct WalkD { int base, step, count, full_begin, full_end, modular; };
// Engines get table == nullptr (a compile-time constant once inlined) outside passes with global
// keys, so that their loads keep no indexed path there.
__device__ __forceinline__ i64 walk_key(const WalkD& w, int u, const int* table) {
  return table != nullptr && w.step == 0 ? (i64)table[w.base + u] : (i64)w.base + (i64)u * w.step;
}

// A packed batch's sequence of len keys (SPLAT_VARLEN): the walk's keys below len, and its full
// 64-key tiles among them. Walks step up from base; an indexed walk's table keys ascend.
__device__ __forceinline__ WalkD clip_walk(WalkD w, int len, const int* table) {
  if (w.step > 0) {
    const int n = w.base >= len ? 0 : (len - w.base + w.step - 1) / w.step;
    w.count = n < w.count ? n : w.count;
  } else {
    while (w.count > 0 && table[w.base + w.count - 1] >= len) --w.count;
  }
  w.full_end = w.count / 64 < w.full_end ? w.count / 64 : w.full_end;
  return w;
}

// cp.async engines (mma.sync, tf32): gathers keys base + u*step, u in [u0, u0 + BC), of K and V
// (kg, vg: this head's, rows HD elements apart) into stage rows kd, vd (LDK, LDV elements apart, HW
// >= HD columns: the engine's width); zeros past the walk and in the columns from HD on.
// Thread t copies 16-byte chunk t % CH of rows t / CH + k*RSTEP: one multiply per tile, except an
// indexed walk, which reads each key from the table. Where CH does not divide NT (d = 96) the
// NT % CH spare threads copy nothing: their rows would be those of threads t < CH, unordered writes
// of the same bytes from another warp (a race, racecheck's write-write error); where there are
// fewer chunks than threads (d < 32 in bf16) the rounds stop at BC rows.
// KSTEP: walked rows are KSTEP * HD elements apart (a packed batch interleaves the heads' rows: key
// rows kKvStep, the backward's walked query rows kQStep).
template <int HD, int HW, int BC, int NT, int LDK, int LDV, int KSTEP = kKvStep, class S, class E>
__device__ __forceinline__ void gather_kv(S* kd, S* vd, const E* kg, const E* vg, const WalkD& w, int u0,
                                          const int* table) {
  static_assert(sizeof(S) == sizeof(E), "stage and tensor elements differ in size");
  constexpr int EPC = 16 / (int)sizeof(E), CH = HW / EPC, RSTEP = NT / CH;
  static_assert(HD % EPC == 0 && HD <= HW, "rows of whole 16-byte chunks within the width");
  const int c = threadIdx.x % CH, r0 = threadIdx.x / CH;
  if constexpr (NT % CH != 0)
    if (r0 >= RSTEP) return;
  const bool col = HD == HW || c * EPC < HD;  // a padding chunk: zeros
  const i64 off = ((i64)w.base + (i64)(u0 + r0) * w.step) * (KSTEP * HD) + c * EPC;
  const i64 dstep = (i64)RSTEP * w.step * (KSTEP * HD);
#pragma unroll
  for (int k = 0; k < (BC + RSTEP - 1) / RSTEP; ++k) {
    const int r = r0 + k * RSTEP;
    if (r >= BC) break;
    const bool ok = col && u0 + r < w.count;
    const i64 o = !ok ? 0 : table != nullptr && w.step == 0 ? (i64)table[w.base + u0 + r] * (KSTEP * HD) + c * EPC : off + k * dstep;
    cp_async16(kd + r * LDK + c * EPC, kg + o, ok ? 16 : 0);
    cp_async16(vd + r * LDV + c * EPC, vg + o, ok ? 16 : 0);
  }
}

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

