// Target 4: the verifier (encoder + cvc5) against the concrete evaluator (a differential fuzzer).
//
// A rule that trverify proves must have no concrete counterexample: whenever the verifier says
// `proved` for a dtype, random instances at small ranks, sizes and values (semantics/random_test)
// are evaluated on both sides and any failure that does not involve an approximated exp is a
// finding. The other direction is checked by the verifier itself: a counterexample that does not
// replay through the evaluator is an InternalError, and any exception but a user error is a
// finding.
//
// Two kinds of input:
//  * text starting with `rule` or `#`: a rule file (the seeds are the rules of rules/ and
//    tests/rules/, one per file, which libFuzzer mutates);
//  * anything else: bytes that drive a generator over a small grammar of the rule language
//    (rule_gen.h): a random left side over tensors, scalars, literals, elementwise and shape
//    operators and sums, and a right side made from it by a few rewrites, sound or not.
// The solver budget is small (kBudget units per call, no portfolio, no minimisation), so that an
// input takes milliseconds; a rule it cannot decide is skipped.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "libtensorright/check/batch.h"
#include "libtensorright/check/check.h"
#include "libtensorright/check/error.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/verify/verify.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/fuzz/rule_gen.h"

namespace {

constexpr std::int64_t kBudget = 60'000;
constexpr int kMaxRules = 4;  // a mutated file may hold several rules: verify the first few only

// The rules of `text`, or none when the front end refuses it (a user error).
std::vector<tr::Rule> load(const std::string& text) {
  std::vector<tr::Rule> rules;
  tr::StackThread t([&] {
    try {
      rules = tr::load_rule_source(text, "fuzz.tr").rules;
    } catch (const tr::Error&) {
    } catch (...) {
      fuzz::finding("the front end threw something other than tr::Error: " + fuzz::current_exception_text());
    }
  });
  t.join();
  if (rules.size() > kMaxRules) rules.resize(kMaxRules);
  return rules;
}

void check_proved_dtypes(const tr::Rule& rule, const tr::RuleResult& res, const std::string& text, FuzzedDataProvider& in) {
  tr::Rule proved = rule;
  proved.dtypes.clear();
  for (const tr::DTypeResult& d : res.dtypes)
    if (d.verdict == tr::Verdict::Proved) proved.dtypes.push_back(d.dtype);
  if (proved.dtypes.empty()) return;
  tr::RandomConfig cfg;
  cfg.max_rank = in.ConsumeIntegralInRange<int>(1, 3);
  cfg.map_lo = -in.ConsumeIntegralInRange<int64_t>(0, 3);
  cfg.map_hi = in.ConsumeIntegralInRange<int64_t>(1, 5);
  cfg.value_lo = -in.ConsumeIntegralInRange<int64_t>(0, 4);
  cfg.value_hi = in.ConsumeIntegralInRange<int64_t>(0, 4);
  cfg.attempts = 60;
  cfg.max_checked = 64;
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  tr::RandomTestResult rt;
  tr::StackThread t([&] {
    try {
      rt = tr::random_test(proved, 12, seed, cfg);
    } catch (...) {
      fuzz::finding("the concrete evaluator failed on a proved rule: " + fuzz::current_exception_text() +
                    "\n--- rule ---\n" + text);
    }
  });
  t.join();
  if (!rt.failing) return;
  fuzz::finding("rule " + rule.name + " is proved but has a concrete counterexample:\n" + tr::describe(proved, *rt.failing) +
                "\nfailing at " + (rt.check.failing ? tr::to_string(*rt.check.failing, proved) : std::string("(tensor level)")) +
                ": " + rt.check.at.reason + "\n--- rule ---\n" + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string head(reinterpret_cast<const char*>(data), std::min<size_t>(size, 4));
  const bool is_text = head == "rule" || (size > 0 && data[0] == '#');
  // A rule file: the random-test settings come from a hash of the text.
  std::array<uint8_t, 32> hashed{};
  if (is_text) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t k = 0; k < size; ++k) h = (h ^ data[k]) * 0x100000001b3ull;
    for (size_t k = 0; k < hashed.size(); ++k) hashed[k] = static_cast<uint8_t>(h >> (8 * (k % 8)) ^ (k * 37));
  }
  FuzzedDataProvider in(is_text ? hashed.data() : data, is_text ? hashed.size() : size);
  const std::string text = is_text ? std::string(reinterpret_cast<const char*>(data), size) : fuzz::generate_rule(in);
  if (std::getenv("FUZZ_SHOW")) std::fprintf(stderr, "%s\n", text.c_str());
  std::vector<tr::Rule> rules = load(text);
  if (rules.empty()) return 0;
  tr::VerifyOptions opts;
  opts.budget = kBudget;
  opts.timeout_s = 5;  // a safety net only: the budget decides
  opts.jobs = 1;
  opts.minimise = false;
  opts.portfolio = false;
  std::vector<std::pair<std::string, tr::Rule>> batch;
  for (const tr::Rule& r : rules) batch.emplace_back("fuzz.tr", r);
  std::vector<tr::RuleResult> results;
  try {
    results = tr::verify_rules(batch, opts);
  } catch (...) {
    fuzz::finding("the verifier failed: " + fuzz::current_exception_text() + "\n--- rule ---\n" + text);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    if (std::getenv("FUZZ_SHOW"))
      std::fprintf(stderr, "verdict %s: %s %s\n", results[i].name.c_str(), tr::to_string(results[i].verdict), results[i].note.c_str());
    check_proved_dtypes(rules[i], results[i], text, in);
  }
  return 0;
}
