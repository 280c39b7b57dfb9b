// trverify: parses flags, loads rule files, selects the rules (--rule, --shard), and hands them to
// the run (run.h), which verifies, streams and writes the reports. Exit codes (docs/cli.md): 0 all
// as expected, 1 some rule not, 2 bad usage or a file that failed to load (the other files are
// still verified), 3 internal or I/O error, 130/143 interrupted by SIGINT/SIGTERM.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <thread>

#include "common/cli.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/report/select.h"
#include "run.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kTool = "trverify";

// A flag value that does not parse: `trverify: error: --FLAG: MESSAGE`, exit 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

long long whole(const std::string& flag, const std::string& text, long long lo, long long hi, const std::string& what) {
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi)
    throw UsageError(flag + ": expected " + what + ", got '" + text + "'");
  return v;
}

double seconds(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(v) || v <= 0 || v > 1e6)
    throw UsageError(flag + ": expected a number of seconds > 0 (at most 1e6), got '" + text + "'");
  return v;
}

struct Flags {
  cli::Verbosity verbosity;
  std::vector<std::string> paths, rules;
  std::string jobs = "0", budget = std::to_string(tr::kDefaultBudget), timeout = "120";
  std::string junit, sarif, dump_smt, shard, dtypes;
  bool check = false, json = false, jsonl = false, list = false;
};

void add_flags(CLI::App& app, Flags& f) {
  cli::add_common(app, kTool, f.verbosity);
  app.add_option("paths", f.paths, "Rule files, directories searched recursively for *.tr, or - (standard input)")
      ->required()
      ->type_name("PATH");
  app.add_option("--rule", f.rules, "Only the rules whose name matches this glob (*, ?, [...]); may repeat")
      ->allow_extra_args(false)
      ->type_name("GLOB");
  app.add_option("-j,--jobs", f.jobs, "Work items verified in parallel (default 0: all cores)")->type_name("N");
  app.add_option("--budget", f.budget,
                 "Resource units per solver call; the limit that decides timeouts (default " + f.budget + ")")
      ->type_name("N");
  app.add_option("--timeout", f.timeout, "Wall-clock safety net in seconds per solver call (default 120)")->type_name("S");
  auto* check = app.add_flag("--check", f.check, "Compare each verdict with the rule's `expect`; exit 1 on any difference");
  app.add_option("--dtypes", f.dtypes,
                 "Check every rule at machine types: its int becomes the integer types of LIST, its real the float "
                 "types (s8..s64, u8..u64, f16, bf16, f32, f64, ints, floats, comma-separated)")
      ->type_name("LIST")
      ->check([](const std::string& v) { return v.empty() ? std::string("an empty list of types") : std::string(); })
      ->excludes(check);
  auto* json = app.add_flag("--json", f.json, "Print the report as one JSON object on stdout");
  app.add_flag("--jsonl", f.jsonl, "Print one JSON object per rule as it is decided, then a summary object")
      ->excludes(json);
  app.add_option("--junit", f.junit, "Also write a JUnit XML report to FILE")->type_name("FILE");
  app.add_option("--sarif", f.sarif, "Also write a SARIF 2.1.0 report to FILE")->type_name("FILE");
  app.add_option("--dump-smt", f.dump_smt, "Write one SMT-LIB2 file per solver task (and its vacuity query) into DIR")
      ->type_name("DIR");
  app.add_option("--shard", f.shard, "Verify only the K-th of N disjoint slices of the rules (1 <= K <= N)")
      ->type_name("K/N");
  app.add_flag("--list-rules", f.list, "Print FILE:LINE NAME for each selected rule, verify nothing");
}

