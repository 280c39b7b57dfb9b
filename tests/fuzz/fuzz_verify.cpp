// Target 4: the verifier (encoder + cvc5) against the concrete evaluator (a differential fuzzer).
//
// A rule that trverify proves must have no concrete counterexample: whenever the verifier says
// `proved` for a dtype, random instances at small ranks, sizes and values (semantics/random_test)
// are evaluated on both sides and any failure that does not involve an approximated exp is a
// finding. The other direction is checked by the verifier itself: a counterexample that does not
// replay through the evaluator is an InternalError, and any exception but a user error is a
// finding. The per-axis profile abstraction (verify/profile.h) is also applied to every rule
// directly at its rank bound: it must never prove a dtype the verifier refuted, and a dtype it
// proves is random-tested in the same way.
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

#include "libtensorright/bound/bound.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/check/check.h"
#include "libtensorright/check/error.h"
#include "libtensorright/semantics/semantics.h"
#include "libtensorright/encode/encode.h"
#include "libtensorright/verify/profile.h"
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

// Random instances of `rule` restricted to `dtypes` (each claimed proved by `who`): a concrete
// counterexample is a finding.
void random_check(const tr::Rule& rule, const std::vector<tr::DType>& dtypes, const char* who, const std::string& text,
                  FuzzedDataProvider& in) {
  if (dtypes.empty()) return;
  tr::Rule proved = rule;
  proved.dtypes = dtypes;
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
  fuzz::finding("rule " + rule.name + " is proved by " + who + " but has a concrete counterexample:\n" +
                tr::describe(proved, *rt.failing) + "\nfailing at " +
                (rt.check.failing ? tr::to_string(*rt.check.failing, proved) : std::string("(tensor level)")) + ": " +
                rt.check.at.reason + "\n--- rule ---\n" + text);
}

void check_proved_dtypes(const tr::Rule& rule, const tr::RuleResult& res, const std::string& text, FuzzedDataProvider& in) {
  std::vector<tr::DType> dtypes;
  for (const tr::DTypeResult& d : res.dtypes)
    if (d.verdict == tr::Verdict::Proved) dtypes.push_back(d.dtype);
  random_check(rule, dtypes, "the verifier", text, in);
}

// Whether the per-axis profile abstraction (verify/profile.h), applied directly at the rank bound,
// proves `rule` for `dt` (false when it declines, is undecided or the encoder refuses the rule).
bool profiles_prove(const tr::Rule& rule, tr::DType dt, const std::string& text) {
  bool proved = false;
  // As verify: no meaning at dt (unsupported); and at machine types cvc5 1.0.3 may abort when the
  // budget interrupts its bit-blaster, which verify absorbs in a forked copy and this direct call
  // could not (docs/machine-types.md). verify's own use of the abstraction there is covered by the
  // random testing of what it proves.
  if (tr::dtype_problem(rule, dt) || tr::is_machine(dt)) return false;
  tr::StackThread t([&] {
    try {
      cvc5::Solver s;
      s.setOption("produce-models", "true");
      s.setOption("rlimit-per", std::to_string(kBudget));
      s.setOption("tlimit-per", "5000");  // a safety net only
      tr::bound::Bounds b = tr::bound::infer(rule, dt, s);
      size_t tasks = 1;
      for (int k : b.k) tasks = std::min<size_t>(tasks * static_cast<size_t>(k), 1u << 20);
      if (tasks > 4096) return;  // verify does not attempt such a rule either
      tr::enc::Encoder e(s, rule, dt, b.k);
      tr::enc::Query q = e.build();
      // Two budgets in all, as verify allows it.
      auto units = [&] { return s.getStatistics().get("resource::resourceUnitsUsed").getInt(); };
      const std::int64_t start = units();
      proved = tr::profile::prove(s, e, q, [&](const char*) {
                 if (units() - start > 2 * kBudget) throw tr::profile::Stop{};
                 return tr::Answer(s.checkSat());
               }).proved;
    } catch (const tr::enc::Unsupported&) {
    } catch (...) {
      fuzz::finding("the profile abstraction failed: " + fuzz::current_exception_text() + "\n--- rule ---\n" + text);
    }
  });
  t.join();
  return proved;
}

// The abstraction on every dtype, whatever the verifier decided: it must never prove a dtype the
// verifier refuted with a replayed counterexample, and what it proves is random-tested too.
void check_profiles(const tr::Rule& rule, const tr::RuleResult& res, const std::string& text, FuzzedDataProvider& in) {
  std::vector<tr::DType> dtypes;
  for (const tr::DTypeResult& d : res.dtypes) {
    if (!profiles_prove(rule, d.dtype, text)) continue;
    if (d.verdict == tr::Verdict::Counterexample)
      fuzz::finding("the profile abstraction proves rule " + rule.name + " for " + tr::to_string(d.dtype) +
                    ", which the verifier refuted with a replayed counterexample\n--- rule ---\n" + text);
    dtypes.push_back(d.dtype);
  }
  random_check(rule, dtypes, "the profile abstraction", text, in);
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
    check_profiles(rules[i], results[i], text, in);
  }
  return 0;
}
