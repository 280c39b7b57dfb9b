#pragma once
// `splatc tune`: for each problem, the candidate tunings of its fused kernels (those that apply to the
// engine and kernels the selection picks), each generated, compiled, run on the GPU, checked against
// float64 and timed as `splatc bench` does (runtime/bench.h: FusedBench), within a time budget, the
// defaults first. The fastest that beats the defaults by more than a margin, confirmed by timing it
// and the defaults again, is the winner; else the defaults win. The winner goes into the tuning cache
// (compile/tuning_cache.h), which emit and bench read.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/tuning_cache.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"
#include "libsplat/runtime/bench.h"

namespace splat {

// The tuning keys that apply to an engine's fused kernels, most promising first: wgmma qs, stages,
// minb; mma.sync (bf16/fp16) mw, minb, stages, bc; tf32 and 3xTF32 minb, stages; none for CUDA cores.
std::vector<std::string> tuning_keys(EngineKind engine);

struct CandidateSet {
  EngineKind engine = EngineKind::CudaCores;
  std::string kernels;                // the selection's kernel families ("band kernel + lattice kernel")
  std::vector<std::string> keys;      // tuning_keys(engine), then decode where the decode engine takes the problem
  std::vector<KernelTuning> tunings;  // the defaults (the empty tuning) first
};

// The candidates for a problem at arch (no GPU): the defaults, then every tuning that sets one of the
// keys (decode 0 and 1 too where the decode engine takes the problem), then two, ..., each key's values in a fixed order (minb: the block counts that cap registers at
// 255, 168 and 128 per thread), keeping only tunings whose kernels differ from every earlier
// candidate's (engine configurations, minb by its register cap). Throws Error when the problem has no
// fused kernel.
CandidateSet tuning_candidates(const Problem& p, const Acsr& acsr, const std::string& arch);

struct TuneOptions {
  std::string arch;            // "" = the device's (as bench)
  double budget_seconds = 60;  // all problems together; each gets an equal share of what is left
  double margin = 0.02;        // a tuning must beat the defaults by more than this fraction
  int repeat = 20, warmup = 3; // timed and untimed runs per candidate (as bench)
  uint64_t seed = 20261129;
  int compile_ahead = 4;       // candidates generated and compiled in parallel ahead of the GPU
  int confirm_rounds = 2;      // the best candidate and the defaults timed again, alternately, and
                               // compared on these timings only
};

struct CandidateResult {
  KernelTuning tuning;
  std::string status;  // "pass", "FAIL: ...", "not run: ...", "skipped: budget"
  KernelResult kernel;
  double us = 0;       // median time (the defaults and the best candidate: the best median of the
                       // confirmation's timings); 0: not timed
};

struct TuneResult {
  std::string name, file, dtype, arch, key, engine, kernels, reference;
  int64_t head_dim = 0;
  std::vector<CandidateResult> candidates;  // in the order they were enumerated
  bool default_ok = false;     // the defaults ran and passed their check (else nothing is recorded)
  int check_failures = 0;      // candidates that ran and failed their check (discarded)
  KernelTuning winner;         // the defaults when they won
  double default_us = 0, winner_us = 0;
  std::string decision;        // why the winner won
  double seconds = 0;
  std::optional<TuningEntry> entry;  // what goes into the cache (when default_ok)
};

// What the tuner runs candidates on: the GPU (FusedBench, runtime/bench.h) in tune(); tests give
// their own.
class CandidateRunner {
 public:
  virtual ~CandidateRunner() = default;
  virtual std::string arch() const = 0;         // what candidates are compiled for (the cache key's arch)
  virtual std::string device() const = 0;       // the device's description
  // The problem the next runs are of: makes its inputs and reference; returns how the reference is made.
  virtual std::string set_problem(const Problem& p, const Acsr& acsr) = 0;
  // Generates and compiles a candidate (called from other threads); throws on failure.
  virtual CompiledFused compile(const Problem& p, const Acsr& acsr, const KernelTuning& tuning) const = 0;
  // Runs, checks and times a compiled candidate of the current problem.
  virtual KernelResult run(const CompiledFused& candidate) = 0;
};

// One problem: the candidates in order within budget_seconds (the defaults always run), the winner
// and the entry to record.
TuneResult tune_problem(CandidateRunner& runner, const Problem& p, const TuneOptions& opt, double budget_seconds);

// Tunes each problem in turn (per-head patterns: each head group, head_group_problems(), with a
// cache entry of its own); done is called with each result (to write the cache as it goes).
// Throws NoGpuError when no GPU is usable, CudaError when the GPU context is lost.
std::vector<TuneResult> tune(const std::vector<Problem>& problems, const TuneOptions& opt, std::string& device_description,
                             const std::function<void(const TuneResult&)>& done = {});

// One problem's table: candidate, time, vs default, status, then the winner.
std::string format_tune_result(const TuneResult& r);

}  // namespace splat
