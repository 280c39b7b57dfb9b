#include <algorithm>
#include <sstream>

#include "libsplat/codegen/device_tables.h"
#include "libsplat/codegen/emit.h"

namespace splat::emit {

namespace {

template <size_t N> void print_row(std::ostream& o, const std::array<int64_t, N>& r) {
  o << "{";
  for (size_t x = 0; x < N; ++x) o << (x ? ", " : "") << r[x];
  o << "}";
}

std::string joined(const std::vector<int64_t>& xs) {
  std::ostringstream o;
  for (int64_t x : xs) o << x << ", ";
  return xs.empty() ? "0" : o.str();
}

}  // namespace

void pass_tables(std::ostream& s, const Context& c, size_t pi, const PlanPass& pass, bool unmasked, const std::string& k) {
  const PassTables t = splat::pass_tables(c.plan, pass);
  std::ostringstream tiles, groups, walks;
  size_t w = 0;
  for (const TileRow& tr : t.tiles) {
    tiles << "  ", print_row(tiles, tr), tiles << ",\n";
    for (int64_t x = 0; x < tr[8]; ++x) print_row(walks, t.walks[w++]), walks << ", ";  // the tile's walks, one line
    walks << "\n";
  }
  for (const GroupRow& g : t.groups) groups << "  ", print_row(groups, g), groups << ",\n";
  if (t.groups.empty()) groups << "  {0, 0, 0, 0, 0},\n";
  if (t.walks.empty()) walks << "{0, 1, 0, 0, 0, 0}";
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
    << "__device__ const int " << k << "GroupItems" << pi << "[] = {" << joined(t.group_items) << "};\n"
    << "__device__ const int " << k << "GroupRowBegin" << pi << "[] = {" << joined(t.group_row_begin) << "};\n"
    << "__device__ const int " << k << "GroupRowEndMax" << pi << "[] = {" << joined(t.group_row_end_max) << "};\n";
  if (!t.splits.empty()) {
    s << "// Split-KV tiles {phase, m_begin, m_end, slot_begin, slot_count}: chunks run in parallel, then combine.\n"
      << "__device__ const SplitD " << k << "Splits" << pi << "[] = {\n";
    for (const SplitRow& sp : t.splits) s << "  ", print_row(s, sp), s << ",\n";
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
    gkeys = ", " + std::to_string(g.table) + (g.prefix_table >= 0 ? ", " + std::to_string(g.prefix_table) : "");
  }
  s << "// The decode engine: " << k.engine.decode_pairs << " (row, query head) pair(s) per block, " << k.engine.decode_warps
    << " warps over 32-key steps staged by cp.async, CUDA cores\n"
    << entry(c, k.name, k.block, 0) << "  (void)scores; (void)tmaps;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  s << "  decode_pass<" << c.elt << ", SPLAT_SEQ, SPLAT_KV, SPLAT_HD, " << pass.period << ", " << t.runs << ", " << pass.slots
    << ", " << group << ", " << k.engine.decode_warps << gkeys << ">(DecodeTables{kItems, kTiles0, " << pass.tiles.size()
    << ", kGroups0, kWalks0, kGroupItems0, kGroupRowBegin0, kGroupRowEndMax0}, " << f32_literal(c.scale_log2) << ", "
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
