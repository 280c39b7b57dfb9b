#include "libsplat/codegen/device_tables.h"

#include <algorithm>

namespace splat {

std::vector<ItemRow> item_rows(const Plan& plan) {
  std::vector<ItemRow> rows;
  for (const PlanItem& it : plan.items) {
    const AffineRun& a = it.run;
    rows.push_back({it.row_begin, it.row_end, it.row_stride, a.start_slope, a.start_offset, a.stride, a.count_slope,
                    a.count_offset, a.den, it.tabulated ? 1 : 0, it.tab_row_ptr, it.tab_runs});
  }
  if (rows.empty()) rows.push_back({0, 0, 1, 0, 0, 1, 0, 0, 1, 0, -1, -1});
  return rows;
}

PassTables pass_tables(const Plan& plan, const PlanPass& pass) {
  PassTables t;
  // A group's items sorted by first row, with the running max of row ends: rows find their items by
  // binary search (a lattice group can hold one item per row block).
  auto sorted_items = [&](const PlanGroup& g) {
    std::vector<int> sorted = g.items;
    std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
      return plan.items[static_cast<size_t>(a)].row_begin < plan.items[static_cast<size_t>(b)].row_begin;
    });
    return sorted;
  };
  int64_t ng = 0, nw = 0, ni = 0;
  for (const PlanTile& tile : pass.tiles) {
    int64_t walk_total = 0, item_total = 0;
    for (const PlanGroup& g : tile.groups) {
      walk_total += static_cast<int64_t>(g.walks.size());
      item_total += static_cast<int64_t>(g.items.size());
    }
    std::vector<int64_t> first4;
    for (const PlanGroup& g : tile.groups)
      for (int it : sorted_items(g))
        if (first4.size() < 4) first4.push_back(it);
    first4.resize(4, -1);
    t.tiles.push_back({tile.phase, tile.m_begin, tile.m_end, ng, static_cast<int64_t>(tile.groups.size()), tile.split_slot,
                       tile.split_lead ? 1 : 0, walk_total ? nw : -1, walk_total, ni, item_total, first4[0], first4[1],
                       first4[2], first4[3]});
    for (const PlanGroup& g : tile.groups) {
      t.groups.push_back({nw, static_cast<int64_t>(g.walks.size()), ni, static_cast<int64_t>(g.items.size()),
                          g.all_rows ? 2 : g.tabulated ? 1 : 0});
      // An indexed walk (the plan's global keys) has step 0: keys table[base + u].
      for (const KeyWalk& w : g.walks)
        t.walks.push_back({w.base, w.indexed ? 0 : w.step, w.count, w.full_begin, w.full_end, w.modular ? 1 : 0});
      int64_t pm = -1;
      for (int it : sorted_items(g)) {
        const PlanItem& pit = plan.items[static_cast<size_t>(it)];
        pm = std::max(pm, pit.row_end);
        t.group_items.push_back(it);
        t.group_row_begin.push_back(pit.row_begin);
        t.group_row_end_max.push_back(pm);
      }
      nw += static_cast<int64_t>(g.walks.size());
      ni += static_cast<int64_t>(g.items.size());
      ++ng;
    }
  }
  for (const PlanSplit& sp : pass.splits) t.splits.push_back({sp.phase, sp.m_begin, sp.m_end, sp.slot_begin, sp.slot_count});
  return t;
}

}  // namespace splat
