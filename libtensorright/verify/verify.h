#pragma once
// Verification of checked rules: rank bound -> per-rank-vector cvc5 queries -> verdict, with a
// minimised, replayed counterexample when a query is satisfiable. docs/verifier.md has the
// encoding and the soundness argument, docs/rank-bound.md the rank bound.
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "libtensorright/base/internal_error.h"
#include "libtensorright/check/ir.h"

namespace tr {

// The resource budget per solver call when none is given (docs/cli.md says how it was calibrated).
constexpr std::int64_t kDefaultBudget = 200'000;

// Every limit that can change a verdict is a count of cvc5 resource units (rlimit-per), so that
// the same input gives the same verdicts on an idle and on a loaded machine; the wall clock
// (tlimit-per) is only a safety net, and a call it stops is reported as such.
struct VerifyOptions {
  std::int64_t budget = kDefaultBudget;  // resource units per solver call (cvc5 rlimit-per)
  double timeout_s = 120;         // wall-clock safety net per solver call (cvc5 tlimit-per)
  int jobs = 0;                   // worker threads for verify_rules; 0 = all cores
  std::string dump_smt_dir;       // non-empty: one .smt2 file per task is written there
  std::string rule_filter;        // non-empty: verify_rules only runs rules with this name
  bool minimise = true;           // shrink counterexamples (smallest sizes first)
  bool portfolio = true;          // on `unknown`, retry with other solver configurations
  // When set and true, verify_rules starts no further (rule, dtype) work item; calls in flight
  // run to their limits. Read between work items only.
  const std::atomic<bool>* stop = nullptr;
};

// Which limit ended an inconclusive verdict: the resource budget (deterministic) or the wall clock.
enum class Limit { None, Budget, WallClock };
const char* to_string(Limit);  // "", "budget", "wall clock"

// The result for one dtype of a rule.
struct DTypeResult {
  DType dtype = DType::Int;
  Verdict verdict = Verdict::Proved;
  std::map<std::string, int> bounds;  // rclass name -> inferred rank bound k
  int tasks = 0;                      // rank vectors checked (solver tasks)
  std::int64_t units = 0;             // resource units used by all solver calls (deterministic)
  std::int64_t max_units = 0;         // the most any one call that decided its question used
  Limit limit = Limit::None;          // set when the verdict is timeout
  double seconds = 0;
  std::string reason;                 // why not proved (timeout/unknown/unsupported); for a dtype
                                      // proved by the profile abstraction, that it was; else empty
};

// A concrete instance on which the left side is defined and the right side is undefined or
// differs; every value is printable text. It has been replayed through the concrete evaluator.
struct Counterexample {
  DType dtype = DType::Int;
  std::map<std::string, int> ranks;                         // rclass -> number of axes
  // One exact decimal integer per axis (sizes may exceed int64).
  using Integers = std::vector<std::string>;
  std::vector<std::pair<std::string, Integers>> sizes;      // "A.R" -> {"2", "3"} (per tensor key)
  std::vector<std::pair<std::string, Integers>> maps;       // map name -> a value per axis
  std::vector<std::pair<std::string, std::string>> scalars; // scalar name -> value
  std::vector<std::pair<std::string, Integers>> index;      // output key -> an index per axis
  std::vector<std::pair<std::string, std::string>> inputs;  // "A[R=(0,1)]" -> value
  std::string lhs_value, rhs_value;                         // value, or "undefined"
  std::string text;                                         // readable multi-line rendering
};

struct RuleResult {
  std::string file;
  int line = 0;
  std::string name, title;
  Verdict verdict = Verdict::Proved;   // worst over dtypes
  std::optional<Verdict> expect;
  std::vector<DTypeResult> dtypes;
  std::optional<Counterexample> cex;   // set when verdict == Counterexample
  Limit limit = Limit::None;           // for a timeout: which limit stopped it
  double seconds = 0;
  std::string note;                    // one-line explanation when not proved
};

// Internal inconsistencies (e.g. a model that does not replay where no `match` abstracts a sum)
// are thrown as tr::InternalError (base/internal_error.h), naming the rule and its location.

// Severity order used to combine dtype verdicts: counterexample > unsupported > timeout/unknown >
// vacuous > proved. Returns the worse of a and b.
Verdict worse(Verdict a, Verdict b);

RuleResult verify_rule(const Rule& rule, const std::string& file, const VerifyOptions& opts);

// Verifies every rule (file, rule) with up to opts.jobs (rule, dtype) work items at a time, each
// in a fresh thread with its own cvc5 Solvers (so that no item's solver state depends on what ran
// before it). Results come back in input order, whatever the scheduling.
std::vector<RuleResult> verify_rules(const std::vector<std::pair<std::string, Rule>>& rules,
                                     const VerifyOptions& opts);

// The same, streaming: on_result(i, result) is called once per rule i (an index into `rules`) as
// soon as all its dtypes are decided, in completion order; calls are serialised. When opts.stop
// becomes true, no new work item starts and the function returns once the items in flight end;
// rules not decided by then get no call. An exception from a work item (InternalError) stops the
// others and is rethrown.
using OnResult = std::function<void(std::size_t, RuleResult&&)>;
void verify_rules(const std::vector<std::pair<std::string, Rule>>& rules, const VerifyOptions& opts,
                  const OnResult& on_result);

}  // namespace tr
