#pragma once
// splatc bench's backward run (internal to libsplat/runtime): the forward (with the log-sum-exp)
// makes O, then the backward kernels' dQ, dK and dV are checked against float64 gradients
// (reference.cuh) and timed alone, and with --pass both after the forward in one timed run.
#include <vector>

#include "libsplat/runtime/backward.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/runtime/bench_common.h"
#include "libsplat/runtime/kernel.h"

namespace splat {

// One module of the backward: the problem's, or a head group's (its problem serves group_heads).
struct BackwardPart {
  const Problem* problem;
  const Acsr* acsr;
  const BackwardModule* module;
};

struct BackwardRun {
  const Problem& problem;
  const std::vector<BackwardPart>& parts;  // one, or one per head group
  const Kernel& forward;            // built with save_lse
  const BackwardKernel& backward;
  const bench_detail::Inputs& inputs;
  const bench_detail::Reference& reference;  // its lse: the float64 forward's
  const bench_detail::Support& support;
  const BenchOptions& opt;
  const DeviceBuffer& flush;
  const ProblemResult& result;      // the problem's forward flops, bytes and floors
  double tolerance = 0;
  bool both = false;                // also time forward + backward
};

// "backward" (and with both "fwd+bwd") results. Throws CudaError.
std::vector<KernelResult> run_backward(const BackwardRun& run);

}  // namespace splat