// --dtypes: a comma-separated list of machine types and the groups `ints` and `floats`.
std::vector<tr::DType> machine_types(const std::string& text) {
  std::vector<tr::DType> out;
  size_t p = 0;
  while (p <= text.size()) {
    size_t q = text.find(',', p);
    std::string w = text.substr(p, q == std::string::npos ? std::string::npos : q - p);
    if (w == "ints") {
      for (auto d : {tr::DType::S8, tr::DType::S16, tr::DType::S32, tr::DType::S64, tr::DType::U8, tr::DType::U16,
                     tr::DType::U32, tr::DType::U64})
        out.push_back(d);
    } else if (w == "floats") {
      for (auto d : {tr::DType::F16, tr::DType::BF16, tr::DType::F32, tr::DType::F64}) out.push_back(d);
    } else if (auto d = tr::dtype_from_string(w); d && tr::is_machine(*d)) {
      out.push_back(*d);
    } else {
      throw UsageError("--dtypes: expected machine types (s8..s64, u8..u64, f16, bf16, f32, f64, ints, floats) "
                       "separated by commas, got '" + w + "'");
    }
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

// Loads and selects; fills run.rules and run.batch.failed_files. Returns false (after printing)
// when a --rule pattern matched nothing.
bool select(const Flags& f, trverify::Run& run) {
  tr::CheckOptions opts;
  if (!f.dtypes.empty()) opts.machine = run.batch.machine = machine_types(f.dtypes);
  tr::LoadedBatch loaded = tr::load_rule_paths(f.paths, "", opts);
  for (const auto& fail : loaded.failed) std::cerr << fail.message << "\n";  // each diagnostic once
  run.batch.failed_files = loaded.failed;
  for (auto& sk : loaded.skipped)
    if (tr::report::glob_selected(sk.second.name, f.rules)) run.batch.skipped.push_back(std::move(sk));
  std::vector<std::string> unmatched;
  run.rules = tr::report::match_rules(std::move(loaded.rules), f.rules, unmatched);
  for (const auto& p : unmatched) cli::usage_error(kTool, "--rule: no rule matches '" + p + "' in the given files");
  if (!unmatched.empty()) return false;
  if (!f.shard.empty()) run.rules = tr::report::shard_rules(std::move(run.rules), tr::report::parse_shard(f.shard));
  return true;
}

int verify(const Flags& f, trverify::Run& run) {
  run.verify.jobs = static_cast<int>(whole("--jobs", f.jobs, 0, 4096, "a whole number >= 0 (0: all cores)"));
  if (run.verify.jobs == 0) run.verify.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  run.verify.budget = whole("--budget", f.budget, 1, 1'000'000'000'000'000LL, "a whole number of resource units >= 1");
  run.verify.timeout_s = seconds("--timeout", f.timeout);
  if (!f.shard.empty()) {
    try {
      tr::report::parse_shard(f.shard);
    } catch (const std::invalid_argument& e) {
      throw UsageError(std::string("--shard: ") + e.what());
    }
  }
  if (!select(f, run)) return cli::kBadInput;
  if (f.list) {
    for (const auto& [file, rule] : run.rules) std::cout << file << ":" << rule.loc.line << " " << rule.name << "\n";
    return run.batch.failed_files.empty() ? cli::kOk : cli::kBadInput;
  }
  if (!f.dump_smt.empty()) {
    std::error_code ec;
    fs::create_directories(f.dump_smt, ec);
    if (ec) throw UsageError("--dump-smt: cannot create directory " + f.dump_smt + ": " + ec.message());
    run.verify.dump_smt_dir = f.dump_smt;
  }
  run.check = f.check;
  run.json = f.json;
  run.jsonl = f.jsonl;
  run.junit = f.junit;
  run.sarif = f.sarif;
  run.human = {f.check, f.verbosity.quiet, f.verbosity.verbose > 0, cli::use_color(STDOUT_FILENO), 0};
  for (const auto& [file, rule] : run.rules)
    run.human.id_width = std::max(run.human.id_width, tr::report::id_width(file, rule.loc.line, rule.name));
  run.progress = !f.verbosity.quiet && isatty(STDERR_FILENO);
  run.batch.started = std::time(nullptr);
  run.batch.budget = run.verify.budget;
  run.batch.timeout_s = run.verify.timeout_s;
  run.batch.shard = f.shard;
  run.batch.version = TRSPLAT_VERSION;
  spdlog::info("verifying {} rule(s) with {} job(s), budget {} units per call", run.rules.size(), run.verify.jobs,
               run.verify.budget);
  return trverify::execute(run);
}

void setup_logging(const cli::Verbosity& v) {
  cli::setup_logging(kTool, v);
  auto logger = spdlog::default_logger();
  logger->set_pattern(std::string(kTool) + ": %^%l%$: %v");
  if (!cli::use_color(STDERR_FILENO))
    for (auto& sink : logger->sinks())
      if (auto* s = dynamic_cast<spdlog::sinks::stderr_color_sink_mt*>(sink.get()))
        s->set_color_mode(spdlog::color_mode::never);
}

}  // namespace

int main(int argc, char** argv) {
  trverify::block_signals();  // before any thread starts: SIGINT/SIGTERM are handled by the run
  CLI::App app{"trverify: verify tensor-graph rewrite rules for every rank and size"};
  Flags flags;
  add_flags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return cli::parse_error_prefixed(app, kTool, e);
  }
  setup_logging(flags.verbosity);
  try {
    trverify::Run run;
    return verify(flags, run);
  } catch (const UsageError& e) {
    return cli::usage_error(kTool, e.what());
  } catch (const tr::InternalError& e) {
    std::cerr << kTool << ": internal error: " << e.what() << "\n";
    return cli::kEnvironment;
  } catch (const std::exception& e) {
    std::cerr << kTool << ": error: " << e.what() << "\n";
    return cli::kEnvironment;
  }
}
