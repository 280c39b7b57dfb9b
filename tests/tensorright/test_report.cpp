// Report formats: human text, JSON shape (issue 3 item 7), JUnit XML, exit codes.
#include <doctest/doctest.h>

#include "libtensorright/report/report.h"

using namespace tr;
using namespace tr::report;

namespace {
RuleResult rule(const std::string& name, Verdict v, std::optional<Verdict> expect) {
  RuleResult r;
  r.file = "rules/x.tr";
  r.line = 3;
  r.name = name;
  r.title = "A + 0 => A";
  r.verdict = v;
  r.expect = expect;
  r.seconds = 0.25;
  DTypeResult d;
  d.dtype = DType::Int;
  d.verdict = v;
  d.bounds = {{"R", 2}};
  d.tasks = 2;
  d.seconds = 0.1;
  r.dtypes.push_back(d);
  d.dtype = DType::Real;
  r.dtypes.push_back(d);
  if (v == Verdict::Counterexample) {
    Counterexample c;
    c.ranks = {{"R", 1}};
    c.maps = {{"s", "[1]"}};
    c.index = {{"R", "[0]"}};
    c.inputs = {{"A[R=(0)]", "0"}};
    c.lhs_value = "1";
    c.rhs_value = "0";
    c.text = "rank R = 1\nmap s = [1]\nlhs 1, rhs 0";
    r.cex = c;
    r.note = "values differ";
  }
  return r;
}
}  // namespace

TEST_CASE("report: exit codes and expectations") {
  Batch b;
  b.results = {rule("a", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Counterexample)};
  CHECK(exit_code(b, true) == 0);
  CHECK(exit_code(b, false) == 1);  // without --check every rule must be proved
  b.results.push_back(rule("c", Verdict::Proved, std::nullopt));
  CHECK(exit_code(b, true) == 0);   // no expect: expected proved
  b.results.push_back(rule("d", Verdict::Timeout, Verdict::Proved));
  CHECK(exit_code(b, true) == 1);
  b.failed_files.push_back({"bad.tr", "bad.tr:1:2: error: expected `{`"});
  CHECK(exit_code(b, true) == 2);
  Summary s = summarize(b, true);
  CHECK(s.rules == 4);
  CHECK(s.verdicts[Verdict::Proved] == 2);
  CHECK(s.as_expected == 3);
  CHECK(s.unexpected == 1);
  CHECK(s.failed_files == 1);
}

TEST_CASE("report: human output has one line per rule, counterexamples and a summary") {
  Batch b;
  b.results = {rule("a", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Proved)};
  b.failed_files.push_back({"bad.tr", "bad.tr:1:2: error: x"});
  b.seconds = 1.5;
  std::string h = human(b, HumanOptions{true, false, false});
  CHECK(h.find("PROVED") != std::string::npos);
  CHECK(h.find("rules/x.tr:3 a") != std::string::npos);
  CHECK(h.find("0.25s") != std::string::npos);
  CHECK(h.find("[MISMATCH: expected proved]") != std::string::npos);
  CHECK(h.find("    map s = [1]") != std::string::npos);  // counterexample under its rule
  CHECK(h.find("2 rules: 1 proved, 1 counterexample; 1 as expected, 1 not; 1 file failed to load: bad.tr") !=
        std::string::npos);
  std::string q = human(b, HumanOptions{true, true, false});
  CHECK(q.find("rules/x.tr:3 a ") == std::string::npos);  // quiet: only the unexpected
  CHECK(q.find("rules/x.tr:3 b") != std::string::npos);
  std::string v = human(b, HumanOptions{false, false, true});
  CHECK(v.find("int: proved, 2 tasks, bounds {R: 2}") != std::string::npos);
}

TEST_CASE("report: JSON has the documented shape") {
  Batch b;
  b.results = {rule("a", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Counterexample)};
  auto j = nlohmann::json::parse(to_json(b, true).dump());
  REQUIRE(j["rules"].size() == 2);
  const auto& r = j["rules"][0];
  for (const char* k : {"file", "line", "name", "title", "verdict", "dtypes", "seconds", "expect", "counterexample"})
    CHECK(r.contains(k));
  CHECK(r["dtypes"]["int"]["verdict"] == "proved");
  CHECK(r["dtypes"]["real"]["bounds"]["R"] == 2);
  CHECK(r["dtypes"]["int"]["tasks"] == 2);
  CHECK(r["counterexample"].is_null());
  CHECK(j["rules"][1]["counterexample"]["maps"]["s"] == "[1]");
  CHECK(j["rules"][1]["counterexample"]["lhs"] == "1");
  CHECK(j["summary"]["rules"] == 2);
  CHECK(j["summary"]["counterexample"] == 1);
  CHECK(j["summary"]["exit_code"] == 0);
  CHECK(j["failed_files"].is_array());
}

TEST_CASE("report: JUnit has one testcase per rule and failures for unexpected verdicts") {
  Batch b;
  b.results = {rule("a<1>", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Proved)};
  b.failed_files.push_back({"bad.tr", "bad.tr:1:2: error: \"x\" & y"});
  std::string x = junit(b, true);
  CHECK(x.find("<testsuite name=\"trverify\" tests=\"3\" failures=\"1\" errors=\"1\"") != std::string::npos);
  CHECK(x.find("name=\"a&lt;1&gt;\"") != std::string::npos);
  CHECK(x.find("<failure message=\"verdict counterexample, expected proved\"") != std::string::npos);
  CHECK(x.find("&quot;x&quot; &amp; y") != std::string::npos);
  size_t n = 0;
  for (size_t p = x.find("<testcase"); p != std::string::npos; p = x.find("<testcase", p + 1)) ++n;
  CHECK(n == 3);
}

TEST_CASE("report: a batch where nothing loaded") {
  Batch b;
  b.failed_files.push_back({"bad.tr", "bad.tr:4:1: error: expected an expression"});
  std::string h = human(b, HumanOptions{});
  CHECK(h.find("FAILED TO LOAD  bad.tr\n0 rules; 1 file failed to load: bad.tr") != std::string::npos);
  CHECK(exit_code(b, false) == 2);
  auto j = to_json(b, false);
  CHECK(j["rules"].empty());
  CHECK(j["failed_files"][0]["message"] == "bad.tr:4:1: error: expected an expression");
}
