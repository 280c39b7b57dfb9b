// The rows' runs of a plan group (closed forms, a tabulated segment's table rows, or the plan's
// global keys) and their bounds in a walk's units: what the table-walking drivers (fused_pass,
// decode_pass) mask key tiles with.
#pragma once
#include "splat/common.cuh"
#include "splat/plan.cuh"

// The rows' runs in a group of affine items (rs, rst, rc: start, stride, count; nr: how many).
// Staged (gstaged: the group's items in shared memory): every item of the group. Otherwise the
// group's items are sorted by first row, pmax is the running max of their row ends: only items from
// the first whose running end passes my lowest row, up to my highest row. One loop body for both
// (generic addressing), so that the engines' register budgets see it once.
template <int ROWS, int R>
__device__ __forceinline__ void group_affine_runs(const GroupD& g, const i64* row, const Item* items, const int* group_items,
                                                  const int* group_rbeg, const int* group_pmax, const Item* gstaged,
                                                  bool use_staged, int (&rs)[ROWS][R], int (&rst)[ROWS][R],
                                                  int (&rc)[ROWS][R], int (&nr)[ROWS]) {
  i64 imin = 0x7fffffffffffffffll, imax = -1;
#pragma unroll
  for (int h = 0; h < ROWS; ++h)
    if (row[h] >= 0) { imin = row[h] < imin ? row[h] : imin; imax = row[h] > imax ? row[h] : imax; }
  int lo = 0, hi = g.item_count;
  while (!use_staged && lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (group_pmax[g.item_begin + mid] > imin) hi = mid; else lo = mid + 1;
  }
  for (int x = lo; x < g.item_count && (use_staged || group_rbeg[g.item_begin + x] <= imax); ++x) {
    const Item it = use_staged ? gstaged[x] : items[group_items[g.item_begin + x]];
#pragma unroll
    for (int h = 0; h < ROWS; ++h) {
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

// Each row's prefix of the plan's global keys (GROWS >= 0: row i keeps table[GROWS + i] of them; in
// tb, no run table).
template <int ROWS, int GROWS>
__device__ __forceinline__ void global_prefix_runs(const i64* row, const int* table, int (&tb)[ROWS]) {
  if (GROWS >= 0)
#pragma unroll
    for (int h = 0; h < ROWS; ++h) tb[h] = row[h] >= 0 ? table[GROWS + row[h]] : 0;
}
// A tabulated group: each row's runs [tb, te) in the table's runs at truns, of item tab.
template <int ROWS>
__device__ __forceinline__ void tabulated_runs(const GroupD& g, const i64* row, const Item* items, const int* group_items,
                                               const int* table, const Item*& tab, const int*& truns, int (&tb)[ROWS],
                                               int (&te)[ROWS]) {
  tab = &items[group_items[g.item_begin]];
  truns = table + tab->tab_runs;
#pragma unroll
  for (int h = 0; h < ROWS; ++h)
    if (row[h] >= 0 && item_has_row(*tab, row[h])) {
      const i64 m = (row[h] - tab->row_begin) / tab->row_stride;
      tb[h] = table[tab->tab_row_ptr + m];
      te[h] = table[tab->tab_row_ptr + m + 1];
    }
}

// A walk's bounds of the rows' runs, in walk units: [lo, hi) with every md-th unit kept.
template <int ROWS, int R, bool NOMASK>
__device__ __forceinline__ void walk_run_bounds(const WalkD& w, const int (&nr)[ROWS], const int (&rs)[ROWS][R],
                                                const int (&rst)[ROWS][R], const int (&rc)[ROWS][R], int (&lo)[ROWS][R],
                                                int (&hi)[ROWS][R], int (&md)[ROWS][R]) {
#pragma unroll
  for (int h = 0; h < ROWS; ++h)
#pragma unroll
    for (int r = 0; r < R; ++r) {
      lo[h][r] = 0; hi[h][r] = 0; md[h][r] = 1;
      if (!NOMASK && r < nr[h]) {
        if (w.step > 1) {  // lattice walk: the run shares the walk's lattice
          lo[h][r] = (rs[h][r] - w.base) / w.step;
          hi[h][r] = lo[h][r] + rc[h][r];
        } else {
          lo[h][r] = rs[h][r] - w.base;
          hi[h][r] = lo[h][r] + (rc[h][r] - 1) * rst[h][r] + 1;
          md[h][r] = rst[h][r];
        }
        // Only keys of this walk: a run the plan covers by another walk may start past its end,
        // inside the last tile's zero-filled padding (a 128-key tile's padding reaches further
        // than a 64-key one's: bc=128 counted those zeros as kept keys).
        hi[h][r] = min(hi[h][r], w.count);
      }
    }
}
