#pragma once
// The plan's tables in the device's layout (libsplat/device/plan.cuh: Item, TileD, GroupD, WalkD),
// one row of integers per struct, its fields in order. The emitters print them as the module's
// `__device__ const` arrays; host tests load them into the device structs to run device code on the
// CPU.
#include <array>
#include <cstdint>
#include <vector>

#include "libsplat/codegen/plan.h"

namespace splat {

using ItemRow = std::array<int64_t, 12>;   // Item
using TileRow = std::array<int64_t, 15>;   // TileD
using GroupRow = std::array<int64_t, 5>;   // GroupD
using WalkRow = std::array<int64_t, 6>;    // WalkD
using SplitRow = std::array<int64_t, 5>;   // SplitD

struct PassTables {
  std::vector<TileRow> tiles;    // a tile's walks follow each other in walks, group after group
  std::vector<GroupRow> groups;
  std::vector<WalkRow> walks;
  // Each group's items sorted by first row, their first rows and the running max of their row ends.
  std::vector<int64_t> group_items, group_row_begin, group_row_end_max;
  std::vector<SplitRow> splits;
};

// The plan's items (Item rows; one placeholder row when there are none).
std::vector<ItemRow> item_rows(const Plan& plan);
// One pass's tables.
PassTables pass_tables(const Plan& plan, const PlanPass& pass);

}  // namespace splat
