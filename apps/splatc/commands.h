#pragma once
// splatc subcommands. Each register_* adds its subcommand to the app and returns the function to
// run when that subcommand was given (main.cpp runs it and maps exceptions to exit codes:
// splat::Error and splat::ArchMismatch -> 2 (bad input, message printed once), splat::NoGpuError and
// anything else -> 3).
//   analyze, show: apps/splatc/analysis_commands.cpp (front half: pattern + analysis)
//   emit, bench:   apps/splatc/gpu_commands.cpp      (back half: codegen + GPU, codegen engineer)
//   tune:          apps/splatc/tune_command.cpp      (the tuner; --cache etc.: tuning_flags.h)
// A register_* function may return {nullptr, {}} to add nothing.
#include <CLI/CLI.hpp>

#include <functional>

#include "libsplat/pattern/pattern.h"

namespace splatc {

struct Command {
  CLI::App* sub = nullptr;   // the subcommand, nullptr when none was added
  std::function<int()> run;  // returns the exit code (cli::Exit)
};

// The limits of --max-memory and --max-work (main.cpp), for every load_problem.
splat::Limits& limits();

Command register_analyze(CLI::App& app);
Command register_show(CLI::App& app);
Command register_emit(CLI::App& app);
Command register_bench(CLI::App& app);
Command register_tune(CLI::App& app);  // apps/splatc/tune_command.cpp

}  // namespace splatc
