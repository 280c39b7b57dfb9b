// The reports CI systems read: JUnit XML (GitHub and GitLab test reporters; one testsuite per rule
// file, with file and line attributes) and SARIF 2.1.0 (GitHub code scanning).
#include <cctype>
#include <csignal>
#include <ctime>
#include <cstdio>
#include <sstream>

#include "libtensorright/report/report.h"

namespace tr::report {

namespace {

using J = nlohmann::ordered_json;

std::string fixed3(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

// XML attribute/text escaping, on valid UTF-8; newlines and tabs survive in attributes too.
std::string xml(const std::string& raw) {
  std::string o;
  for (char c : valid_utf8(raw)) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      case '\n': o += "&#10;"; break;
      case '\t': o += "&#9;"; break;
      case '\r': o += "&#13;"; break;
      default:
        // other control characters are not allowed in XML 1.0
        o += static_cast<unsigned char>(c) < 0x20 ? ' ' : c;
    }
  }
  return o;
}

std::string iso_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

// The rules of one file, decided or not, in the batch's order.
struct FileGroup {
  std::string file;
  std::vector<const RuleResult*> results;
  std::vector<const RuleRef*> not_run;
  std::vector<const LoadFailure*> failed;
};

std::vector<FileGroup> by_file(const Batch& b) {
  std::vector<FileGroup> groups;
  auto group = [&](const std::string& f) -> FileGroup& {
    for (auto& g : groups)
      if (g.file == f) return g;
    groups.push_back({f, {}, {}, {}});
    return groups.back();
  };
  for (const auto& r : b.results) group(r.file).results.push_back(&r);
  for (const auto& r : b.not_run) group(r.file).not_run.push_back(&r);
  for (const auto& f : b.failed_files) group(f.file).failed.push_back(&f);
  return groups;
}

// An expected `unsupported` or `timeout` is not a pass: the rule was not verified.
bool skipped(const RuleResult& r, bool check) {
  Verdict e = expected_verdict(r, check);
  return as_expected(r, check) && (e == Verdict::Unsupported || e == Verdict::Timeout);
}

void junit_case(std::ostringstream& o, const RuleResult& r, bool check) {
  o << "    <testcase name=\"" << xml(r.name) << "\" classname=\"" << xml(r.file) << "\" file=\"" << xml(r.file)
    << "\" line=\"" << r.line << "\" time=\"" << fixed3(r.seconds) << "\">\n";
  std::string label = verdict_label(r);
  if (!as_expected(r, check)) {
    std::string msg = "verdict " + label + ", expected " + to_string(expected_verdict(r, check));
    o << "      <failure message=\"" << xml(msg) << "\" type=\"" << to_string(r.verdict) << "\">"
      << xml(r.file + ":" + std::to_string(r.line) + " " + r.title + "\n" + (r.note.empty() ? "" : r.note + "\n") +
             (r.cex ? r.cex->text : ""))
      << "</failure>\n";
  } else if (skipped(r, check)) {
    o << "      <skipped message=\"" << xml("not verified: verdict " + label + ", as expected") << "\"/>\n";
  }
  o << "      <system-out>" << xml("verdict: " + label + (r.note.empty() ? "" : "\n" + r.note)) << "</system-out>\n";
  o << "    </testcase>\n";
}

std::string signal_name(int sig) { return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal"; }

}  // namespace

std::string junit(const Batch& b, bool check) {
  Summary s = summarize(b, check);
  int skips = s.not_run;
  for (const auto& r : b.results) skips += skipped(r, check);
  std::string stamp = iso_time(b.started);
  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"trverify\" tests=\"" << s.rules + s.not_run + s.failed_files << "\" failures=\""
    << s.unexpected << "\" errors=\"" << s.failed_files << "\" skipped=\"" << skips << "\" time=\""
    << fixed3(b.seconds) << "\" timestamp=\"" << stamp << "\">\n";
  for (const auto& g : by_file(b)) {
    int fails = 0, skip = static_cast<int>(g.not_run.size());
    double secs = 0;
    for (const RuleResult* r : g.results) {
      fails += !as_expected(*r, check);
      skip += skipped(*r, check);
      secs += r->seconds;
    }
    size_t tests = g.results.size() + g.not_run.size() + g.failed.size();
    o << "  <testsuite name=\"" << xml(g.file) << "\" file=\"" << xml(g.file) << "\" tests=\"" << tests
      << "\" failures=\"" << fails << "\" errors=\"" << g.failed.size() << "\" skipped=\"" << skip << "\" time=\""
      << fixed3(secs) << "\" timestamp=\"" << stamp << "\">\n";
    for (const RuleResult* r : g.results) junit_case(o, *r, check);
    for (const RuleRef* r : g.not_run)
      o << "    <testcase name=\"" << xml(r->name) << "\" classname=\"" << xml(r->file) << "\" file=\""
        << xml(r->file) << "\" line=\"" << r->line << "\" time=\"0\">\n"
        << "      <skipped message=\"" << xml("not run: interrupted by " + signal_name(b.signal)) << "\"/>\n"
        << "    </testcase>\n";
    for (const LoadFailure* f : g.failed)
      o << "    <testcase name=\"load\" classname=\"" << xml(f->file) << "\" file=\"" << xml(f->file)
        << "\" time=\"0\">\n"
        << "      <error message=\"failed to load\" type=\"load\">" << xml(f->message) << "</error>\n"
        << "    </testcase>\n";
    o << "  </testsuite>\n";
  }
  o << "</testsuites>\n";
  return o.str();
}

namespace {

// A SARIF artifact URI for a path: relative paths stay relative (to %SRCROOT%, the checkout),
// absolute ones become file: URIs; bytes outside the unreserved set are percent-encoded.
std::string uri_path(const std::string& path) {
  static const char* hex = "0123456789ABCDEF";
  std::string o;
  for (unsigned char c : path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      o += static_cast<char>(c);
    } else {
      o += '%';
      o += hex[c >> 4];
      o += hex[c & 15];
    }
  }
  return o;
}

J location(const std::string& file, int line) {
  J art;
  if (!file.empty() && file[0] == '/') {
    art["uri"] = "file://" + uri_path(file);
  } else {
    art["uri"] = uri_path(file);
    art["uriBaseId"] = "%SRCROOT%";
  }
  J phys{{"artifactLocation", art}};
  if (line > 0) phys["region"] = J{{"startLine", line}};
  return J{{"physicalLocation", phys}};
}

const Verdict kSarifVerdicts[] = {Verdict::Proved,  Verdict::Counterexample, Verdict::Vacuous,
                                  Verdict::Timeout, Verdict::Unknown,        Verdict::Unsupported};

std::string sarif_rule_id(Verdict v) { return std::string("verdict/") + to_string(v); }

J sarif_rules() {
  J rules = J::array();
  for (Verdict v : kSarifVerdicts) {
    std::string text = std::string("The rule's verdict is `") + to_string(v) + "`, not the expected one.";
    rules.push_back(J{{"id", sarif_rule_id(v)},
                      {"name", std::string("UnexpectedVerdict_") + to_string(v)},
                      {"shortDescription", J{{"text", "Unexpected verdict: " + std::string(to_string(v))}}},
                      {"fullDescription", J{{"text", text}}},
                      {"defaultConfiguration", J{{"level", "error"}}}});
  }
  return rules;
}

}  // namespace

