#pragma once
// `splatc bench`: runs the generated kernels on the GPU with seeded random inputs, checks them
// against float64 (host brute force over the pattern for small problems, a plain masked GPU
// reference in float64 for large ones) and times them.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/compile/tuning_cache.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"

namespace splat {

struct BenchOptions {
  bool fused = true, pipeline = true;
  int repeat = 20;                       // timed runs (median/min/max)
  int warmup = 3;
  uint64_t seed = 20261129;
  std::string arch;                      // "" = the device's (sm_90a on sm_90 devices); e.g. sm_90: mma.sync
  std::optional<KernelTuning> tuning;    // fused-kernel tuning (`--tune`): wins over the cache
  TuningCacheRef cache;                  // tuning cache: each problem's entry at the arch, else defaults
  CodegenTestHooks test;                 // test hooks (codegen.h)
  bool save_lse = false;                 // the kernels save each row's log-sum-exp, checked against float64
  // --pass: the forward kernels (fused, pipeline), the backward kernels (dQ, dK, dV against float64
  // gradients; the fused forward runs with save_lse to make O and the log-sum-exp), or both (then also
  // the two timed together, "fwd+bwd").
  bool forward = true, backward = false;
  BackwardTuning backward_tuning;        // `--tune-backward` (codegen/backward.h)
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

// The fused kernel of a problem under a tuning, generated and compiled for arch as target (CUBIN,
// or PTX for the driver: load_target, runtime.h) with no GPU, callable from any thread. Throws Error
// when the problem has no fused kernel, CompileError.
struct CompiledFused {
  std::shared_ptr<const GeneratedModule> gen;
  std::string image;
  double compile_seconds = 0;
};
CompiledFused compile_fused(const Problem& p, const Acsr& acsr, const KernelTuning& tuning, const std::string& arch,
                            CompileTarget target);

// One problem's fused kernel in many variants (splatc tune: tune/tune.h): the seeded inputs and the
// float64 reference are made once per problem, then each variant is run, checked and timed exactly as
// bench() does it (BenchOptions: warmup, repeat, seed, host_reference_max_cells).
class FusedBench {
 public:
  // Throws NoGpuError when no GPU is usable, ArchMismatch when the device cannot run opt.arch ("":
  // the device's).
  explicit FusedBench(const BenchOptions& opt);
  ~FusedBench();
  FusedBench(const FusedBench&) = delete;
  FusedBench& operator=(const FusedBench&) = delete;
  const std::string& device_description() const;
  const std::string& arch() const;  // what variants are compiled for
  CompileTarget target() const;     // and as what (compile_fused)
  // Makes p's inputs and reference (the support module is compiled once per dtype and head_dim);
  // returns how the reference was computed. Throws CudaError.
  std::string set_problem(const Problem& p, const Acsr& acsr);
  // Runs, checks against the reference and times a variant of the current problem; a launch that
  // fails is in the result (ran = false, note). Throws CudaError when the GPU context is lost.
  KernelResult run(const CompiledFused& variant);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace splat
