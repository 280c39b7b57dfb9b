#pragma once
// Verification of checked rules: rank bound -> per-rank-vector cvc5 queries -> verdict, with a
// minimised, replayed counterexample when a query is satisfiable. docs/verifier.md has the
// encoding and the soundness argument, docs/rank-bound.md the rank bound.
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "libtensorright/base/internal_error.h"
#include "libtensorright/check/ir.h"

namespace tr {

struct VerifyOptions {
  double timeout_s = 10;          // per solver call (cvc5 tlimit-per)
  int jobs = 0;                   // worker threads for verify_rules; 0 = all cores
  std::string dump_smt_dir;       // non-empty: one .smt2 file per task is written there
  std::string rule_filter;        // non-empty: verify_rules only runs rules with this name
  bool minimise = true;           // shrink counterexamples (smallest sizes first)
  bool portfolio = true;          // on `unknown`, retry with other solver configurations
};

// The result for one dtype of a rule.
struct DTypeResult {
  DType dtype = DType::Int;
  Verdict verdict = Verdict::Proved;
  std::map<std::string, int> bounds;  // rclass name -> inferred rank bound k
  int tasks = 0;                      // rank vectors checked (solver tasks)
  double seconds = 0;
  std::string reason;                 // why not proved (timeout/unknown/unsupported), empty otherwise
};

// A concrete instance on which the left side is defined and the right side is undefined or
// differs; every value is printable text. It has been replayed through the concrete evaluator.
struct Counterexample {
  DType dtype = DType::Int;
  std::map<std::string, int> ranks;                         // rclass -> number of axes
  std::vector<std::pair<std::string, std::string>> sizes;   // "A.R" -> "[2, 3]" (per tensor key)
  std::vector<std::pair<std::string, std::string>> maps;    // map name -> "[v0, v1, ...]" per axis
  std::vector<std::pair<std::string, std::string>> scalars; // scalar name -> value
  std::vector<std::pair<std::string, std::string>> index;   // output key -> "[i0, ...]"
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
  double seconds = 0;
  std::string note;                    // one-line explanation when not proved
};

// Internal inconsistencies (e.g. a model that does not replay where no `match` abstracts a sum)
// are thrown as tr::InternalError (base/internal_error.h), naming the rule and its location.

// Severity order used to combine dtype verdicts: counterexample > unsupported > timeout/unknown >
// vacuous > proved. Returns the worse of a and b.
Verdict worse(Verdict a, Verdict b);

RuleResult verify_rule(const Rule& rule, const std::string& file, const VerifyOptions& opts);

// Verifies every rule (file, rule) on a thread pool of opts.jobs workers (one cvc5 Solver per
// thread). Results come back in input order, whatever the scheduling.
std::vector<RuleResult> verify_rules(const std::vector<std::pair<std::string, Rule>>& rules,
                                     const VerifyOptions& opts);

}  // namespace tr
