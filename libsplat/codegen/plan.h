#pragma once
// Tile plan: how the fused kernel (and the CPU model that mirrors it) walks an ACSR.
//
// The ACSR's run families become *items*: one run family (closed form) over a progression of rows
// (a segment's rows, or the union of several segments' rows when their families have the same
// closed form), or one tabulated segment. Each item has a row *period* P: rows i and i+P start
// their runs on the same key lattice (start(i+P) - start(i) divisible by the run stride), so a
// row tile of rows {c + P*m} can gather one lattice of keys and its key tiles hold only kept keys
// (this is the phase regrouping of strided and dilated patterns).
//
// Items with the same period form a *pass*. A pass tiles every phase class c of rows
// {c + P*m} by BR rows. In each tile the items with rows there are put into *groups* (affine items
// of one run stride; each tabulated item alone); a group's keys are covered by *walks* (base,
// step, count): the union of the member rows' runs, merged and split where gaps exceed a key tile,
// gathered with step = run stride when the rows share the lattice. The kernel loads each walk in
// key tiles of BC keys, masks each row with its own runs (closed forms; tabulated rows from the
// table) and updates an online softmax. Since a row's runs are disjoint and each run belongs to
// one group, every kept (row, key) is visited exactly once. Several passes (window + strided
// lattice) hand the softmax state (m, l, unnormalised O) over through a workspace; the last pass
// writes O. Walks and groups are computed at generation time and baked into the source.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/analysis/structure.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

struct TileShape {
  int br = 64;  // rows per tile
  int bc = 64;  // keys per key tile
  // Blocks of one pass are row tiles x batch*heads: with fewer than kFillBlocks (few rows against
  // long rows of keys: decode, chunked prefill), the plan splits tiles into split-KV chunks until
  // the pass has about that many. 0: the heads are not known, no such split.
  int64_t batch_heads = 0;
  // Split-KV at all (heavy tiles, too few blocks); not for a packed variable-length batch, whose
  // fused_combine would need the sequences' rows.
  bool split = true;
};
// Two waves of an H200's 132 SMs (an A100 has 108).
inline constexpr int64_t kFillBlocks = 264;
inline constexpr int64_t kFillMinChunk = 4;  // key tiles (docs/performance.md: smaller chunks measured slower)

struct PlanItem {
  int64_t row_begin = 0, row_end = 0, row_stride = 1;  // member rows
  bool tabulated = false;
  AffineRun run;                 // affine items: the closed form (den divides exactly on members)
  int segment = -1;              // source segment (first one when merged)
  int run_index = -1;            // source family in that segment (-1 for tabulated)
  int merged = 1;                // number of source segments merged into this item
  int64_t period = 1;            // row period of its pass
  // Tabulated: offsets (in int32 words) of its row_ptr and runs arrays in the table.
  int64_t tab_row_ptr = -1, tab_runs = -1;
  bool has_row(int64_t i) const {
    return i >= row_begin && i < row_end && (i - row_begin) % row_stride == 0;
  }
};

struct KeyWalk {
  int64_t base = 0, step = 1, count = 0;  // keys base + u*step, u in [0, count)
  // Key tiles [full_begin, full_end) of this walk (tile t: u in [t*bc, t*bc + bc)) in which every
  // row of the tile keeps every key through one of its runs in the group: the kernel skips the
  // mask there. The longest such interval (full tiles elsewhere are masked, which is exact too).
  int64_t full_begin = 0, full_end = 0;
  bool modular = false;  // step 1 while some row's run in the group has a stride > 1
  // Keys read from the plan's table: key u is table[base + u] (the plan's global keys; step 1).
  bool indexed = false;
};

struct PlanGroup {
  bool tabulated = false;
  // The plan's global keys (Plan::global_keys): no items; every row keeps every key of its walks.
  bool all_rows = false;
  std::vector<int> items;        // plan-wide item indices
  std::vector<KeyWalk> walks;    // disjoint key ranges
};

