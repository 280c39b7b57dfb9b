#pragma once
// `splatc bench`: runs the generated kernels on the GPU with seeded random inputs, checks them
// against float64 (host brute force over the pattern for small problems, a plain masked GPU
// reference in float64 for large ones) and times them.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "libsplat/codegen/codegen.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"

namespace splat {

struct BenchOptions {
  bool fused = true, pipeline = true;
  int repeat = 20;                       // timed runs (median/min/max)
  int warmup = 3;
  uint64_t seed = 20261129;
  std::string arch;                      // "" = the device's (sm_90a on sm_90 devices); e.g. sm_90: mma.sync
  KernelTuning tuning;                   // fused-kernel tuning (`--tune`)
  CodegenTestHooks test;                 // test hooks (codegen.h)
  int64_t host_reference_max_cells = int64_t{1} << 22;  // seq_len*kv_len up to this: host float64
  Ceilings ceilings;
};

// The CUDA source of bench's support module for a dtype and head_dim: seeded random inputs
// (splat_fill), conversion to float64 (splat_to_double) and the float64 reference attention
// (splat_reference), instances of libsplat/device/reference.cuh. Not pattern-specific.
std::string support_source(DType t, int64_t hd);

// Benchmarks each problem in turn (all modules are compiled first, in parallel). progress is
// called with each finished result. Throws NoGpuError when no GPU is usable.
std::vector<ProblemResult> bench(const std::vector<Problem>& problems, const BenchOptions& opt,
                                 std::string& device_description,
                                 const std::function<void(const ProblemResult&)>& progress = {});

}  // namespace splat
