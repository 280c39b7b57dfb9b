// splatc emit / bench: flag parsing only; the work is in libsplat (codegen, compile, runtime).
#include <spdlog/spdlog.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "commands.h"
#include "common/cli.h"
#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/runtime/runtime.h"

namespace fs = std::filesystem;

namespace splatc {
namespace {

struct EmitArgs {
  std::string pattern, target = "cuda", arch = "sm_90", out, kernel = "both";
};

// Writes all files or none: each goes to a temporary name first, then all are renamed.
void write_all(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(dir);
  std::vector<std::pair<fs::path, fs::path>> done;
  try {
    for (const auto& [name, data] : files) {
      fs::path tmp = dir / ("." + name + ".tmp"), dst = dir / name;
      std::ofstream f(tmp, std::ios::binary);
      f.write(data.data(), static_cast<std::streamsize>(data.size()));
      f.close();
      if (!f) throw std::runtime_error("cannot write " + tmp.string());
      done.push_back({tmp, dst});
    }
  } catch (...) {
    for (auto& [tmp, dst] : done) fs::remove(tmp);
    throw;
  }
  for (auto& [tmp, dst] : done) fs::rename(tmp, dst);
}

int run_emit(const EmitArgs& a) {
  splat::Problem p = splat::load_problem(a.pattern);
  try {
    splat::parse_arch(a.arch);
  } catch (const std::invalid_argument& e) {
    throw splat::Error("", "--arch", e.what());
  }
  splat::Acsr acsr = splat::analyze(p);
  splat::CodegenOptions co;
  co.fused = a.kernel != "pipeline";
  co.pipeline = a.kernel != "fused";
  splat::GeneratedModule mod = splat::generate(p, acsr, co);
  // Always compile: an emitted .cu is known to build for the requested architecture.
  splat::CompileResult ptx = splat::nvrtc_compile(mod.source, p.name + ".cu", a.arch, splat::CompileTarget::Ptx);
  if (!ptx.log.empty()) spdlog::warn("NVRTC: {}", ptx.log);
  std::vector<std::pair<std::string, std::string>> files;
  if (a.target == "cuda")
    files.push_back({p.name + ".cu", mod.source});
  else
    files.push_back({p.name + ".ptx", ptx.image});
  if (!mod.table.empty())
    files.push_back({p.name + ".table.bin",
                     std::string(reinterpret_cast<const char*>(mod.table.data()), mod.table.size() * sizeof(int32_t))});
  std::vector<std::string> names;
  for (auto& f : files) names.push_back(f.first);
  names.push_back("manifest.json");
  nlohmann::json m = splat::manifest(p, mod, a.target, a.arch, names);
  m["table_file"] = mod.table.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.name + ".table.bin");
  m["nvrtc"] = splat::nvrtc_version();
  files.push_back({"manifest.json", m.dump(2) + "\n"});
  write_all(a.out, files);
  for (auto& f : files) std::cout << (fs::path(a.out) / f.first).string() << "\n";
  return cli::kOk;
}

struct BenchArgs {
  std::vector<std::string> patterns;
  std::string kernel = "both";
  int repeat = 20, warmup = 3;
  uint64_t seed = 20261129;
  bool json = false;
};

int run_bench(const BenchArgs& a) {
  std::vector<splat::Problem> problems;
  for (const std::string& f : a.patterns) problems.push_back(splat::load_problem(f));
  splat::BenchOptions opt;
  opt.fused = a.kernel != "pipeline";
  opt.pipeline = a.kernel != "fused";
  opt.repeat = a.repeat;
  opt.warmup = a.warmup;
  opt.seed = a.seed;
  std::string device;
  std::vector<splat::ProblemResult> results;
  try {
    results = splat::bench(problems, opt, device, [](const splat::ProblemResult& r) {
      for (const splat::KernelResult& k : r.kernels)
        spdlog::info("{} {}: {:.1f} us, rel err {:.2e} {}", r.name, k.kind, k.ms_median * 1e3, k.rel_err,
                     k.pass ? "pass" : "FAIL " + k.note);
    });
  } catch (const splat::NoGpuError& e) {
    spdlog::error("{}", e.what());
    return cli::kEnvironment;
  }
  if (a.json)
    std::cout << splat::bench_json(results, device).dump(2) << "\n";
  else
    std::cout << splat::format_bench_table(results, device);
  bool ok = true;
  for (const auto& r : results)
    if (!r.pass()) {
      ok = false;
      for (const auto& k : r.kernels)
        if (!k.pass) spdlog::error("{} ({}): check failed: {}", r.name, k.kind, k.note.empty() ? "error above tolerance" : k.note);
    }
  return ok ? cli::kOk : cli::kCheckFailed;
}

}  // namespace

Command register_emit(CLI::App& app) {
  auto args = std::make_shared<EmitArgs>();
  CLI::App* sub = app.add_subcommand("emit", "Generate CUDA C++ or PTX (NVRTC, no GPU needed) and manifest.json");
  sub->add_option("pattern", args->pattern, "Pattern JSON file")->required()->check(CLI::ExistingFile);
  sub->add_option("--target", args->target, "cuda (the .cu source) or ptx")->check(CLI::IsMember({"cuda", "ptx"}));
  sub->add_option("--arch", args->arch, "GPU architecture (sm_80, sm_90, ...)");
  sub->add_option("-o,--output", args->out, "Output directory")->required();
  sub->add_option("--kernel", args->kernel, "fused, pipeline or both")->check(CLI::IsMember({"fused", "pipeline", "both"}));
  return {sub, [args] { return run_emit(*args); }};
}

Command register_bench(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* sub = app.add_subcommand("bench", "Run, check (against float64) and time the kernels on the GPU");
  sub->add_option("patterns", args->patterns, "Pattern JSON files")->required()->check(CLI::ExistingFile);
  sub->add_option("--kernel", args->kernel, "fused, pipeline or both")->check(CLI::IsMember({"fused", "pipeline", "both"}));
  sub->add_option("--repeat", args->repeat, "Timed runs per kernel (median, min, max)")->check(CLI::Range(1, 100000));
  sub->add_option("--warmup", args->warmup, "Untimed runs first")->check(CLI::Range(0, 1000));
  sub->add_option("--seed", args->seed, "Seed of the random Q, K, V");
  sub->add_flag("--json", args->json, "JSON report on stdout");
  return {sub, [args] { return run_bench(*args); }};
}

}  // namespace splatc
