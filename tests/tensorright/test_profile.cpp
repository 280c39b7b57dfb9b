// The per-axis profile abstraction (verify/profile.h, docs/rank-bound.md "Profiles") and the
// nested-division lemma it relies on for conv (encode/builder.cpp): the generalised
// FoldConvInputPad is proved for every rank through it, and it never proves a false rule: every
// mutant of rules/xla-mutants and the false forms below, abstracted at their rank bound directly
// (not only through verify, which refutes them first), stay unproved.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <filesystem>
#include <string>
#include <vector>

#include "support.h"
#include "libtensorright/bound/bound.h"
#include "libtensorright/check/check.h"
#include "libtensorright/encode/encode.h"
#include "libtensorright/verify/profile.h"
#include "libtensorright/verify/verify.h"

using namespace tr;

namespace {

// The abstraction applied to one (rule, dtype) at the rule's rank bound, with `budget` resource
// units per solver call.
profile::Outcome abstract_at_bound(const Rule& rule, DType dt, int64_t budget = 200000) {
  cvc5::Solver s;
  s.setOption("produce-models", "true");
  s.setOption("rlimit-per", std::to_string(budget));
  bound::Bounds b = bound::infer(rule, dt, s);
  enc::Encoder e(s, rule, dt, b.k);
  enc::Query q = e.build();
  return profile::prove(s, e, q, [&](const char*) { return Answer(s.checkSat()); });
}

const char* kConvGeneral = R"(rule g : num {
  rclass B, F, O, S
  map b : B
  map f, i, j : F
  map o : O
  map x, w, k, m, rd : S
  map pl, pi, ph, lo, hi : S >= 0
  map ld : S
  map nlo : S = lo + pl * ld
  map nhi : S = hi + ph * ld
  map nld : S = ld + ld * pi
  tensor IN : {B: b, F: f, S: x}
  tensor W : {F: f, O: o, S: w}
  pre x > 0
  lhs conv(pad(IN, 0, low={S: pl}, interior={S: pi}, high={S: ph}), W, feature={F: i}, spatial={S: k}, low={S: lo}, high={S: hi}, lhs_dilation={S: ld}, rhs_dilation={S: rd})
  rhs conv(IN, W, feature={F: j}, spatial={S: m}, low={S: NLO}, high={S: NHI}, lhs_dilation={S: NLD}, rhs_dilation={S: rd})
  match i == j, k == m
}
)";

std::string conv_rule(const std::string& nlo, const std::string& nhi, const std::string& nld) {
  std::string s = kConvGeneral;
  s.replace(s.find("NLO"), 3, nlo);
  s.replace(s.find("NHI"), 3, nhi);
  s.replace(s.find("NLD"), 3, nld);
  return s;
}

}  // namespace

TEST_SUITE_BEGIN("solver");

TEST_CASE("profiles: the generalised FoldConvInputPad is proved for every rank; wrong paddings are not") {
  Rule good = trtest::one_rule(conv_rule("nlo", "nhi", "nld"));
  for (DType dt : {DType::Int, DType::Real}) {
    profile::Outcome o = abstract_at_bound(good, dt);
    CHECK_MESSAGE(o.proved, o.detail);
    CHECK(o.detail.find("S: ") != std::string::npos);
  }
  // Off by one in each scaled attribute: false for some sizes, so never proved.
  for (const auto& [lo, hi, ld] : std::vector<std::array<std::string, 3>>{
           {"nlo + 1", "nhi", "nld"}, {"nlo", "nhi + 1", "nld"}, {"nlo", "nhi", "nld + 1"}, {"lo + pl", "nhi", "nld"}}) {
    Rule bad = trtest::one_rule(conv_rule(lo, hi, ld));
    profile::Outcome o = abstract_at_bound(bad, DType::Int);
    CHECK_MESSAGE(!o.proved, lo << " " << hi << " " << ld);
  }
}

TEST_CASE("profiles: verify proves the general rule through the abstraction and says so") {
  Rule good = trtest::one_rule(conv_rule("nlo", "nhi", "nld"));
  VerifyOptions opts;
  RuleResult r = verify_rule(good, "t.tr", opts);
  CHECK(r.verdict == Verdict::Proved);
  for (const auto& d : r.dtypes) CHECK(d.reason.find("per-axis profile abstraction") != std::string::npos);
}

TEST_SUITE_END();

TEST_SUITE_BEGIN("corpus");

namespace {

// The abstraction at the bound for every (rule, dtype) of the .tr files under the given folders
// of the source tree whose rule expects `expect` (a form the encoder refuses is skipped).
template <class F>
void for_each_abstracted(std::initializer_list<const char*> dirs, Verdict expect, F f) {
  std::vector<std::filesystem::path> files;
  for (const char* dir : dirs)
    for (const auto& ent : std::filesystem::recursive_directory_iterator(std::string(TRSPLAT_SOURCE_DIR) + dir))
      if (ent.path().extension() == ".tr") files.push_back(ent.path());
  std::sort(files.begin(), files.end());
  for (const auto& path : files)
    for (const Rule& rule : load_rule_file(path.string()).rules) {
      if (rule.expect != expect) continue;
      for (DType dt : rule.dtypes) {
        profile::Outcome o;
        try {
          o = abstract_at_bound(rule, dt, 60000);
        } catch (const enc::Unsupported&) {
          continue;
        }
        f(path.filename().string() + " " + rule.name, o);
      }
    }
}

}  // namespace

// Every rule expected to have a counterexample (the mutants, the false forms of tests/rules) is
// false for some rank and sizes; the abstraction over-approximates the query, so it must never
// answer proved for one, whatever the verifier would have done first.
TEST_CASE("profiles: no false rule of rules/ or tests/rules is proved by the abstraction at its bound") {
  int tried = 0, applicable = 0;
  for_each_abstracted({"/rules", "/tests/rules"}, Verdict::Counterexample, [&](const std::string& what, const profile::Outcome& o) {
    ++tried;
    if (o.detail.find("satisfiable or undecided") != std::string::npos) ++applicable;
    CHECK_MESSAGE(!o.proved, what << ": " << o.detail);
  });
  MESSAGE(tried << " (false rule, dtype) pairs, " << applicable << " of them reached the abstract query (not unsat)");
  CHECK(tried > 250);
  CHECK(applicable > 50);  // the check must exercise the abstraction, not only its refusals
}

// How far the abstraction alone goes on the true rules (it is a fallback in verify; this keeps
// its reach from silently shrinking).
TEST_CASE("profiles: the abstraction alone proves most proved rules of rules/xla") {
  int tried = 0, proved = 0;
  for_each_abstracted({"/rules/xla"}, Verdict::Proved, [&](const std::string&, const profile::Outcome& o) {
    ++tried;
    proved += o.proved;
  });
  MESSAGE(proved << " of " << tried << " (rule, dtype) pairs proved by the abstraction alone");
  CHECK(proved >= 550);  // 558 of 578 on 2026-12-04; the rest are folds (fresh per-axis constants)
}

TEST_SUITE_END();
