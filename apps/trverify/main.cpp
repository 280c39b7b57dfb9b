// trverify: parses flags, loads rule files, hands the rules to the verifier and prints the report.
// Exit codes (docs/cli.md): 0 all as expected, 1 some rule not, 2 bad usage or a file that failed
// to load (the other files are still verified), 3 internal error.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <thread>

#include "common/cli.h"
#include "libtensorright/check/check.h"
#include "libtensorright/report/report.h"
#include "libtensorright/verify/verify.h"

namespace fs = std::filesystem;

namespace {

// Files named on the command line, and *.tr files found (recursively, sorted) under directories.
// A path that does not exist becomes a load failure, so the rest of the batch still runs.
std::vector<std::string> collect(const std::vector<std::string>& paths, std::vector<tr::report::LoadFailure>& failed) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  auto add = [&](const std::string& f) {
    if (seen.insert(fs::path(f).lexically_normal().string()).second) files.push_back(f);
  };
  for (const auto& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (auto it = fs::recursive_directory_iterator(p, fs::directory_options::follow_directory_symlink, ec);
           !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
        if (it->is_regular_file(ec) && it->path().extension() == ".tr") found.push_back(it->path().string());
      if (ec) failed.push_back({p, p + ": error: cannot read directory: " + ec.message()});
      std::sort(found.begin(), found.end());
      for (const auto& f : found) add(f);
    } else if (fs::exists(p, ec)) {
      add(p);
    } else {
      failed.push_back({p, p + ": error: no such file or directory"});
    }
  }
  return files;
}

}  // namespace

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
    std::vector<std::string> files = collect(paths, batch.failed_files);
    for (const auto& f : batch.failed_files) std::cerr << f.message << "\n";

    std::vector<std::pair<std::string, tr::Rule>> rules;
    for (const auto& f : files) {
      try {
        tr::LoadedFile lf = tr::load_rule_file(f);
        spdlog::debug("{}: {} rule(s)", f, lf.rules.size());
        for (auto& r : lf.rules)
          if (rule_name.empty() || r.name == rule_name) rules.emplace_back(f, std::move(r));
      } catch (const tr::Error& e) {
        std::cerr << e.what() << "\n";  // the rendered FILE:LINE:COL diagnostic, printed once
        batch.failed_files.push_back({f, e.what()});
      }
    }
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