struct PlanTile {
  int64_t phase = 0, m_begin = 0, m_end = 0;  // rows phase + period*m, m in [m_begin, m_end)
  std::vector<PlanGroup> groups;
  int64_t key_tiles = 0;         // key tiles of BC keys over all walks (work estimate)
  // Split-KV: a tile with far more key tiles than the others (global rows) is cut into chunks
  // that run in parallel, each writing a partial softmax state to slot split_slot; a combine
  // kernel merges them. The lead chunk starts from the state handed over by earlier passes.
  int split_slot = -1;
  bool split_lead = false;
};

struct PlanSplit {                // rows of one split tile and its chunks' slots
  int64_t phase = 0, m_begin = 0, m_end = 0;
  int slot_begin = 0, slot_count = 0;
};

struct PlanPass {
  int64_t period = 1;
  std::vector<PlanTile> tiles;   // longest first
  std::vector<PlanSplit> splits;
  int slots = 0;                 // split chunks in this pass
  int max_runs = 1;              // most runs a row has in one affine group (kernel register arrays)
};

// The band kernel's tiles (band_pass, device code): row tile t of a phase holds m in [64t, 64t + 64)
// and walks u from 64t + k_lo in key tiles of 64. A band with global tokens: the plan's tiles of the
// first row tile (the global rows, split-KV) run as tables, every later row tile as the band plus
// one key tile of the global keys outside its rows' windows.
//
// Key tiles of band row tile t of a phase: tile k (first <= k < first + count) covers u in
// [u_start + 64k, u_start + 64k + 64); tiles [full_begin, full_end) keep every key of every real
// row (no mask). From geometry.cuh's band_key_tiles, which band_pass (device code) uses too.
struct BandTile {
  int64_t u_start = 0, first = 0, count = 0, full_begin = 0, full_end = 0;
};
BandTile band_tile(const Band& band, int64_t t);
// Band with globals: whether band row tile t has a key tile of global keys (keys [0, globals)
// that some row of the tile keeps outside its window), and whether row tile t is one of the
// plan's (the first, holding the global rows). From geometry.cuh, as band_pass (device code).
bool band_global_tile(const BandWithGlobals& band, int64_t t);
inline bool band_head_tile(const BandWithGlobals& band, int64_t t) { return 64 * t < band.globals; }

// A window plus a lattice (WindowLattice): the window runs as the band kernel handing its softmax
// state over, then the lattice in closed form (lattice_pass): phase c's row tile t holds m in
// [64t, 64t + 64) and walks every key tile u0 = 64k, k < ceil(rows / 64), masked at the hole and
// past the last key. Lattice key tile k of a row tile t: whether every real row keeps every key
// there (no mask).
bool lattice_tile_full(const Lattice& lat, int64_t t, int64_t k);

// Global keys factored out of the ACSR (analysis: GlobalKeys). The items then describe the rows
// without them, and every tile of the first pass has one more group (all_rows) walking them,
// gathered from the table.
struct PlanGlobalKeys {
  std::vector<Run> runs;        // canonical runs of the keys
  int64_t table = -1;           // word offset of the count sorted keys in Plan::table
  int64_t count = 0;
  // Each row keeps all of them (-1), or a prefix of them: row i keeps the first
  // table[prefix_table + i] (the causal `fixed` pattern's summary columns before row i).
  int64_t prefix_table = -1;
  std::optional<KeyBlocks> blocks;  // blocks a TMA box can load
};

struct Plan {
  int64_t seq_len = 0, kv_len = 0;
  TileShape shape;
  std::vector<PlanItem> items;
  std::vector<PlanPass> passes;
  std::vector<int32_t> table;    // tabulated items' row_ptr and runs, global keys (int32 words)
  // Keys every row keeps (or a prefix of), factored out where that pays (the `fixed` pattern's
  // summary columns: 8 of every 128 keys).
  std::optional<PlanGlobalKeys> global_keys;
  int64_t key_slots = 0;         // (row, key) pairs visited, tile padding included, one head
  int64_t nnz = 0;
  double tile_fill() const { return key_slots ? double(nnz) / double(key_slots) : 1.0; }
};

