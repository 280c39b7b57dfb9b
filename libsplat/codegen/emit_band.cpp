#include "libsplat/codegen/emit.h"

namespace splat::emit {
namespace {

// The band_pass call (ends with ";\n"). extra: the template arguments after EMASK (G, B0, BX, LAST);
// block_arg: the band's block number where the entry orders blocks itself.
std::string band_pass_call(const Context& c, const EngineConfig& e, const BandTraits& b, const std::string& extra,
                           const std::string& block_arg) {
  return "band_pass<" + engine_type(c, e) + ", " + c.elt + ", SPLAT_SEQ, SPLAT_HD, " + std::to_string(b.band.dilation) + ", " +
         std::to_string(b.band.k_lo) + ", " + std::to_string(b.band.k_hi) + ", " + (b.edge_masks ? "true" : "false") +
         extra + ">(" + f32_literal(c.scale_log2) + ", " + tensor_args(c) + ", ws, " + c.lse_arg() + ", tmaps" + block_arg + ");\n";
}

}  // namespace

void band(std::ostream& s, const Context& c, const KernelSpec& k) {
  const BandTraits& t = std::get<BandTraits>(k.traits);
  const Band& b = t.band;
  if (t.hands_over)
    s << "\n// Pass 0, the window of a window plus a key lattice: the band kernel; row i keeps keys i + k, " << b.k_lo
      << " <= k <= " << b.k_hi << ", within [0, " << c.p.seq_len << ") (with the lattice: checked on every row of the ACSR); "
      << b.tiles_per_phase() << " row tiles, no tables. It hands its softmax state over (ws) to pass 1.\n";
  else if (c.p.varlen)
    s << "\n// Band kernel of a packed batch: in each sequence of length L, row i < L keeps keys i + k < L, " << b.k_lo
      << " <= k <= " << b.k_hi << " (checked on every row of the ACSR at seq_len " << c.p.seq_len << "); " << b.tiles_per_phase()
      << " row tiles of the longest sequence, no tables.\n";
  else
    s << "\n// Band kernel: row i keeps keys i + " << b.dilation << "*k, " << b.k_lo << " <= k <= " << b.k_hi << ", within [0, "
      << c.p.seq_len << ") (checked on every row of the ACSR); " << b.dilation << " phase(s) of " << b.tiles_per_phase()
      << " row tiles, no tables.\n";
  s << "// " << engine_comment(k.engine, true) << "\n";
  s << entry(c, k.name, k.block, k.engine.min_blocks) << "  (void)scores;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  if (c.p.varlen) {  // a packed batch: row tile blockIdx.x of sequence and head blockIdx.y
    s << "  (void)table;\n  band_pass_varlen<" << engine_type(c, k.engine) << ", " << c.elt << ", SPLAT_SEQ, SPLAT_HD, " << b.k_lo
      << ", " << b.k_hi << ">(" << f32_literal(c.scale_log2) << ", " << tensor_args(c) << ", ws, " << c.lse_arg()
      << ", tmaps, cu_seqlens);\n}\n";
    return;
  }
  // A window's band hands over (G = 0, B0 = 0, BX = 0, LAST = false).
  s << "  (void)table;\n  " << band_pass_call(c, k.engine, t, t.hands_over ? ", 0, 0, 0, false" : "", "") << "}\n";
}

void band_with_globals(std::ostream& s, const Context& c, const KernelSpec& k) {
  const BandWithGlobalsTraits& t = std::get<BandWithGlobalsTraits>(k.traits);
  const Band& b = t.band.band;
  const size_t head_tiles = t.head_pass.tiles.size();
  s << "\n// Band kernel with global tokens: row i >= " << t.globals << " keeps keys i + k, " << b.k_lo << " <= k <= " << b.k_hi
    << ", within [0, " << c.p.seq_len << "), and the global keys [0, " << t.globals << "); rows [0, " << t.globals
    << ") keep every key (checked on every row of the ACSR). Row tiles 1.. of " << b.tiles_per_phase()
    << ": the band's key tiles, then one tile of the global keys outside the rows' windows; row tile 0 (the\n"
    << "// global rows) is the table pass's below, in the same kernel.\n";
  s << "// " << engine_comment(t.band_engine, true) << "\n";
  // The band's blocks are [head_tiles, head_tiles + band_grid) of the grid (band_pass's B0, BX).
  const std::string band_call =
      band_pass_call(c, t.band_engine, t.band,
                     ", " + std::to_string(t.globals) + ", " + std::to_string(head_tiles) + ", " + std::to_string(t.band_grid),
                     t.chunks_first ? ", lin - nc" : "");
  pass_tables(s, c, 0, t.head_pass, t.head.unmasked);
  s << "// " << engine_comment(k.engine, false) << "\n";
  s << entry(c, k.name, k.block, k.engine.min_blocks) << "  (void)scores;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  if (t.chunks_first) {
    // Blocks in launch order take the chunks of every head first (chunk 0 of each head, then chunk
    // 1, ...), then the band's blocks, in band_pass's own order.
    s << "  const i64 lin = blockIdx.x + (i64)gridDim.x * blockIdx.y, nc = (i64)" << t.chunks << " * gridDim.y;\n"
      << "  if (lin >= nc) {\n    " << band_call << "    return;\n  }\n"
      << "  const int tix = (int)(lin / gridDim.y);\n  const i64 bhx = lin % gridDim.y;\n";
  } else {
    s << "  if (blockIdx.x >= " << head_tiles << ") {\n    " << band_call << "    return;\n  }\n";
  }
  s << "  " << fused_pass_call(c, k, t.head, t.head_pass, t.chunks_first ? ", tix, bhx" : "") << "}\n";
}

void lattice(std::ostream& s, const Context& c, const KernelSpec& k) {
  const Lattice& L = std::get<LatticeTraits>(k.traits).lattice;
  s << "\n// Pass 1, the key lattice: row c + " << L.period << "*m keeps keys c + " << L.period << "*u, u < " << L.rows
    << ", outside u - m in [" << L.hole_lo << ", " << L.hole_hi << "] (the window's; checked on every"
    << " row of the ACSR); " << L.period << " phases of " << L.tiles_per_phase()
    << " row tiles, each walking every key tile, no tables; its state merged with pass 0's at the end.\n";
  s << "// " << engine_comment(k.engine, true) << "\n";
  s << entry(c, k.name, k.block, k.engine.min_blocks) << "  (void)scores;\n";
  if (k.launch_dependents) s << "  pdl_launch_dependents();\n";
  s << "  (void)table;\n  lattice_pass<" << engine_type(c, k.engine) << ", " << c.elt << ", SPLAT_SEQ, SPLAT_HD, " << L.period
    << ", " << L.hole_lo << ", " << L.hole_hi << (k.programmatic ? ", true" : ", false") << ">("
    << f32_literal(c.scale_log2) << ", " << tensor_args(c) << ", ws, " << c.lse_arg() << ", tmaps);\n}\n";
}

}  // namespace splat::emit