J sarif(const Batch& b, bool check) {
  J results = J::array();
  for (const auto& r : b.results) {
    if (as_expected(r, check)) continue;
    size_t index = 0;
    while (kSarifVerdicts[index] != r.verdict) ++index;
    std::string text = "rule " + r.name + ": verdict " + verdict_label(r) + ", expected " +
                       to_string(expected_verdict(r, check)) + (r.note.empty() ? "" : ". " + r.note) +
                       (r.cex ? "\n" + r.cex->text : "");
    results.push_back(J{{"ruleId", sarif_rule_id(r.verdict)},
                        {"ruleIndex", index},
                        {"level", "error"},
                        {"message", J{{"text", text}}},
                        {"locations", J::array({location(r.file, r.line)})}});
  }
  J notes = J::array();
  for (const auto& f : b.failed_files)
    notes.push_back(J{{"level", "error"},
                      {"message", J{{"text", f.message}}},
                      {"locations", J::array({location(f.file, 0)})}});
  if (b.signal)
    notes.push_back(J{{"level", "warning"},
                      {"message", J{{"text", "interrupted by " + signal_name(b.signal) + "; " +
                                                 std::to_string(b.not_run.size()) + " rule(s) not run"}}}});
  J invocation{{"executionSuccessful", b.signal == 0 && b.failed_files.empty()},
               {"exitCode", exit_code(b, check)},
               {"toolExecutionNotifications", notes}};
  J driver{{"name", "trverify"}, {"version", b.version}, {"rules", sarif_rules()}};
  J run{{"tool", J{{"driver", driver}}}, {"invocations", J::array({invocation})}, {"results", results}};
  return J{{"$schema", "https://json.schemastore.org/sarif-2.1.0.json"}, {"version", "2.1.0"},
           {"runs", J::array({run})}};
}

}  // namespace tr::report
