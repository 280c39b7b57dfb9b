// trverify: parses flags and hands the rule files to libtensorright.
#include "common/cli.h"

int main(int argc, char** argv) {
  CLI::App app{"trverify: verify tensor-graph rewrite rules for every rank and size"};
  cli::Verbosity verbosity;
  cli::add_common(app, "trverify", verbosity);
  std::vector<std::string> paths;
  app.add_option("paths", paths, "Rule files, or directories searched for *.tr")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error(app, e);
  }
  cli::setup_logging("trverify", verbosity);
  spdlog::error("verification is not implemented yet");
  return cli::kEnvironment;
}
