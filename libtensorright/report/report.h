#pragma once
// Reports of a trverify batch: human text (one line per rule, counterexamples under their rule, a
// summary line), JSON (issue 3 item 7, plus "expect" and "counterexample"), and JUnit XML (one
// testcase per rule). The report stage only formats; it decides nothing about verdicts except
// whether each one is what was asked for (proved, or with --check the rule's `expect`).
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "libtensorright/check/batch.h"
#include "libtensorright/verify/verify.h"

namespace tr::report {

// A file that could not be parsed or type-checked; `message` is the rendered diagnostic.
using LoadFailure = tr::LoadFailure;

struct Batch {
  std::vector<RuleResult> results;
  std::vector<LoadFailure> failed_files;
  double seconds = 0;  // wall time of the whole batch
};

// What counts as success for one rule: with check, the verdict equals the rule's `expect` (a rule
// without `expect` is expected to be proved); without, the verdict is `proved`.
Verdict expected_verdict(const RuleResult& r, bool check);
bool as_expected(const RuleResult& r, bool check);

struct Summary {
  int rules = 0;
  std::map<Verdict, int> verdicts;  // count per verdict
  int as_expected = 0, unexpected = 0;
  int failed_files = 0;
  double seconds = 0;
};
Summary summarize(const Batch& b, bool check);

// 0: every rule as expected and every file loaded; 2: some file failed to load (the rest is still
// reported); 1: otherwise. (3, internal errors, is decided by the app.)
int exit_code(const Batch& b, bool check);

struct HumanOptions {
  bool check = false;
  bool quiet = false;    // only rules that are not as expected, and the summary
  bool verbose = false;  // also per-dtype verdicts, bounds and task counts
};
std::string human(const Batch& b, const HumanOptions& o);

nlohmann::ordered_json to_json(const Batch& b, bool check);
std::string junit(const Batch& b, bool check);

}  // namespace tr::report
