#pragma once
// Kernel selection: Problem + Structure + Plan + options -> typed KernelSpecs, one per fused entry
// point in launch order: the kernel family (tables, band, band with global tokens, lattice, split-KV
// combine), the engine and its compile-time configuration, the launch (grid, block, shared memory,
// programmatic launch) and why it was chosen. The emitters (codegen/emit.h) turn each spec into
// source; generate() (codegen.h) runs analysis -> plan -> select -> emit.
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

struct CodegenOptions;  // codegen.h

enum class EngineKind {
  Wgmma,      // Hopper warpgroup MMA (sm_90a), bf16/fp16 at head_dim 64 or 128
  Mma,        // mma.sync m16n8k16, bf16/fp16
  MmaTf32,    // mma.sync m16n8k8 tf32
  MmaTf32x3,  // fp32 as three tf32 products (3xTF32)
  Decode,     // few query rows against long rows of keys: CUDA cores, a K/V head's query heads per block
  CudaCores,  // no tensor-core engine takes the head_dim: no fused kernel (the pipeline only)
};
const char* engine_name(EngineKind);  // "wgmma", "mma.sync", "mma.sync tf32", "mma.sync 3xtf32", "decode", "cuda cores"

struct EngineChoice {
  EngineKind kind = EngineKind::CudaCores;
  bool tensor_cores = false;
  std::string reason;
};

// The engine follows the target and the problem: wgmma on sm_90a (bf16/fp16, head_dim 64 or 128),
// mma.sync elsewhere (bf16/fp16 at head_dim % 16 == 0), tf32 / 3xTF32 for tf32 / fp32 at
// head_dim % 32 == 0; head_dim <= 128.
EngineChoice choose_engine(const Problem& p, const std::string& arch);

// One engine instantiation (the template arguments of the engine's device type) and the launch
// bounds it is compiled with.
struct EngineConfig {
  EngineKind kind = EngineKind::Mma;
  int warp_rows = 16;      // mma.sync bf16/fp16: rows per warp, 16 (4 warps) or 32 (2 warps); else 16
  int stages = 2;          // K/V stages (cp.async, or TMA)
  int key_tile = 64;       // keys per online-softmax step (mma.sync bf16/fp16: 64 or 128)
  int min_blocks = 0;      // __launch_bounds__ minimum blocks per SM (0: none)
  bool q_shared = false;   // wgmma: Q in shared memory (S = Q.K^T from shared memory only)
  bool tma = false;        // wgmma: K/V stages loaded by TMA
  int sum_checks = 1;      // wgmma: checked row sums (1); 2 fails every check (CodegenTestHooks)
  int decode_pairs = 0;    // decode: (row, query head) pairs a block serves (rows per tile x query heads per K/V head)
  int decode_warps = 0;    // decode: warps per block (geometry::decode_warps)
  std::vector<std::string> notes;  // why each value (explain)
  int block() const;                              // threads
  int64_t smem(DType dtype, int64_t head_dim) const;  // dynamic shared memory, bytes
};

enum class KernelFamily { Table, Band, BandWithGlobals, Lattice, Combine };
const char* family_name(KernelFamily);

// fused_pass: one pass of the plan, walked from its tables.
struct TableTraits {
  size_t pass = 0;           // Plan::passes index
  bool first = false, last = false;
  bool unmasked = false;     // every key tile full: no run bounds, no masks (NOMASK)
  int runs = 1;              // run registers per row (1 when unmasked)
  bool global_keys = false;  // walks the plan's global keys (pass 0)
};

// band_pass: a band in closed form, no tables.
struct BandTraits {
  Band band;
  bool edge_masks = false;   // one-sided masks on the band's edge tiles (dilated bands)
  bool hands_over = false;   // a window plus a lattice's window: its state goes to the lattice kernel
};

// One grid: its first blocks run the plan's pass restricted to row tile 0 (the global rows;
// tables, split-KV chunks), the others band_pass with the global keys' tile.
struct BandWithGlobalsTraits {
  TableTraits head;          // pass 0 restricted to row tile 0
  PlanPass head_pass;
  BandTraits band;
  EngineConfig band_engine;
  int64_t globals = 0;
  int64_t band_grid = 0;     // the band's blocks (after the head's)
  bool chunks_first = false; // blocks in launch order take every head's chunks first
  size_t chunks = 0;         // leading split-KV chunks of the head pass
};

// lattice_pass: the lattice of a window plus a lattice, merged with the window's state.
struct LatticeTraits {
  Lattice lattice;
};

// fused_combine: merges the split-KV chunks of a pass.
struct CombineTraits {
  size_t pass = 0;
  bool last = false;
  int rows_per_block = 2, warps_per_row = 4;
  // Blocks per split tile: enough for its rows (64 / rows_per_block for a full tile; 1 for the
  // one-row tiles of decode, whose other blocks would start only to find no row).
  int blocks_per_tile = 32;
};

using KernelTraits = std::variant<TableTraits, BandTraits, BandWithGlobalsTraits, LatticeTraits, CombineTraits>;

struct KernelSpec {
  std::string name, role;
  KernelTraits traits;
  EngineConfig engine;            // unused by Combine
  int64_t grid_x = 0;             // grid.y = batch*heads
  int block = 128;
  int64_t smem = 0;               // dynamic shared memory, bytes
  bool programmatic = false;      // launched as a programmatic dependent launch (waits in-kernel)
  bool launch_dependents = false; // lets the next entry (a programmatic launch) start early
  std::string reason;
  KernelFamily family() const { return static_cast<KernelFamily>(traits.index()); }
};

struct Selection {
  EngineChoice engine;
  std::vector<KernelSpec> fused;  // launch order
  // Tensor maps for TMA loads (GeneratedModule::tensor_maps): needed, and the period / block width
  // of the third view (lattice: its period, width 1; global keys in blocks; 0: none).
  bool tma = false;
  int64_t map_period = 0, map_width = 0;
  std::string grid_y = "batch*heads";  // what grid.y counts ("sequences*heads": a packed batch; "*group_heads": a head group)
};

// Throws splat::Error when the fused kernel is asked for and the problem has no engine.
Selection select_kernels(const Problem& p, const Structure& structure, const Plan& plan, const CodegenOptions& opt);

// The selection as text (splatc emit --explain): engine, then each entry point with its launch,
// configuration and reasons.
std::string explain(const Selection& sel);

}  // namespace splat
