#include <algorithm>
#include <sstream>

#include "libsplat/codegen/emit.h"

namespace splat::emit {

void pass_tables(std::ostream& s, const Context& c, size_t pi, const PlanPass& pass, bool unmasked, const std::string& k) {
  const Plan& plan = c.plan;
  std::ostringstream tiles, groups, walks, gitems, grbeg, gpmax;
  // A group's items sorted by first row, with the running max of row ends (kGroupRowEndMax):
  // rows find their items by binary search (a lattice group can hold one item per row block).
  auto sorted_items = [&](const PlanGroup& g) {
    std::vector<int> sorted = g.items;
    std::stable_sort(sorted.begin(), sorted.end(), [&](int a, int b) {
      return plan.items[static_cast<size_t>(a)].row_begin < plan.items[static_cast<size_t>(b)].row_begin;
    });
    return sorted;
  };
  int64_t ng = 0, nw = 0, ni = 0;
  for (const PlanTile& t : pass.tiles) {
    // The tile's walks follow each other in kWalks (groups in order, none empty), and so do the
    // groups' items in kGroupItems.
    int64_t walk_total = 0, item_total = 0;
    for (const PlanGroup& g : t.groups) {
      walk_total += static_cast<int64_t>(g.walks.size());
      item_total += static_cast<int64_t>(g.items.size());
    }
    tiles << "  {" << t.phase << ", " << t.m_begin << ", " << t.m_end << ", " << ng << ", " << t.groups.size() << ", "
          << t.split_slot << ", " << (t.split_lead ? 1 : 0) << ", " << (walk_total ? nw : -1) << ", " << walk_total << ", "
          << ni << ", " << item_total;
    std::vector<int> first4;
    for (const PlanGroup& g : t.groups)
      for (int it : sorted_items(g))
        if (first4.size() < 4) first4.push_back(it);
    first4.resize(4, -1);
    for (int it : first4) tiles << ", " << it;
    tiles << "},\n";
    for (const PlanGroup& g : t.groups) {
      groups << "  {" << nw << ", " << g.walks.size() << ", " << ni << ", " << g.items.size() << ", "
             << (g.all_rows ? 2 : g.tabulated ? 1 : 0) << "},\n";
      // An indexed walk (the plan's global keys) has step 0: keys table[base + u].
      for (const KeyWalk& w : g.walks)
        walks << "{" << w.base << ", " << (w.indexed ? 0 : w.step) << ", " << w.count << ", " << w.full_begin << ", "
              << w.full_end << ", " << (w.modular ? 1 : 0) << "}, ";
      int64_t pm = -1;
      for (int it : sorted_items(g)) {
        const PlanItem& pit = plan.items[static_cast<size_t>(it)];
        pm = std::max(pm, pit.row_end);
        gitems << it << ", ";
        grbeg << pit.row_begin << ", ";
        gpmax << pm << ", ";
      }
      nw += static_cast<int64_t>(g.walks.size());
      ni += static_cast<int64_t>(g.items.size());
      ++ng;
    }
    walks << "\n";
  }
  if (ng == 0) groups << "  {0, 0, 0, 0, 0},\n";
  if (nw == 0) walks << "{0, 1, 0, 0, 0, 0}";
  if (ni == 0) gitems << "0", grbeg << "0", gpmax << "0";
  s << "\n// Pass " << pi << ": rows grouped by i mod " << pass.period << ", " << pass.tiles.size()
    << " row tiles (longest first).\n"
    << "// Tiles {phase, m_begin, m_end, group_begin, group_count, split_slot, split_lead, first_walk, walk_total,\n"
    << "//        item_begin, item_total, item0..3}: rows phase + " << pass.period << "*m, m in [m_begin, m_end).\n"
    << "__device__ const TileD " << k << "Tiles" << pi << "[] = {\n" << tiles.str() << "};\n"
    << "// Groups {walk_begin, walk_count, item_begin, item_count, tabulated}: items walked together.\n"
    << "__device__ const GroupD " << k << "Groups" << pi << "[] = {\n" << groups.str() << "};\n"
    << "// Walks {base, step, count, full_begin, full_end, modular}: keys base + u*step, gathered one key tile at a\n"
    << "// time (one line per row tile); key tiles [full_begin, full_end) need no mask (every row keeps every key);\n"
    << "// modular: some row's run has a stride > 1 (its mask tests the residue).\n"
    << (unmasked ? "// Every key tile of this pass is full: compiled without run bounds or masks (NOMASK).\n" : "")
    << "__device__ const WalkD " << k << "Walks" << pi << "[] = {\n" << walks.str() << "};\n"
    << "__device__ const int " << k << "GroupItems" << pi << "[] = {" << gitems.str() << "};\n"
    << "__device__ const int " << k << "GroupRowBegin" << pi << "[] = {" << grbeg.str() << "};\n"
    << "__device__ const int " << k << "GroupRowEndMax" << pi << "[] = {" << gpmax.str() << "};\n";
  if (!pass.splits.empty()) {
    s << "// Split-KV tiles {phase, m_begin, m_end, slot_begin, slot_count}: chunks run in parallel, then combine.\n"
      << "__device__ const SplitD " << k << "Splits" << pi << "[] = {\n";
    for (const PlanSplit& sp : pass.splits)
      s << "  {" << sp.phase << ", " << sp.m_begin << ", " << sp.m_end << ", " << sp.slot_begin << ", " << sp.slot_count << "},\n";
    s << "};\n";
  }
}

std::string fused_pass_call(const Context& c, const KernelSpec& k, const TableTraits& t, const PlanPass& pass,
                            const std::string& tile_args) {
  const std::string pi = std::to_string(t.pass);
  std::string gkeys;
  if (t.global_keys) {
    const PlanGlobalKeys& g = *c.plan.global_keys;
    gkeys = ", " + std::to_string(g.table) + (g.prefix_table >= 0 ? ", " + std::to_string(g.prefix_table) : "");
  }
  return "fused_pass<" + engine_type(c, k.engine) + ", " + c.elt + ", SPLAT_SEQ, SPLAT_HD, " + std::to_string(pass.period) +
         ", " + std::to_string(t.runs) + ", " + std::to_string(pass.slots) + ", " + (t.first ? "true" : "false") + ", " +
         (t.last ? "true" : "false") + ", " + (t.unmasked ? "true" : "false") + gkeys + ">(kItems, kTiles" + pi +
         ", kGroups" + pi + ", kWalks" + pi + ", kGroupItems" + pi + ", kGroupRowBegin" + pi + ", kGroupRowEndMax" + pi +
         ", " + f32_literal(c.scale_log2) + ", " + tensor_args(c) + ", ws, " + c.lse_arg() + ", table, tmaps, " + (c.p.varlen ? "cu_seqlens" : "nullptr") + tile_args + ");\n";
}

// The decode engine's pass (decode_pass): the same tables, a block per (tile, K/V head).
void decode_pass(std::ostream& s, const Context& c, const KernelSpec& k, const TableTraits& t, const PlanPass& pass) {
  const int64_t group = c.p.heads / c.p.kv_heads;
  std::string gkeys;
  if (t.global_keys) {
    const PlanGlobalKeys& g = *c.plan.global_keys;
    gkeys = ", splat::geometry::kDecodeWarps, " + std::to_string(g.table) +
            (g.prefix_table >= 0 ? ", " + std::to_string(g.prefix_table) : "");
  }
  s << "// The decode engine: " << k.engine.decode_pairs << " (row, query head) pair(s) per block, "
    << "8 warps over 32-key steps, CUDA cores\n"
    << entry(c, k.name, k.block, 0) << "  (void)scores; (void)tmaps;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  s << "  decode_pass<" << c.elt << ", SPLAT_SEQ, SPLAT_KV, SPLAT_HD, " << pass.period << ", " << t.runs << ", " << pass.slots
    << ", " << group << gkeys << ">(kItems, kTiles0, " << pass.tiles.size()
    << ", kGroups0, kWalks0, kGroupItems0, kGroupRowBegin0, kGroupRowEndMax0, " << f32_literal(c.scale_log2) << ", "
    << tensor_args(c) << ", ws, " << c.lse_arg() << ", table);\n}\n";
}

void table_pass(std::ostream& s, const Context& c, const KernelSpec& k) {
  const TableTraits& t = std::get<TableTraits>(k.traits);
  const PlanPass& pass = c.plan.passes[t.pass];
  pass_tables(s, c, t.pass, pass, t.unmasked);
  if (k.engine.kind == EngineKind::Decode) return decode_pass(s, c, k, t, pass);
  s << "// " << engine_comment(k.engine, false) << "\n";
  s << entry(c, k.name, k.block, k.engine.min_blocks) << "  (void)scores;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  s << "  " << fused_pass_call(c, k, t, pass, "") << "}\n";
}

void combine(std::ostream& s, const Context& c, const KernelSpec& k) {
  const CombineTraits& t = std::get<CombineTraits>(k.traits);
  const PlanPass& pass = c.plan.passes[t.pass];
  s << entry(c, k.name, k.block, 0) << "  (void)q; (void)k; (void)v; (void)scores; (void)table; (void)tmaps;\n"
    << "  fused_combine<" << c.elt << ", SPLAT_SEQ, SPLAT_HD, " << pass.period << ", " << pass.slots << ", "
    << (t.last ? "true" : "false") << ", " << t.rows_per_block << ", " << t.warps_per_row << (k.programmatic ? ", true" : ", false")
    << ", " << t.blocks_per_tile << ">(kSplits" << t.pass << ", static_cast<" << c.elt << "*>(o), ws, " << c.lse_arg() << ");\n}\n";
}

}  // namespace splat::emit