// The tile shape codegen plans with: the default tiles, and batch*heads (the split that fills the
// GPU) for table kernels only: the closed-form kernels (bands, lattices) walk their own tiles, and
// take no split tiles (kv_len == seq_len there; decode and chunked prefill are never bands).
// decode: the decode engine runs (decode_engine); the split then aims at batch*kv_heads blocks,
// since its blocks serve a K/V head each.
TileShape plan_shape(const Problem& p, const Structure& structure, bool decode = false);

// Query heads per K/V head when the decode engine takes the problem, else 0: not a packed batch or a
// head group, seq_len * (heads / kv_heads) <= 16 (row, query head) pairs, head_dim a multiple of
// 16 bytes of elements up to 256 and at most 1024 pairs x head_dim (its shared memory).
int64_t decode_group(const Problem& p);
inline constexpr int64_t kDecodeMaxPairs = 16;
// Whether the decode engine runs, for KernelTuning::decode (1: wherever it takes the problem; 0:
// never; -1, the default: where it takes an fp32 or tf32 problem, where it was measured faster than
// the tensor-core engines; bf16/fp16 decode keeps them, docs/performance.md).
bool decode_engine(const Problem& p, int decode_tuning);

// Tiles the ACSR. Of the structure's global-key candidates (Structure::global_keys) the one that
// saves the most key tiles is factored out where that pays. Throws std::invalid_argument on an
// ACSR that breaks the contract.
Plan make_plan(const Acsr& acsr, const Structure& structure, const TileShape& shape = {});

// The two plans the backward kernels walk (codegen/backward.h): dQ the row plan, dK and dV the plan
// of the column ACSR (analysis/columns.h: kv_len rows, seq_len columns), both with the forward's
// split-KV rules for batch*heads blocks along grid.y (heavy tiles and too few blocks cut into chunks,
// whose partial sums the kernels add in slot order). Throws Error past the problem's limits.
struct BackwardPlans {
  Plan rows;
  Acsr columns;
  Plan cols;
};
BackwardPlans backward_plans(const Problem& p, const Acsr& acsr);

// Global keys row i keeps (a prefix of them; 0 for padding rows).
int64_t global_prefix(const Plan& plan, int64_t i);
// Key u of a walk.
int64_t walk_key(const Plan& plan, const KeyWalk& w, int64_t u);

// A tabulated segment's row_ptr and runs ({start, stride, count} each) appended to a table of int32
// words; row_ptr and runs receive their word offsets. Throws std::invalid_argument on values out
// of int32 range or a malformed segment.
void append_table_rows(const Segment& seg, std::vector<int32_t>& table, int64_t& row_ptr, int64_t& runs);

// Run of row i in an affine item (false when i is not a member or its count is <= 0).
bool item_run(const PlanItem& item, int64_t i, Run& out);
// Runs of a member row of a tabulated item, read from the table.
std::vector<Run> tab_row_runs(const Plan& plan, const PlanItem& item, int64_t i);
// Runs of row i in a group (all its items; the global keys' runs for an all_rows group).
std::vector<Run> group_row_runs(const Plan& plan, const PlanGroup& g, int64_t i);
// Rows of a tile (size br; -1 marks padding past the phase class).
std::vector<int64_t> tile_rows(const Plan& plan, const PlanPass& pass, const PlanTile& tile);

// Whether every key tile of bc keys (64 or 128) of every walk of the pass is full: every row of
// its tile keeps every key (e.g. 64-aligned BigBird blocks and global tokens, aligned blocks). The
// fused kernel then needs neither run bounds nor masks (NOMASK).
bool pass_unmasked(const PlanPass& pass, int64_t bc);

// One line per item and pass (and the structure's kernels walk, if any), for logs and the emitted
// source's header comment.
std::string describe(const Plan& plan, const StructureKind& structure = Unstructured{});

}  // namespace splat
