#pragma once
// `splatc emit` as a library call: generate the kernels of a pattern, compile them with NVRTC (so an
// emitted .cu is known to build for its architecture; the CUBIN always, for ptxas's resource report),
// and write the .cu, .ptx or .cubin, the per-row table if the plan needs one, and manifest.json (with
// each kernel's registers, spills and occupancy) — all files or none. Per-head patterns: a module
// per head group (files NAME.hG.*) and one manifest.json with the groups' manifests under head_groups.
// The backward pass (pass "backward" or "both"): NAME.bwd.* and the manifest's "backward" section.
#include <string>
#include <vector>

#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/tuning_cache.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

struct EmitOptions {
  std::string target = "cuda";  // "cuda" (the .cu source), "ptx" or "cubin" (for arch)
  std::string arch = "sm_90";
  bool fused = true, pipeline = true;
  bool save_lse = false;  // the entry points save each row's log-sum-exp (`float* lse`, last)
  // Fused-kernel tuning (parse_tuning: `--tune`); it wins over the cache. Unset: the cache's entry
  // for the problem at `arch`, else the measured defaults (resolve_tuning).
  std::optional<KernelTuning> tuning;
  TuningCacheRef cache;  // the tuning cache (splatc: --cache, the default file); none when empty
  std::string nvrtc_cache;  // NVRTC result cache directory (nvrtc_compile's cache_dir); "" = none
  // "forward", "backward" (NAME.bwd.* and the manifest's backward section) or "both" (the forward
  // saves the log-sum-exp, which the backward reads).
  std::string pass = "forward";
  BackwardTuning backward_tuning;  // the backward kernels' (`--tune-backward`)
};

struct EmitResult {
  std::vector<std::string> files;  // the written paths, in order
  std::string selection;           // the tuning and its source, then the kernel selection with its
                                   // reasons (codegen: explain())
  ResolvedTuning tuning;           // the tuning used and where it came from (head group 0's)
  std::string resources;           // one line per kernel: registers, spills, local and shared memory,
                                   // blocks per SM and occupancy (also in the manifest's kernels)
};

// Writes into out_dir (created if missing). Throws splat::Error for bad options, CompileError for
// NVRTC failures, std::runtime_error for I/O.
EmitResult emit(const Problem& problem, const EmitOptions& options, const std::string& out_dir);

}  // namespace splat
