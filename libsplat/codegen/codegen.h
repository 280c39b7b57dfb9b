#pragma once
// CUDA code generation: Problem + ACSR -> one self-contained CUDA C++ translation unit (no
// #include, so NVRTC needs no header path) holding the fused kernel (one entry point per pass)
// and the three-kernel SPLAT pipeline, specialised to the pattern: sizes, scale, run families
// and row classes are compile-time constants; only tabulated segments and the pipeline's
// compressed row offsets live in a device table.
//
// Every entry point takes the same parameters (see kernel_params()):
//   (const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table)
// with q, o [batch, heads, seq_len, head_dim] and k, v [batch, heads, kv_len, head_dim], row-major,
// in the problem's dtype (tf32: fp32 storage). Launch: grid (grid_x, batch*heads), block `block`.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

enum class KernelKind { Fused, Pipeline };
const char* kernel_kind_name(KernelKind);  // "fused", "pipeline"

// Fused-kernel tuning knobs; 0 / -1 pick the measured defaults (docs/performance.md).
struct KernelTuning {
  int mma_warp_rows = 0;    // bf16/fp16 tensor cores: rows per warp, 16 (4 warps) or 32 (2 warps); 0: auto
                            // (tf32 tensor cores always use 16)
  int mma_stages = 0;       // tensor cores: cp.async stages, 2 or 3; 0: auto
  int min_blocks = -1;      // __launch_bounds__ min blocks per SM (0: none); -1: auto
  int simt_alias = -1;      // CUDA cores: P^T shares K^T's shared memory (1) or not (0); -1: auto
  int simt_batch = -1;      // CUDA cores: batched K/V global loads (1) or one at a time (0); -1: auto
  int mma_key_tile = 0;     // bf16/fp16 tensor cores: keys per online-softmax step, 64 or 128; 0: auto
  int mma_lazy = -1;        // bf16/fp16 tensor cores: a row's exponent reference moves only when its max rose
                            // by more than 2^8, O rescaled only when some row of the warp moved (1), or
                            // every key tile (0); -1: auto (1 for wgmma, 0 for mma.sync)
  int wgmma = -1;           // bf16/fp16 at head_dim 64/128 compiled for sm_90a: Hopper wgmma engine (1) or
                            // mma.sync (0); -1: auto (wgmma)
  int wg_rows = 0;          // wgmma: rows per block, 64 (one warpgroup) or 128 (two sharing K/V stages; not
                            // for plans with split-KV tiles); 0: auto
  int wg_overlap = -1;      // wgmma: a key tile's O += P.V runs during the next tile's softmax (1; 3 stages)
                            // or is waited for at once (0); -1: auto
  int wg_checked_sums = -1; // wgmma: exponentials against the current references with their row sums checked,
                            // row maxima only when a check fails (1), or row maxima every key tile (0);
                            // 2: every check fails (exercises the recompute; for tests); -1: auto (1; 0
                            // with ovl=1)
  int wg_refill_barrier = -1; // wgmma, one warpgroup: a block barrier before each stage refill (1) or none (0: the
                              // warps' P.V waits suffice); -1: auto (0)
  int wg_q_shared = -1;     // wgmma: Q in shared memory, S = Q.K^T from shared memory only (1), or Q's fragments
                            // in registers (0); -1: auto (1 for multi-run or multi-pass plans)
  int wg_early_wait = -1;   // wgmma: wait for (and fence) a key tile's copies before issuing the next tile's (1),
                            // or after (0); -1: auto (1)
  int wg_tma = -1;          // wgmma, one warpgroup: K/V stages loaded by TMA where every walk has step 1 or 2 (1), or
                            // by cp.async (0); -1: auto (1)
  int wg_band = -1;         // wgmma with TMA stages, band patterns (Plan::band: windows, dilated windows): the table-
                            // free band kernel (1) or the plan's tables (0); -1: auto (1)
  int wg_deferred_pv = -1;  // band kernel: a key tile's P.V left running until the next tile's S is waited for (1),
                            // or waited for at once (0); -1: auto (1)
  int band_edge_masks = -1; // band kernel: a band's edge tiles masked by one comparison per score (1) or by the
                            // full test (0); -1: auto (1 for dilated bands)
  int fp32_x3 = -1;         // fp32 at head_dim % 32 == 0, <= 128: tensor cores as three tf32 products
                            // (3xTF32, MmaTf32x3Engine) (1) or CUDA cores (SimtEngine) (0); -1: auto (3xTF32)
  int nomask = -1;          // table kernels: a pass whose every key tile is full (pass_unmasked) compiled without
                            // run bounds and masks (1), or with them (0); -1: auto (1)
  int pdl = -1;             // wgmma: an entry that reads the previous one's state (lattice kernel, split-KV combine)
                            // launched as a programmatic dependent launch, starting while that one ends (1), or
                            // after it (0); -1: auto (1)
  int block_order = -1;     // split-KV chunks: blocks in launch order take the chunks of every head first, then the
                            // other tiles head by head, in a band with globals' kernel and in table passes (1), or
                            // every tile head by head (0); -1: auto (in a band with globals' kernel only)
  int global_keys = -1;     // plan: scattered keys every row keeps factored out and walked from the table where
                            // that pays (Plan::globals) (1), or left in the rows' runs (0); -1: auto (1)
};

