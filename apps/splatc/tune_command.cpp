// splatc tune: flag parsing only; the tuner is libsplat/tune, the cache libsplat/compile/tuning_cache.
#include <spdlog/spdlog.h>

#include <iostream>
#include <algorithm>
#include <memory>
#include <thread>

#include "commands.h"
#include "common/cli.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/runtime/runtime.h"
#include "libsplat/tune/tune.h"
#include "tuning_flags.h"

namespace splatc {
namespace {

struct TuneArgs {
  std::vector<std::string> patterns;
  ProblemFlags problem;
  CacheFlags cache;
  double budget = 0;   // seconds, all problems; 0: 60 per problem
  double margin = 2;   // percent
  int jobs = 0;        // parallel compiles; 0: half the hardware threads, 1 to 8
  splat::TuneOptions opt;
};

// Records one problem's winner in the cache file (read-modify-write, temp + rename).
void record(const TuneArgs& a, const splat::TuneResult& r) {
  const std::string path = a.cache.path();
  if (!r.entry || path.empty()) return;
  splat::TuningCache update;
  update.entries[r.key] = *r.entry;
  splat::merge_tuning_cache(path, update, !a.cache.explicit_file());
  std::cout << "  recorded in " << path << "\n";
}

int run_tune(TuneArgs& a) {
  const std::vector<splat::Problem> problems = a.problem.load(a.patterns);
  if (!a.opt.arch.empty()) {
    try {
      splat::parse_arch(a.opt.arch);
    } catch (const std::invalid_argument& e) {
      throw splat::Error("", "--arch", e.what());
    }
  }
  a.cache.load(true);
  if (a.cache.path().empty() && !a.cache.none)
    spdlog::warn("no tuning cache file (neither XDG_CACHE_HOME nor HOME is set, and no --cache): nothing is recorded");
  splat::TuneOptions opt = a.opt;
  opt.budget_seconds = a.budget > 0 ? a.budget : 60.0 * static_cast<double>(problems.size());
  opt.margin = a.margin / 100;
  opt.compile_ahead = a.jobs > 0 ? a.jobs : std::clamp(static_cast<int>(std::thread::hardware_concurrency() / 2), 1, 8);
  std::string device;
  std::vector<splat::TuneResult> results;
  bool header = false;
  results = splat::tune(problems, opt, device, [&](const splat::TuneResult& r) {
    if (!header) std::cout << "device: " << device << "\n";
    header = true;
    std::cout << splat::format_tune_result(r);
    record(a, r);
    std::cout.flush();
  });
  int rc = cli::kOk;
  for (const splat::TuneResult& r : results) {
    if (!r.default_ok) spdlog::error("{}: {}", r.name, r.decision);
    if (r.check_failures > 0)
      spdlog::error("{}: {} candidate(s) failed the float64 check (discarded; listed above)", r.name, r.check_failures);
    if (!r.default_ok || r.check_failures > 0) rc = cli::kCheckFailed;
  }
  return rc;
}

}  // namespace

Command register_tune(CLI::App& app) {
  auto args = std::make_shared<TuneArgs>();
  CLI::App* sub = app.add_subcommand(
      "tune", "Time the fused kernel's candidate tunings on the GPU (each checked against float64) and record the "
              "fastest in the tuning cache, which emit and bench then use");
  sub->add_option("patterns", args->patterns, "Pattern JSON files")->required()->check(cli::pattern_file());
  args->problem.add(sub);
  sub->add_option("--arch", args->opt.arch,
                  "Compile for this architecture instead of the device's (as bench; the cache entry is for it)");
  sub->add_option("--budget", args->budget,
                  "Seconds for all patterns together (default 60 per pattern); the defaults are always timed")
      ->check(CLI::Range(0.0, 1e7));
  sub->add_option("--margin", args->margin,
                  "Percent a tuning must beat the defaults by to be recorded instead of them (default 2)")
      ->check(CLI::Range(0.0, 50.0));
  sub->add_option("--repeat", args->opt.repeat, "Timed runs per candidate (median), as bench")->check(CLI::Range(1, 100000));
  sub->add_option("--warmup", args->opt.warmup, "Untimed runs first")->check(CLI::Range(0, 1000));
  sub->add_option("--seed", args->opt.seed, "Seed of the random Q, K, V");
  sub->add_option("--jobs", args->jobs, "Candidates compiled in parallel ahead of the GPU (default: half the cores, 1 to 8)")
      ->check(CLI::Range(1, 64));
  args->cache.add(sub, "to record the winners in (read-modify-write)");
  return {sub, [args] { return run_tune(*args); }};
}

}  // namespace splatc
