#pragma once
// CUDA code generation: Problem + ACSR -> one self-contained CUDA C++ translation unit (no
// #include, so NVRTC needs no header path) holding the fused kernels and the three-kernel SPLAT
// pipeline, specialised to the pattern: sizes, scale, run families and row classes are
// compile-time constants; only tabulated segments and the pipeline's compressed row offsets live
// in a device table. The stages: analysis/structure.h (bands, lattices, global keys) -> plan.h
// (tiles) -> select.h (KernelSpecs) -> emit.h (one emitter per kernel family).
//
// Every entry point takes the same parameters (see kernel_params()):
//   (const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table)
// with q, o [batch, heads, seq_len, head_dim] and k, v [batch, kv_heads, kv_len, head_dim], row-major,
// in the problem's dtype (tf32: fp32 storage). Launch: grid (grid_x, batch*heads), block `block`.
// A packed variable-length batch (Problem::varlen; fused kernels only) adds `const int* cu_seqlens`:
// q, o [total_tokens, heads, head_dim], k, v [total_tokens, kv_heads, head_dim], grid (grid_x,
// sequences*heads). CodegenOptions::save_lse adds `float* lse` last: each row's log-sum-exp.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/codegen/plan.h"
#include "libsplat/codegen/select.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

enum class KernelKind { Fused, Pipeline };
const char* kernel_kind_name(KernelKind);  // "fused", "pipeline"

// The fused kernels' tuning parameters; 0 / -1 pick the measured defaults (select.cpp: configure();
// docs/performance.md). Everything else about a kernel follows from the target, the problem and the
// plan.
struct KernelTuning {
  int warp_rows = 0;    // mw: mma.sync bf16/fp16, rows per warp, 16 (4 warps) or 32 (2 warps); 0: auto
  int stages = 0;       // stages: K/V stages (cp.async or TMA), 2 or 3; 0: auto
  int key_tile = 0;     // bc: mma.sync bf16/fp16, keys per online-softmax step, 64 or 128; 0: auto (64)
  int min_blocks = -1;  // minb: __launch_bounds__ minimum blocks per SM, 0 (none) .. 16; -1: auto
  int q_shared = -1;    // qs: wgmma, Q in shared memory (1) or registers (0); -1: auto
  int decode = -1;      // decode: the decode engine wherever it takes the problem (1), never (0); -1: where it
                        // takes an fp32/tf32 problem (decode_engine, plan.h)
  bool operator==(const KernelTuning&) const = default;
};

// Parses "key=value,..." with keys mw (16|32), stages (2|3), bc (64|128), minb (0..16), qs (0|1), decode (0|1),
// e.g. `splatc emit --tune mw=32,stages=3`. Throws std::invalid_argument.
KernelTuning parse_tuning(const std::string& spec);
// The tuning as parse_tuning reads it (only the keys that are set; "" for the defaults).
std::string format_tuning(const KernelTuning& tuning);

// Debug switches for tests, not tuning: they select code paths that the measured defaults reach
// only rarely, so that tests and the GPU check exercise them.
struct CodegenTestHooks {
  // wgmma: every checked row sum fails, so every key tile takes the rare recompute with row maxima.
  bool fail_sum_checks = false;
};

struct CodegenOptions {
  // Target architecture ("sm_90a", "sm_80", ...): the engine follows it (choose_engine: wgmma on
  // sm_90a; empty or another arch: the portable mma.sync engines).
  std::string arch;
  bool fused = true;
  bool pipeline = true;
  // Save each row's softmax statistics for a backward pass: the entry points take one more
  // parameter, `float* lse` (lse_param()), last.
  bool save_lse = false;
  KernelTuning tuning;
  CodegenTestHooks test;
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
// [batch*kv_heads*kv_len, head_dim]: dims innermost first, byte strides of dims 1.., a box of 64 rows
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
  bool varlen = false;                 // a packed variable-length batch (Problem::varlen): cu_seqlens
  bool save_lse = false;               // the entry points take `float* lse` (CodegenOptions::save_lse)
  std::string engine;                  // fused kernel's engine: "wgmma", "mma.sync", "mma.sync tf32",
                                       // "mma.sync 3xtf32", "cuda cores", ...
  std::string pattern_hash;            // "fnv1a64:<16 hex>" of the shape and the ACSR
  Plan plan;
  Selection selection;                 // the fused kernels' specs (launch order) and the engine
  int64_t max_row_runs = 0;
  // Tensor maps the fused kernels' TMA loads read (parameter tmaps), in order: K and V for unit-step
  // walks, K and V for stride-2 walks, then (a lattice pass) K and V for its stride; a packed batch's
  // band: K and V over its tokens only; empty when no fused kernel uses TMA.
  std::vector<TensorMapDesc> tensor_maps;
};

// The pipeline (and bench's float64 reference) keep a query row in shared memory.
inline constexpr int64_t kPipelineMaxHeadDim = 4096;

// Throws splat::Error when the problem does not fit the kernels asked for. With both kinds asked
// for, a head_dim no fused engine takes (select.h: choose_engine) leaves the fused kernels out: the
// module holds the pipeline only (GeneratedModule::fused empty; selection.engine says why).
GeneratedModule generate(const Problem& problem, const Acsr& acsr, const CodegenOptions& = {});

// The parameter layout shared by all entry points.
const std::vector<ParamDesc>& kernel_params();
// The fused entry points' one more parameter in a packed variable-length batch (Problem::varlen).
const ParamDesc& varlen_param();
// Every entry point's last parameter when the module saves the softmax statistics (save_lse).
const ParamDesc& lse_param();

// manifest.json content. target: "cuda" or "ptx"; arch e.g. "sm_90"; files: emitted file names.
nlohmann::json manifest(const Problem& problem, const GeneratedModule& mod, const std::string& target,
                        const std::string& arch, const std::vector<std::string>& files);

}  // namespace splat
