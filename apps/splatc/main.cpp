// splatc: parses flags and hands the pattern files to libsplat.
#include "common/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"splatc: sparse-attention kernels specialised to a pattern"};
  cli::Verbosity verbosity;
  cli::add_common(app, "splatc", verbosity);
  app.require_subcommand(1);
  auto* analyze = app.add_subcommand("analyze", "Analyse a pattern and print its ACSR statistics");
  std::string pattern;
  analyze->add_option("pattern", pattern, "Pattern JSON file")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error(app, e);
  }
  cli::setup_logging("splatc", verbosity);
  spdlog::error("analysis is not implemented yet");
  return cli::kEnvironment;
}
