#pragma once
// `splatc emit` as a library call: generate the kernels of a pattern, compile them with NVRTC (so an
// emitted .cu is known to build for its architecture), and write the .cu or .ptx, the per-row table
// if the plan needs one, and manifest.json — all files or none.
#include <string>
#include <vector>

#include "libsplat/pattern/pattern.h"

namespace splat {

struct EmitOptions {
  std::string target = "cuda";  // "cuda" (the .cu source) or "ptx"
  std::string arch = "sm_90";
  bool fused = true, pipeline = true;
  std::string tuning;  // fused-kernel tuning, "key=value,..." as SPLATC_TUNE (docs/splatc-kernels.md); "" = defaults
  std::string nvrtc_cache;  // NVRTC result cache directory (nvrtc_compile's cache_dir); "" = none
};

// Writes into out_dir (created if missing) and returns the written paths in order. Throws
// splat::Error for bad options, CompileError for NVRTC failures, std::runtime_error for I/O.
std::vector<std::string> emit(const Problem& problem, const EmitOptions& options, const std::string& out_dir);

}  // namespace splat
