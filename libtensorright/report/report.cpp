#include "libtensorright/report/report.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace tr::report {

namespace {

const Verdict kAllVerdicts[] = {Verdict::Proved,  Verdict::Counterexample, Verdict::Vacuous,
                                Verdict::Timeout, Verdict::Unknown,        Verdict::Unsupported};

std::string fmt_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s < 10 ? "%.2fs" : "%.1fs", s);
  return buf;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string indent(const std::string& text, const std::string& pad) {
  std::string out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out += pad + line + "\n";
  return out;
}

std::string where(const RuleResult& r) { return r.file + ":" + std::to_string(r.line); }

// XML attribute/text escaping.
std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&apos;"; break;
      default:
        // control characters other than tab/newline are not allowed in XML 1.0
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t' && c != '\r') o += ' ';
        else o += c;
    }
  }
  return o;
}

nlohmann::ordered_json pairs(const std::vector<std::pair<std::string, std::string>>& v) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  for (const auto& [k, x] : v) o[k] = x;
  return o;
}

}  // namespace

Verdict expected_verdict(const RuleResult& r, bool check) {
  return check && r.expect ? *r.expect : Verdict::Proved;
}

bool as_expected(const RuleResult& r, bool check) { return r.verdict == expected_verdict(r, check); }

Summary summarize(const Batch& b, bool check) {
  Summary s;
  s.rules = static_cast<int>(b.results.size());
  for (Verdict v : kAllVerdicts) s.verdicts[v] = 0;
  for (const auto& r : b.results) {
    ++s.verdicts[r.verdict];
    (as_expected(r, check) ? s.as_expected : s.unexpected)++;
  }
  s.failed_files = static_cast<int>(b.failed_files.size());
  s.seconds = b.seconds;
  return s;
}

int exit_code(const Batch& b, bool check) {
  if (!b.failed_files.empty()) return 2;
  for (const auto& r : b.results)
    if (!as_expected(r, check)) return 1;
  return 0;
}

std::string human(const Batch& b, const HumanOptions& o) {
  std::ostringstream out;
  size_t wv = 0, wn = 0;  // column widths
  for (const auto& r : b.results) {
    wv = std::max(wv, std::string(to_string(r.verdict)).size());
    wn = std::max(wn, where(r).size() + 1 + r.name.size());
  }
  for (const auto& r : b.results) {
    bool ok = as_expected(r, o.check);
    if (o.quiet && ok) continue;
    std::string v = upper(to_string(r.verdict));
    std::string id = where(r) + " " + r.name;
    out << v << std::string(wv + 2 - v.size(), ' ') << id << std::string(wn + 2 - id.size(), ' ')
        << fmt_seconds(r.seconds);
    if (!r.title.empty()) out << "  " << r.title;
    if (o.check && r.expect) out << (ok ? "  [expected]" : "  [MISMATCH: expected " + std::string(to_string(*r.expect)) + "]");
    else if (o.check && !ok) out << "  [MISMATCH: expected proved]";
    out << "\n";
    if (!r.note.empty() && r.verdict != Verdict::Proved) out << "    note: " << r.note << "\n";
    if (o.verbose)
      for (const auto& d : r.dtypes) {
        out << "    " << to_string(d.dtype) << ": " << to_string(d.verdict) << ", " << d.tasks << " task"
            << (d.tasks == 1 ? "" : "s") << ", bounds {";
        bool first = true;
        for (const auto& [rc, k] : d.bounds) {
          out << (first ? "" : ", ") << rc << ": " << k;
          first = false;
        }
        out << "}, " << fmt_seconds(d.seconds);
        if (!d.reason.empty()) out << " (" << d.reason << ")";
        out << "\n";
      }
    if (r.cex) out << indent(r.cex->text, "    ");
  }
  for (const auto& f : b.failed_files) out << "FAILED TO LOAD  " << f.file << "\n";

  Summary s = summarize(b, o.check);
  out << s.rules << " rule" << (s.rules == 1 ? "" : "s");
  bool first = true;
  for (Verdict v : kAllVerdicts) {
    if (!s.verdicts[v]) continue;
    out << (first ? ": " : ", ") << s.verdicts[v] << " " << to_string(v);
    first = false;
  }
  if (o.check) out << "; " << s.as_expected << " as expected, " << s.unexpected << " not";
  if (s.failed_files) {
    out << "; " << s.failed_files << " file" << (s.failed_files == 1 ? "" : "s") << " failed to load:";
    for (const auto& f : b.failed_files) out << " " << f.file;
  }
  out << " (" << fmt_seconds(s.seconds) << ")\n";
  return out.str();
}

