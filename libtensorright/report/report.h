#pragma once
// Reports of a trverify batch: human text (one line per rule, counterexamples under their rule, a
// summary line; also one rule at a time, for streaming), JSON and JSON Lines (docs/cli.md has the
// schema), JUnit XML (one testsuite per file) and SARIF 2.1.0 (one result per rule whose verdict is
// not the expected one). The report stage only formats; it decides nothing about verdicts except
// whether each one is what was asked for (proved, or with --check the rule's `expect`).
//
// Every string that goes into JSON, JUnit or SARIF may hold any bytes (file paths do): invalid
// UTF-8 is replaced by U+FFFD, never an exception.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "libtensorright/check/batch.h"
#include "libtensorright/verify/verify.h"

namespace tr::report {

// Version of the JSON/JSONL report layout; raised when a field changes meaning or goes away.
constexpr int kSchemaVersion = 2;  // 2: sizes, maps, index as arrays of integers

// A file that could not be parsed or type-checked; `message` is the rendered diagnostic.
using LoadFailure = tr::LoadFailure;

// A rule that was selected but not verified (the run was interrupted first).
struct RuleRef {
  std::string file;
  int line = 0;
  std::string name;
};

struct Batch {
  std::vector<RuleResult> results;      // decided rules, in file-then-line order
  std::vector<RuleRef> not_run;         // selected rules without a verdict (interrupted run)
  std::vector<LoadFailure> failed_files;
  std::vector<std::pair<std::string, SkippedRule>> skipped;  // (file, rule) left out at --dtypes
  std::vector<DType> machine;           // --dtypes, empty when not given
  double seconds = 0;                   // wall time of the whole batch
  std::time_t started = 0;              // when the batch started (JUnit timestamps)
  int signal = 0;                       // the signal that interrupted the run, 0 if none
  // What the run was asked for, echoed in the JSON and SARIF reports.
  std::int64_t budget = 0;
  double timeout_s = 0;
  std::string shard;                    // "K/N", empty when the run is not sharded
  std::string version;                  // trverify's version
};

// What counts as success for one rule: with check, the verdict equals the rule's `expect` (a rule
// without `expect` is expected to be proved); without, the verdict is `proved`.
Verdict expected_verdict(const RuleResult& r, bool check);
bool as_expected(const RuleResult& r, bool check);

// "timeout (budget)", "timeout (wall clock)", or the verdict's name.
std::string verdict_label(const RuleResult& r);

struct Summary {
  int rules = 0;                    // decided rules
  std::map<Verdict, int> verdicts;  // count per verdict
  int as_expected = 0, unexpected = 0;
  int not_run = 0;
  int failed_files = 0;
  int skipped = 0;
  double seconds = 0;
};
Summary summarize(const Batch& b, bool check);

// 128 + signal for an interrupted run (130 for SIGINT, 143 for SIGTERM); else 2 when some file
// failed to load (the rest is still reported), 1 when some rule is not as expected, 0 otherwise.
// (3, internal errors, is decided by the app.)
int exit_code(const Batch& b, bool check);

struct HumanOptions {
  bool check = false;
  bool quiet = false;    // only rules that are not as expected, and the summary
  bool verbose = false;  // also per-dtype verdicts, bounds and task counts
  bool color = false;    // ANSI colours for verdicts and mismatches
  size_t id_width = 0;   // width of the FILE:LINE NAME column; 0: computed from the batch
};
// One rule's block (its line, note, per-dtype lines and counterexample), or "" when quiet hides it.
std::string human_rule(const RuleResult& r, const HumanOptions& o);
// What follows the rules: rules not run, files that failed to load, and the summary line.
std::string human_tail(const Batch& b, const HumanOptions& o);
std::string human(const Batch& b, const HumanOptions& o);
size_t id_width(const std::string& file, int line, const std::string& name);

nlohmann::ordered_json rule_json(const RuleResult& r, bool check);
nlohmann::ordered_json to_json(const Batch& b, bool check);
// JSON Lines: one line per rule as it is decided, then this last line (type "summary").
nlohmann::ordered_json jsonl_rule(const RuleResult& r, bool check);
nlohmann::ordered_json jsonl_not_run(const RuleRef& r);
nlohmann::ordered_json jsonl_summary(const Batch& b, bool check);
// j as text (indent < 0: one line); invalid UTF-8 in any string becomes U+FFFD.
std::string dump(const nlohmann::ordered_json& j, int indent = -1);

std::string junit(const Batch& b, bool check);
nlohmann::ordered_json sarif(const Batch& b, bool check);

// s with every invalid UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(const std::string& s);

}  // namespace tr::report
