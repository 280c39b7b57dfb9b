// splatc emit / bench: flag parsing only; the work is in libsplat (codegen, compile, runtime).
#include <spdlog/spdlog.h>

#include <iostream>
#include <memory>
#include <stdexcept>

#include "commands.h"
#include "common/cli.h"
#include "tuning_flags.h"
#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/emit.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/runtime/runtime.h"

namespace splatc {
namespace {

constexpr const char* kTuneHelp =
    "Fused-kernel tuning, key=value,...: mw 16|32 (rows per warp, mma.sync bf16/fp16), stages 2|3, bc 64|128 "
    "(keys per softmax step, mma.sync bf16/fp16), minb 0..16 (min blocks per SM), qs 0|1 (Q in shared memory, "
    "wgmma), decode 0|1 (the decode engine for few query rows; by default on for fp32/tf32 only); unset keys "
    "keep the measured defaults";

// --tune's value as KernelTuning when it was given (a bad value is a usage error: exit 2); unset:
// the tuning cache's, else the defaults.
std::optional<splat::KernelTuning> tuning_flag(const CLI::Option* opt, const std::string& spec) {
  if (!opt || opt->count() == 0) return std::nullopt;
  try {
    return splat::parse_tuning(spec);
  } catch (const std::invalid_argument& e) {
    throw splat::Error("", "--tune", e.what());
  }
}

// --tune-backward's value (a bad one is a usage error: exit 2) and --backward-mode's.
splat::BackwardTuning backward_tuning_flag(const std::string& spec, const std::string& mode) {
  try {
    splat::BackwardTuning t = splat::parse_backward_tuning(spec);
    t.fast = mode == "fast";
    return t;
  } catch (const std::invalid_argument& e) {
    throw splat::Error("", "--tune-backward", e.what());
  }
}
constexpr const char* kBackwardModeHelp =
    "deterministic (default: dQ, dK and dV the same bits run to run) or fast (the dK/dV kernel adds dQ "
    "by fp32 atomics, no dQ kernel)";

constexpr const char* kTuneBackwardHelp =
    "Backward-kernel tuning, key=value,...: stages 2|3, cw 32|64 (walked rows per product step), areg 0|1 (row "
    "operands in registers), minb 0..8 (min blocks per SM), wg 0|1 (bf16/fp16 on wgmma: sm_90a, head_dim 64, the "
    "default there), joint 0|1 (dQ and dK/dV in one launch where both plans have one pass, the default on "
    "wgmma), order 0|1 (the joint launch's blocks: dK/dV of every head first, or head by head); unset keys keep "
    "the defaults";
constexpr const char* kPassHelp =
    "forward, backward (dQ, dK, dV) or both";

struct EmitArgs {
  std::string pattern, out, kernel = "both", tune, tune_backward, backward_mode = "deterministic";
  CLI::Option* tune_opt = nullptr;
  bool explain = false, no_resources = false;
  splat::EmitOptions opt;
  ProblemFlags problem;
  CacheFlags cache;
};

int run_emit(EmitArgs& a) {
  splat::EmitOptions opt = a.opt;
  opt.fused = a.kernel != "pipeline";
  opt.pipeline = a.kernel != "fused";
  opt.tuning = tuning_flag(a.tune_opt, a.tune);
  opt.backward_tuning = backward_tuning_flag(a.tune_backward, a.backward_mode);
  const splat::Problem p = a.problem.load({a.pattern}).front();
  if (!opt.tuning) a.cache.load(false);
  opt.cache = a.cache.ref();
  const splat::EmitResult r = splat::emit(p, opt, a.out);
  if (a.explain) std::cout << r.selection;
  if (!a.no_resources) std::cout << r.resources;
  for (const std::string& path : r.files) std::cout << path << "\n";
  return cli::kOk;
}

struct BenchArgs {
  std::vector<std::string> patterns;
  std::string kernel = "both", tune, pass = "forward", tune_backward, backward_mode = "deterministic";
  CLI::Option* tune_opt = nullptr;
  int repeat = 20, warmup = 3;
  uint64_t seed = 20261129;
  bool json = false, csv = false;
  splat::BenchOptions opt;
  ProblemFlags problem;
  CacheFlags cache;
};

int run_bench(BenchArgs& a) {
  const std::vector<splat::Problem> problems = a.problem.load(a.patterns);
  splat::BenchOptions opt = a.opt;
  opt.fused = a.kernel != "pipeline";
  opt.pipeline = a.kernel != "fused";
  opt.forward = a.pass != "backward";
  opt.backward = a.pass != "forward";
  if (opt.backward && !opt.fused)
    throw splat::Error("", "--pass", "the backward runs after the fused forward kernels: --kernel fused or both");
  opt.backward_tuning = backward_tuning_flag(a.tune_backward, a.backward_mode);
  opt.repeat = a.repeat;
  opt.warmup = a.warmup;
  opt.seed = a.seed;
  opt.tuning = tuning_flag(a.tune_opt, a.tune);
  if (!opt.tuning && opt.fused) a.cache.load(false);
  opt.cache = a.cache.ref();
  std::string device;
  std::vector<splat::ProblemResult> results;
  results = splat::bench(problems, opt, device, [](const splat::ProblemResult& r) {
    for (const splat::KernelResult& k : r.kernels)
      spdlog::info("{} {}: {:.1f} us, rel err {:.2e} {}", r.name, k.kind, k.ms_median * 1e3, k.rel_err,
                   k.pass ? "pass" : "FAIL " + k.note);
  });
  if (a.json)
    std::cout << splat::bench_json(results, device).dump(2) << "\n";
  else if (a.csv)
    std::cout << splat::bench_csv(results, device);
  else
    std::cout << splat::format_bench_table(results, device);
  bool ok = true, internal = false;
  for (const auto& r : results)
    if (!r.internal_error.empty()) {
      internal = true;
      spdlog::error("{}: not checked: a module did not compile (internal error): {}", r.name, r.internal_error);
    } else if (!r.pass()) {
      ok = false;
      for (const auto& k : r.kernels)
        if (!k.pass) spdlog::error("{} ({}): check failed: {}", r.name, k.kind, k.note.empty() ? "error above tolerance" : k.note);
    }
  if (internal) return cli::kEnvironment;  // splatc's own fault, before any failed check
  return ok ? cli::kOk : cli::kCheckFailed;
}

}  // namespace

Command register_emit(CLI::App& app) {
  auto args = std::make_shared<EmitArgs>();
  CLI::App* sub = app.add_subcommand("emit", "Generate CUDA C++, PTX or CUBIN (NVRTC, no GPU needed) and manifest.json");
  sub->add_option("pattern", args->pattern, "Pattern JSON file")->required()->check(cli::pattern_file());
  sub->add_flag("--no-resources", args->no_resources, "Do not print each kernel's registers, spills and occupancy");
  sub->add_option("--target", args->opt.target, "cuda (the .cu source), ptx or cubin (for --arch)")
      ->check(CLI::IsMember({"cuda", "ptx", "cubin"}));
  sub->add_option("--arch", args->opt.arch, "GPU architecture (sm_80, sm_90, sm_90a: Hopper wgmma kernels, ...)");
  sub->add_option("-o,--output", args->out, "Output directory")->required();
  sub->add_option("--kernel", args->kernel, "fused, pipeline or both")->check(CLI::IsMember({"fused", "pipeline", "both"}));
  args->tune_opt = sub->add_option("--tune", args->tune, kTuneHelp);
  sub->add_flag("--lse", args->opt.save_lse,
                "Save each row's log-sum-exp for a backward pass: every entry point takes float* lse, last");
  sub->add_option("--pass", args->opt.pass,
                  std::string(kPassHelp) + ": the backward module NAME.bwd.* and the manifest's backward section (both: "
                  "the forward saves the log-sum-exp)")
      ->check(CLI::IsMember({"forward", "backward", "both"}));
  sub->add_option("--tune-backward", args->tune_backward, kTuneBackwardHelp);
  sub->add_option("--backward-mode", args->backward_mode, kBackwardModeHelp)
      ->check(CLI::IsMember({"deterministic", "fast"}));
  sub->add_flag("--explain", args->explain,
                "Print the tuning and where it came from, then the kernel selection (engine, kernels, launch, reasons)");
  args->problem.add(sub);
  args->cache.add(sub, "to read the tuning from (--tune wins over it)");
  return {sub, [args] { return run_emit(*args); }};
}

Command register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Run, check (against float64) and time the kernels on the GPU");
  sub->add_option("patterns", args->patterns, "Pattern JSON files")->required()->check(cli::pattern_file());
  sub->add_option("--kernel", args->kernel, "fused, pipeline or both")->check(CLI::IsMember({"fused", "pipeline", "both"}));
  sub->add_option("--pass", args->pass,
                  "forward, backward (dQ, dK, dV against float64 gradients, after a forward that saves the "
                  "log-sum-exp) or both (also timed together: fwd+bwd)")
      ->check(CLI::IsMember({"forward", "backward", "both"}));
  sub->add_option("--tune-backward", args->tune_backward, kTuneBackwardHelp);
  sub->add_option("--backward-mode", args->backward_mode, kBackwardModeHelp)
      ->check(CLI::IsMember({"deterministic", "fast"}));
  sub->add_option("--repeat", args->repeat, "Timed runs per kernel (median, min, max)")->check(CLI::Range(1, 100000));
  sub->add_option("--warmup", args->warmup, "Untimed runs first")->check(CLI::Range(0, 1000));
  sub->add_option("--seed", args->seed, "Seed of the random Q, K, V");
  args->tune_opt = sub->add_option("--tune", args->tune, kTuneHelp);
  args->problem.add(sub);
  args->cache.add(sub, "to read each problem's tuning from (--tune wins over it)");
  sub->add_option("--arch", args->opt.arch,
                  "Compile for this architecture instead of the device's (it must run there; e.g. sm_90 on an H200: "
                  "the mma.sync engines)");
  sub->add_flag("--lse", args->opt.save_lse,
                "The kernels also save each row's log-sum-exp, checked against float64");
  sub->add_flag("--test-fail-sum-checks", args->opt.test.fail_sum_checks,
                "Test hook: every checked row sum of the wgmma kernels fails (runs the rare recompute path)");
  CLI::Option* json = sub->add_flag("--json", args->json, "JSON report on stdout (docs/cli.md: schema_version 1)");
  sub->add_flag("--csv", args->csv, "CSV report on stdout: a header, then a line per problem and kernel")->excludes(json);
  return {sub, [args] { return run_bench(*args); }};
}

}  // namespace splatc