nlohmann::ordered_json to_json(const Batch& b, bool check) {
  using J = nlohmann::ordered_json;
  J rules = J::array();
  for (const auto& r : b.results) {
    J j;
    j["file"] = r.file;
    j["line"] = r.line;
    j["name"] = r.name;
    j["title"] = r.title;
    j["verdict"] = to_string(r.verdict);
    j["expect"] = r.expect ? J(to_string(*r.expect)) : J(nullptr);
    j["as_expected"] = as_expected(r, check);
    J d = J::object();
    for (const auto& x : r.dtypes) {
      J bounds = J::object();
      for (const auto& [rc, k] : x.bounds) bounds[rc] = k;
      J dj;
      dj["verdict"] = to_string(x.verdict);
      dj["bounds"] = bounds;
      dj["tasks"] = x.tasks;
      dj["seconds"] = x.seconds;
      if (!x.reason.empty()) dj["reason"] = x.reason;
      d[to_string(x.dtype)] = dj;
    }
    j["dtypes"] = d;
    j["seconds"] = r.seconds;
    if (!r.note.empty()) j["note"] = r.note;
    if (r.cex) {
      const Counterexample& c = *r.cex;
      J cj;
      cj["dtype"] = to_string(c.dtype);
      J ranks = J::object();
      for (const auto& [rc, n] : c.ranks) ranks[rc] = n;
      cj["ranks"] = ranks;
      cj["sizes"] = pairs(c.sizes);
      cj["maps"] = pairs(c.maps);
      cj["scalars"] = pairs(c.scalars);
      cj["index"] = pairs(c.index);
      cj["inputs"] = pairs(c.inputs);
      cj["lhs"] = c.lhs_value;
      cj["rhs"] = c.rhs_value;
      cj["text"] = c.text;
      j["counterexample"] = cj;
    } else {
      j["counterexample"] = nullptr;
    }
    rules.push_back(j);
  }
  Summary s = summarize(b, check);
  J sum;
  sum["rules"] = s.rules;
  for (Verdict v : kAllVerdicts) sum[to_string(v)] = s.verdicts[v];
  sum["as_expected"] = s.as_expected;
  sum["unexpected"] = s.unexpected;
  sum["failed_files"] = s.failed_files;
  sum["seconds"] = s.seconds;
  sum["exit_code"] = exit_code(b, check);
  J failed = J::array();
  for (const auto& f : b.failed_files) failed.push_back(J{{"file", f.file}, {"message", f.message}});
  return J{{"rules", rules}, {"summary", sum}, {"failed_files", failed}};
}

std::string junit(const Batch& b, bool check) {
  Summary s = summarize(b, check);
  std::ostringstream o;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.3f", b.seconds);
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  o << "<testsuites name=\"trverify\" tests=\"" << s.rules + s.failed_files << "\" failures=\"" << s.unexpected
    << "\" errors=\"" << s.failed_files << "\" time=\"" << secs << "\">\n";
  o << "  <testsuite name=\"trverify\" tests=\"" << s.rules + s.failed_files << "\" failures=\"" << s.unexpected
    << "\" errors=\"" << s.failed_files << "\" time=\"" << secs << "\">\n";
  for (const auto& r : b.results) {
    std::snprintf(secs, sizeof secs, "%.3f", r.seconds);
    o << "    <testcase classname=\"" << xml(r.file) << "\" name=\"" << xml(r.name) << "\" time=\"" << secs
      << "\">\n";
    if (!as_expected(r, check)) {
      std::string msg = std::string("verdict ") + to_string(r.verdict) + ", expected " +
                        to_string(expected_verdict(r, check));
      o << "      <failure message=\"" << xml(msg) << "\" type=\"" << to_string(r.verdict) << "\">"
        << xml(where(r) + " " + r.title + "\n" + (r.note.empty() ? "" : r.note + "\n") + (r.cex ? r.cex->text : ""))
        << "</failure>\n";
    }
    o << "      <system-out>" << xml(std::string("verdict: ") + to_string(r.verdict)) << "</system-out>\n";
    o << "    </testcase>\n";
  }
  for (const auto& f : b.failed_files)
    o << "    <testcase classname=\"" << xml(f.file) << "\" name=\"load\" time=\"0\">\n"
      << "      <error message=\"failed to load\" type=\"load\">" << xml(f.message) << "</error>\n"
      << "    </testcase>\n";
  o << "  </testsuite>\n</testsuites>\n";
  return o.str();
}

}  // namespace tr::report
