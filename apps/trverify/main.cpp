// trverify: parses flags, loads rule files, hands the rules to the verifier and prints the report.
// Exit codes (docs/cli.md): 0 all as expected, 1 some rule not, 2 bad usage or a file that failed
// to load (the other files are still verified), 3 internal error.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "common/cli.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/report/report.h"
#include "libtensorright/verify/verify.h"

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  CLI::App app{"trverify: verify tensor-graph rewrite rules for every rank and size"};
  cli::Verbosity verbosity;
  cli::add_common(app, "trverify", verbosity);
  std::vector<std::string> paths;
  std::string rule_name, junit_file, dump_smt;
  int jobs = 0;
  double timeout = 10;
  bool check = false, json = false;
  app.add_option("paths", paths, "Rule files, or directories searched recursively for *.tr")->required();
  app.add_option("--rule", rule_name, "Only verify the rule(s) with this name");
  app.add_option("-j,--jobs", jobs, "Rules verified in parallel (default: all cores)")->check(CLI::NonNegativeNumber);
  app.add_option("--timeout", timeout, "Seconds per solver call (default 10)")->check(CLI::PositiveNumber);
  app.add_flag("--check", check, "Compare each verdict with the rule's `expect`; exit 1 on any difference");
  app.add_flag("--json", json, "Print the report as one JSON object on stdout");
  app.add_option("--junit", junit_file, "Also write a JUnit XML report to FILE");
  app.add_option("--dump-smt", dump_smt, "Write one SMT-LIB2 file per solver task into DIR");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error(app, e);
  }
  cli::setup_logging("trverify", verbosity);

  try {
    auto t0 = std::chrono::steady_clock::now();
    tr::report::Batch batch;
    tr::LoadedBatch loaded = tr::load_rule_paths(paths, rule_name);
    for (const auto& f : loaded.failed) std::cerr << f.message << "\n";  // each diagnostic once
    batch.failed_files = loaded.failed;
    const auto& files = loaded.files;
    auto& rules = loaded.rules;
    if (!rule_name.empty() && rules.empty()) {
      std::cerr << "trverify: error: no rule named '" << rule_name << "' in the given files\n";
      return cli::kBadInput;
    }

    tr::VerifyOptions opts;
    opts.timeout_s = timeout;
    opts.jobs = jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    if (!dump_smt.empty()) {
      fs::create_directories(dump_smt);
      opts.dump_smt_dir = dump_smt;
    }
    spdlog::info("verifying {} rule(s) from {} file(s) with {} job(s)", rules.size(), files.size(), opts.jobs);
    batch.results = tr::verify_rules(rules, opts);
    batch.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    if (json)
      std::cout << tr::report::to_json(batch, check).dump(2) << "\n";
    else
      std::cout << tr::report::human(batch, {check, verbosity.quiet, verbosity.verbose > 0});
    if (!junit_file.empty()) {
      std::ofstream out(junit_file);
      out << tr::report::junit(batch, check);
      if (!out) {
        std::cerr << "trverify: error: cannot write " << junit_file << "\n";
        return cli::kEnvironment;
      }
    }
    return tr::report::exit_code(batch, check);
  } catch (const tr::InternalError& e) {
    std::cerr << "trverify: internal error: " << e.what() << "\n";
    return cli::kEnvironment;
  } catch (const std::exception& e) {
    std::cerr << "trverify: error: " << e.what() << "\n";
    return cli::kEnvironment;
  }
}
