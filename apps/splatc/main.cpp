// splatc: parses flags and hands the pattern files to libsplat. Subcommands live in
// analysis_commands.cpp (analyze, show) and gpu_commands.cpp (emit, bench); see commands.h.
#include <exception>
#include <vector>

#include "commands.h"
#include "common/cli.h"
#include "libsplat/pattern/pattern.h"

int main(int argc, char** argv) {
  CLI::App app{"splatc: sparse-attention kernels specialised to a pattern"};
  cli::Verbosity verbosity;
  cli::add_common(app, "splatc", verbosity);
  app.require_subcommand(1);
  app.fallthrough();  // -v/-q may also follow the subcommand: `splatc emit P.json -q`
  std::vector<splatc::Command> commands = {
      splatc::register_analyze(app), splatc::register_show(app),
      splatc::register_emit(app), splatc::register_bench(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error(app, e);
  }
  cli::setup_logging("splatc", verbosity);
  // Errors are reported once, here, at the edge.
  try {
    for (const splatc::Command& c : commands)
      if (c.sub && c.sub->parsed() && c.run) return c.run();
  } catch (const splat::Error& e) {
    spdlog::error("{}", e.what());
    return cli::kBadInput;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return cli::kEnvironment;
  }
  spdlog::error("no subcommand ran");
  return cli::kBadInput;
}