// Parses "key=value,..." with keys mw (16|32), stages (2|3), minb (0..16), alias (0|1), batch (0|1), bc (64|128),
// lazy (0|1), wg (0|1), wgrows (64|128), ovl (0|1), chk (0|1|2), rbar (0|1), qs (0|1), ew (0|1), tma (0|1), band (0|1), dpv (0|1), emask (0|1), x3 (0|1), nomask (0|1), pdl (0|1), order (0|1), gkeys (0|1), e.g. the SPLATC_TUNE environment variable that `splatc bench` reads. Throws
// std::invalid_argument.
KernelTuning parse_tuning(const std::string& spec);

struct CodegenOptions {
  // Target architecture ("sm_90a", "sm_80", ...): arch-specific engines (wgmma on sm_90a) are used
  // only when the module is compiled for that target; empty or another arch: portable mma.sync.
  std::string arch;
  TileShape tile;
  bool fused = true;
  bool pipeline = true;
  KernelTuning tuning;
};

struct KernelDesc {
  std::string name;          // extern "C" entry point
  std::string role;          // "fused pass 1/2 (rows grouped by i mod 64)", "r-sddmm", ...
  int64_t grid_x = 0;        // grid.y = batch*heads
  int block = 128;           // threads
  int64_t smem_dynamic = 0;  // bytes of dynamic shared memory (the static part is in the binary)
  // Launched with programmatic stream serialization (sm_90 programmatic dependent launch): it may
  // start while the previous entry's last blocks run, and waits (griddepcontrol.wait) before it
  // reads what that entry wrote. A plain launch is also correct (the wait returns at once).
  bool programmatic = false;
};

struct ParamDesc {
  std::string name, type, description;
};

// A TMA tensor map (CUtensorMap, 128 bytes, 64-byte aligned) over a 16-bit tensor's rows
// [batch*heads*kv_len, head_dim]: dims innermost first, byte strides of dims 1.., a box of 64 rows
// (its inner dim the whole 128-byte row); 128-byte swizzle, no interleave, zeros out of bounds.
struct TensorMapDesc {
  std::string tensor;  // "k" or "v": the launch's k or v pointer is the global address
  std::vector<uint64_t> dims, strides;
  std::vector<uint32_t> box;
};

struct GeneratedModule {
  std::string name;                    // problem name (file stem of emitted files)
  std::string source;                  // CUDA C++
  std::vector<KernelDesc> fused;       // launch order
  std::vector<KernelDesc> pipeline;    // sddmm, softmax, spmm
  std::vector<int32_t> table;          // device table (int32 words; empty when none is needed)
  int64_t workspace_floats_per_bh = 0; // fused state hand-over between passes (0: single pass)
  int64_t scores_floats_per_bh = 0;    // pipeline compressed scores (= nnz)
  int64_t nnz = 0;
  bool tensor_cores = false;           // fused kernel uses mma.sync (bf16/fp16 m16n8k16, tf32 m16n8k8, fp32 as
                                       // 3xTF32 m16n8k8) or wgmma
  std::string engine;                  // fused kernel's engine: "wgmma", "mma.sync", "mma.sync tf32",
                                       // "mma.sync 3xtf32", "cuda cores", ...
  std::string pattern_hash;            // "fnv1a64:<16 hex>" of the shape and the ACSR
  Plan plan;
  int64_t max_row_runs = 0;
  // Tensor maps the fused kernels' TMA loads read (parameter tmaps), in order: K and V for unit-step
  // walks, K and V for stride-2 walks, then (a lattice pass) K and V for its stride; empty when no
  // fused kernel uses TMA.
  std::vector<TensorMapDesc> tensor_maps;
};

GeneratedModule generate(const Problem& problem, const Acsr& acsr, const CodegenOptions& = {});

// The parameter layout shared by all entry points.
const std::vector<ParamDesc>& kernel_params();

// manifest.json content. target: "cuda" or "ptx"; arch e.g. "sm_90"; files: emitted file names.
nlohmann::json manifest(const Problem& problem, const GeneratedModule& mod, const std::string& target,
                        const std::string& arch, const std::vector<std::string>& files);

}  // namespace splat
