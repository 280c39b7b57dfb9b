// Report formats: human text, JSON and JSONL shape, JUnit XML, SARIF, exit codes, interrupted
// batches, invalid UTF-8 in file names; rule selection (--rule globs, --shard).
#include <doctest/doctest.h>

#include <csignal>
#include <set>

#include "libtensorright/check/check.h"
#include "libtensorright/report/report.h"
#include "libtensorright/report/select.h"

TEST_SUITE_BEGIN("unit");

using namespace tr;
using namespace tr::report;

namespace {
RuleResult rule(const std::string& name, Verdict v, std::optional<Verdict> expect, const std::string& file = "rules/x.tr") {
  RuleResult r;
  r.file = file;
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
    c.maps = {{"s", {"1"}}};
    c.index = {{"R", {"0"}}};
    c.sizes = {{"A.R", {"2", "123456789012345678901234567890"}}};  // beyond int64: kept exact, as text
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
  auto j = nlohmann::json::parse(dump(to_json(b, true)));
  CHECK(j["schema_version"] == kSchemaVersion);
  CHECK(j["options"]["check"] == true);
  CHECK(j["not_run"].empty());
  CHECK(j["summary"]["interrupted"].is_null());
  REQUIRE(j["rules"].size() == 2);
  const auto& r = j["rules"][0];
  for (const char* k : {"file", "line", "name", "title", "verdict", "dtypes", "seconds", "expect", "counterexample"})
    CHECK(r.contains(k));
  CHECK(r["dtypes"]["int"]["verdict"] == "proved");
  CHECK(r["dtypes"]["real"]["bounds"]["R"] == 2);
  CHECK(r["dtypes"]["int"]["tasks"] == 2);
  CHECK(r["dtypes"]["int"].contains("units"));
  CHECK(r["limit"].is_null());
  CHECK(r["counterexample"].is_null());
  CHECK(j["rules"][1]["counterexample"]["maps"]["s"] == nlohmann::json::array({1}));
  CHECK(j["rules"][1]["counterexample"]["sizes"]["A.R"] == nlohmann::json::array({2, "123456789012345678901234567890"}));
  CHECK(j["rules"][1]["counterexample"]["lhs"] == "1");
  CHECK(j["summary"]["rules"] == 2);
  CHECK(j["summary"]["counterexample"] == 1);
  CHECK(j["summary"]["exit_code"] == 0);
  CHECK(j["failed_files"].is_array());
}

TEST_CASE("report: JUnit has one testsuite per file, file and line attributes, failures and skips") {
  Batch b;
  b.results = {rule("a<1>", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Proved),
               rule("c", Verdict::Unsupported, Verdict::Unsupported, "rules/y.tr"),
               rule("d", Verdict::Proved, Verdict::Proved, "rules/y.tr")};
  b.results[2].line = 9;
  b.failed_files.push_back({"bad.tr", "bad.tr:1:2: error: \"x\" & y"});
  b.started = 86400;  // 1970-01-02T00:00:00 UTC
  std::string x = junit(b, true);
  CHECK(x.find("<testsuites name=\"trverify\" tests=\"5\" failures=\"1\" errors=\"1\" skipped=\"1\"") !=
        std::string::npos);
  CHECK(x.find("<testsuite name=\"rules/x.tr\" file=\"rules/x.tr\" tests=\"2\" failures=\"1\" errors=\"0\" "
               "skipped=\"0\" time=\"0.500\" timestamp=\"1970-01-02T00:00:00\">") != std::string::npos);
  CHECK(x.find("<testsuite name=\"rules/y.tr\" file=\"rules/y.tr\" tests=\"2\" failures=\"0\" errors=\"0\" "
               "skipped=\"1\"") != std::string::npos);
  CHECK(x.find("<testsuite name=\"bad.tr\" file=\"bad.tr\" tests=\"1\" failures=\"0\" errors=\"1\"") != std::string::npos);
  CHECK(x.find("name=\"a&lt;1&gt;\" classname=\"rules/x.tr\" file=\"rules/x.tr\" line=\"3\"") != std::string::npos);
  CHECK(x.find("<failure message=\"verdict counterexample, expected proved\"") != std::string::npos);
  CHECK(x.find("name=\"c\" classname=\"rules/y.tr\" file=\"rules/y.tr\" line=\"9\"") != std::string::npos);
  CHECK(x.find("<skipped message=\"not verified: verdict unsupported, as expected\"/>") != std::string::npos);
  CHECK(x.find("&quot;x&quot; &amp; y") != std::string::npos);
  size_t cases = 0, suites = 0;
  for (size_t p = x.find("<testcase "); p != std::string::npos; p = x.find("<testcase ", p + 1)) ++cases;
  for (size_t p = x.find("<testsuite "); p != std::string::npos; p = x.find("<testsuite ", p + 1)) ++suites;
  CHECK(cases == 5);
  CHECK(suites == 3);
  // Without --check an expected `unsupported` is a failure, not a skip.
  CHECK(junit(b, false).find("<skipped") == std::string::npos);
}

TEST_CASE("report: SARIF 2.1.0 has one result per unexpected verdict, with its location") {
  Batch b;
  b.version = "9.9.9";
  b.results = {rule("a", Verdict::Proved, Verdict::Proved), rule("b", Verdict::Counterexample, Verdict::Proved),
               rule("c", Verdict::Timeout, Verdict::Timeout, "/abs/dir with space/z.tr")};
  b.results[2].limit = Limit::Budget;
  b.failed_files.push_back({"bad.tr", "bad.tr:1:2: error: x"});
  auto j = nlohmann::json::parse(dump(sarif(b, true)));
  CHECK(j["version"] == "2.1.0");
  REQUIRE(j["runs"].size() == 1);
  const auto& run = j["runs"][0];
  CHECK(run["tool"]["driver"]["name"] == "trverify");
  CHECK(run["tool"]["driver"]["version"] == "9.9.9");
  REQUIRE(run["results"].size() == 1);
  const auto& r = run["results"][0];
  CHECK(r["ruleId"] == "verdict/counterexample");
  CHECK(run["tool"]["driver"]["rules"][r["ruleIndex"].get<int>()]["id"] == "verdict/counterexample");
  CHECK(r["level"] == "error");
  CHECK(r["message"]["text"].get<std::string>().find("rule b: verdict counterexample, expected proved") == 0);
  const auto& loc = r["locations"][0]["physicalLocation"];
  CHECK(loc["artifactLocation"]["uri"] == "rules/x.tr");
  CHECK(loc["artifactLocation"]["uriBaseId"] == "%SRCROOT%");
  CHECK(loc["region"]["startLine"] == 3);
  CHECK(run["invocations"][0]["executionSuccessful"] == false);  // a file failed to load
  CHECK(run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"] == "bad.tr:1:2: error: x");
  // Without --check, the expected timeout is unexpected too; an absolute path is a file: URI.
  auto all = nlohmann::json::parse(dump(sarif(b, false)));
  REQUIRE(all["runs"][0]["results"].size() == 2);
  CHECK(all["runs"][0]["results"][1]["ruleId"] == "verdict/timeout");
  CHECK(all["runs"][0]["results"][1]["message"]["text"].get<std::string>().find("timeout (budget)") !=
        std::string::npos);
  CHECK(all["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] ==
        "file:///abs/dir%20with%20space/z.tr");
}

TEST_CASE("report: an interrupted batch lists what was not run and exits 128 + signal") {
  Batch b;
  b.results = {rule("a", Verdict::Proved, Verdict::Proved)};
  b.not_run = {{"rules/x.tr", 8, "b"}, {"rules/y.tr", 2, "c"}};
  b.signal = SIGTERM;
  CHECK(exit_code(b, true) == 143);
  b.signal = SIGINT;
  CHECK(exit_code(b, true) == 130);
  std::string h = human(b, HumanOptions{true, false, false});
  CHECK(h.find("NOT RUN         rules/x.tr:8 b\n") != std::string::npos);
  CHECK(h.find("1 rule: 1 proved; 1 as expected, 0 not; 2 not run (interrupted by SIGINT)") != std::string::npos);
  auto j = nlohmann::json::parse(dump(to_json(b, true)));
  CHECK(j["summary"]["not_run"] == 2);
  CHECK(j["summary"]["interrupted"] == "SIGINT");
  CHECK(j["summary"]["exit_code"] == 130);
  CHECK(j["not_run"][1]["name"] == "c");
  std::string x = junit(b, true);
  CHECK(x.find("name=\"c\" classname=\"rules/y.tr\" file=\"rules/y.tr\" line=\"2\" time=\"0\">\n"
               "      <skipped message=\"not run: interrupted by SIGINT\"/>") != std::string::npos);
  auto s = nlohmann::json::parse(dump(sarif(b, true)));
  CHECK(s["runs"][0]["invocations"][0]["executionSuccessful"] == false);
  CHECK(s["runs"][0]["invocations"][0]["exitCode"] == 130);
}

TEST_CASE("report: JSON Lines: one object per rule, then the summary") {
  Batch b;
  b.results = {rule("a", Verdict::Proved, Verdict::Proved)};
  b.not_run = {{"rules/x.tr", 8, "b"}};
  b.signal = SIGTERM;
  auto r = nlohmann::json::parse(dump(jsonl_rule(b.results[0], true)));
  CHECK(r["type"] == "rule");
  CHECK(r["name"] == "a");
  CHECK(r["verdict"] == "proved");
  auto n = nlohmann::json::parse(dump(jsonl_not_run(b.not_run[0])));
  CHECK(n["type"] == "not_run");
  CHECK(n["line"] == 8);
  auto s = nlohmann::json::parse(dump(jsonl_summary(b, true)));
  CHECK(s["type"] == "summary");
  CHECK(s["schema_version"] == kSchemaVersion);
  CHECK(s["summary"]["exit_code"] == 143);
  CHECK(dump(jsonl_rule(b.results[0], true)).find('\n') == std::string::npos);  // one line
}

TEST_CASE("report: invalid UTF-8 in file names never throws and is replaced") {
  const std::string bad = "rules/\xff\xfe-\xc3(.tr";
  Batch b;
  b.results = {rule("a", Verdict::Counterexample, Verdict::Proved, bad)};
  b.failed_files.push_back({bad, bad + ":1:1: error: x"});
  std::string json_text;
  REQUIRE_NOTHROW(json_text = dump(to_json(b, false), 2));
  auto j = nlohmann::json::parse(json_text);
  CHECK(j["rules"][0]["file"] == "rules/\xef\xbf\xbd\xef\xbf\xbd-\xef\xbf\xbd(.tr");
  std::string x;
  REQUIRE_NOTHROW(x = junit(b, false));
  CHECK(x.find("\xff") == std::string::npos);
  CHECK(x.find("file=\"rules/\xef\xbf\xbd\xef\xbf\xbd-\xef\xbf\xbd(.tr\"") != std::string::npos);
  nlohmann::ordered_json s;
  REQUIRE_NOTHROW(s = sarif(b, false));
  // The URI percent-encodes the raw bytes, so the location still names the real file.
  CHECK(s["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] ==
        "rules/%FF%FE-%C3%28.tr");
  REQUIRE_NOTHROW(dump(sarif(b, false)));
  REQUIRE_NOTHROW(dump(jsonl_rule(b.results[0], false)));
  CHECK(valid_utf8("ok \xc3\xa9") == "ok \xc3\xa9");
}

TEST_CASE("report: XML escaping of control characters and quotes") {
  Batch b;
  b.results = {rule("a", Verdict::Counterexample, Verdict::Proved)};
  b.results[0].title = "x\x01y 'q' \"d\" <&>";
  std::string x = junit(b, false);
  CHECK(x.find("x y &apos;q&apos; &quot;d&quot; &lt;&amp;&gt;") != std::string::npos);
  CHECK(x.find('\x01') == std::string::npos);
}

TEST_CASE("select: --rule globs and --shard slices") {
  auto f = load_rule_source(R"(
rule add_zero : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 0
  rhs A
}
rule add_one : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs A + 1
  rhs A
}
rule neg_neg : int {
  rclass R
  map s : R
  tensor A : {R: s}
  lhs -(-A)
  rhs A
})",
                            "s.tr");
  RuleList all;
  for (const auto& r : f.rules) all.push_back({"s.tr", r});
  std::vector<std::string> unmatched;
  auto adds = match_rules(all, {"add_*", "nothing?"}, unmatched);
  REQUIRE(adds.size() == 2);
  CHECK(adds[0].second.name == "add_zero");
  CHECK(adds[1].second.name == "add_one");
  CHECK(unmatched == std::vector<std::string>{"nothing?"});
  unmatched.clear();
  CHECK(match_rules(all, {"neg_neg", "add_[z]ero"}, unmatched).size() == 2);
  CHECK(unmatched.empty());
  CHECK(match_rules(all, {}, unmatched).size() == 3);
  for (int n = 1; n <= 4; ++n) {
    std::multiset<std::string> names;
    for (int k = 1; k <= n; ++k)
      for (const auto& [file, r] : shard_rules(all, {k, n})) names.insert(r.name);
    CHECK(names == std::multiset<std::string>{"add_one", "add_zero", "neg_neg"});  // disjoint, complete
  }
  CHECK(shard_rules(all, {2, 2}).size() == 1);
  CHECK(shard_rules(all, {2, 2})[0].second.name == "add_one");
  CHECK(parse_shard("2/3").k == 2);
  CHECK(parse_shard("2/3").n == 3);
  for (const char* bad : {"0/3", "4/3", "3", "a/b", "1/", "/2", "-1/2", "1/2/3", "1 /2"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_shard(bad), std::invalid_argument);
  }
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

TEST_SUITE_END();
