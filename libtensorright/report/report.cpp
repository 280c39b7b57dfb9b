#include "libtensorright/report/report.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace tr::report {

namespace {

using J = nlohmann::ordered_json;

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

std::string where(const std::string& file, int line) { return file + ":" + std::to_string(line); }
std::string where(const RuleResult& r) { return where(r.file, r.line); }

std::string signal_name(int sig) {
  if (sig == SIGINT) return "SIGINT";
  if (sig == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(sig);
}

J pairs(const std::vector<std::pair<std::string, std::string>>& v) {
  J o = J::object();
  for (const auto& [k, x] : v) o[k] = x;
  return o;
}

// One integer per axis as a JSON array of numbers; an element beyond int64 stays a decimal string,
// so that no value is rounded.
J integer_lists(const std::vector<std::pair<std::string, Counterexample::Integers>>& v) {
  J o = J::object();
  for (const auto& [k, xs] : v) {
    J a = J::array();
    for (const std::string& x : xs) {
      int64_t n = 0;
      const auto [end, ec] = std::from_chars(x.data(), x.data() + x.size(), n);
      if (ec == std::errc() && end == x.data() + x.size()) a.push_back(n);
      else a.push_back(x);
    }
    o[k] = a;
  }
  return o;
}

J counterexample_json(const Counterexample& c) {
  J cj;
  cj["dtype"] = to_string(c.dtype);
  J ranks = J::object();
  for (const auto& [rc, n] : c.ranks) ranks[rc] = n;
  cj["ranks"] = ranks;
  cj["sizes"] = integer_lists(c.sizes);
  cj["maps"] = integer_lists(c.maps);
  cj["scalars"] = pairs(c.scalars);
  cj["index"] = integer_lists(c.index);
  cj["inputs"] = pairs(c.inputs);
  cj["lhs"] = c.lhs_value;
  cj["rhs"] = c.rhs_value;
  cj["text"] = c.text;
  return cj;
}

J options_json(const Batch& b, bool check) {
  J o;
  o["check"] = check;
  o["budget"] = b.budget;
  o["timeout"] = b.timeout_s;
  o["shard"] = b.shard.empty() ? J(nullptr) : J(b.shard);
  J m = J::array();
  for (DType d : b.machine) m.push_back(to_string(d));
  o["dtypes"] = b.machine.empty() ? J(nullptr) : m;
  return o;
}

J skipped_json(const Batch& b) {
  J out = J::array();
  for (const auto& [f, r] : b.skipped) out.push_back(J{{"file", f}, {"line", r.loc.line}, {"name", r.name}, {"reason", r.reason}});
  return out;
}

J summary_json(const Batch& b, bool check) {
  Summary s = summarize(b, check);
  J sum;
  sum["rules"] = s.rules;
  for (Verdict v : kAllVerdicts) sum[to_string(v)] = s.verdicts[v];
  sum["as_expected"] = s.as_expected;
  sum["unexpected"] = s.unexpected;
  sum["not_run"] = s.not_run;
  sum["failed_files"] = s.failed_files;
  sum["skipped"] = s.skipped;
  sum["interrupted"] = b.signal ? J(signal_name(b.signal)) : J(nullptr);
  sum["seconds"] = s.seconds;
  sum["exit_code"] = exit_code(b, check);
  return sum;
}

J ref_json(const RuleRef& r) { return J{{"file", r.file}, {"line", r.line}, {"name", r.name}}; }

J failed_json(const Batch& b) {
  J failed = J::array();
  for (const auto& f : b.failed_files) failed.push_back(J{{"file", f.file}, {"message", f.message}});
  return failed;
}

const char* color_of(Verdict v) {
  switch (v) {
    case Verdict::Proved: return "\033[32m";          // green
    case Verdict::Counterexample: return "\033[31m";  // red
    case Verdict::Unsupported: return "\033[35m";     // magenta
    default: return "\033[33m";                        // yellow: vacuous, timeout, unknown
  }
}

std::string paint(const std::string& s, const char* color, bool on) { return on ? color + s + "\033[0m" : s; }

}  // namespace

std::string valid_utf8(const std::string& s) {
  // nlohmann's serializer validates UTF-8 and, with `replace`, substitutes U+FFFD; reading the
  // JSON string back gives the repaired text.
  return nlohmann::json::parse(nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
      .get<std::string>();
}

std::string dump(const J& j, int indent) { return j.dump(indent, ' ', false, J::error_handler_t::replace); }

Verdict expected_verdict(const RuleResult& r, bool check) {
  return check && r.expect ? *r.expect : Verdict::Proved;
}

bool as_expected(const RuleResult& r, bool check) { return r.verdict == expected_verdict(r, check); }

std::string verdict_label(const RuleResult& r) {
  std::string v = to_string(r.verdict);
  if (r.verdict == Verdict::Timeout && r.limit != Limit::None) v += std::string(" (") + to_string(r.limit) + ")";
  return v;
}

Summary summarize(const Batch& b, bool check) {
  Summary s;
  s.rules = static_cast<int>(b.results.size());
  for (Verdict v : kAllVerdicts) s.verdicts[v] = 0;
  for (const auto& r : b.results) {
    ++s.verdicts[r.verdict];
    (as_expected(r, check) ? s.as_expected : s.unexpected)++;
  }
  s.not_run = static_cast<int>(b.not_run.size());
  s.failed_files = static_cast<int>(b.failed_files.size());
  s.skipped = static_cast<int>(b.skipped.size());
  s.seconds = b.seconds;
  return s;
}

int exit_code(const Batch& b, bool check) {
  if (b.signal) return 128 + b.signal;
  if (!b.failed_files.empty()) return 2;
  for (const auto& r : b.results)
    if (!as_expected(r, check)) return 1;
  return 0;
}

size_t id_width(const std::string& file, int line, const std::string& name) {
  return where(file, line).size() + 1 + name.size();
}

std::string human_rule(const RuleResult& r, const HumanOptions& o) {
  bool ok = as_expected(r, o.check);
  if (o.quiet && ok) return "";
  std::ostringstream out;
  const size_t wv = std::strlen("COUNTEREXAMPLE");
  std::string v = upper(to_string(r.verdict));
  if (r.verdict == Verdict::Timeout && r.limit != Limit::None) v += std::string(" (") + to_string(r.limit) + ")";
  std::string id = where(r) + " " + r.name;
  out << paint(v, color_of(r.verdict), o.color) << std::string(wv + 2 - std::min(wv + 1, v.size()), ' ') << id
      << std::string(std::max(o.id_width, id.size()) + 2 - id.size(), ' ') << fmt_seconds(r.seconds);
  if (!r.title.empty()) out << "  " << r.title;
  if (o.check && r.expect && ok) out << "  [expected]";
  else if (o.check && !ok)
    out << "  " << paint("[MISMATCH: expected " + std::string(to_string(expected_verdict(r, true))) + "]", "\033[1;31m",
                         o.color);
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
      out << "}, " << d.units << " resource units, " << fmt_seconds(d.seconds);
      if (!d.reason.empty()) out << " (" << d.reason << ")";
      out << "\n";
    }
  if (r.cex) out << indent(r.cex->text, "    ");
  return out.str();
}

std::string human_tail(const Batch& b, const HumanOptions& o) {
  std::ostringstream out;
  if (!o.quiet)
    for (const auto& r : b.not_run) out << "NOT RUN         " << where(r.file, r.line) << " " << r.name << "\n";
  if (!o.quiet)
    for (const auto& [f, r] : b.skipped)
      out << "SKIPPED         " << where(f, r.loc.line) << " " << r.name << "  (" << r.reason << ")\n";
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
  if (s.not_run) out << "; " << s.not_run << " not run (interrupted by " << signal_name(b.signal) << ")";
  if (s.skipped) out << "; " << s.skipped << " skipped at --dtypes";
  if (s.failed_files) {
    out << "; " << s.failed_files << " file" << (s.failed_files == 1 ? "" : "s") << " failed to load:";
    for (const auto& f : b.failed_files) out << " " << f.file;
  }
  out << " (" << fmt_seconds(s.seconds) << ")\n";
  return out.str();
}

std::string human(const Batch& b, const HumanOptions& o) {
  HumanOptions w = o;
  for (const auto& r : b.results) w.id_width = std::max(w.id_width, id_width(r.file, r.line, r.name));
  std::string out;
  for (const auto& r : b.results) out += human_rule(r, w);
  return out + human_tail(b, w);
}

J rule_json(const RuleResult& r, bool check) {
  J j;
  j["file"] = r.file;
  j["line"] = r.line;
  j["name"] = r.name;
  j["title"] = r.title;
  j["verdict"] = to_string(r.verdict);
  j["limit"] = r.limit == Limit::None ? J(nullptr) : J(to_string(r.limit));
  j["expect"] = r.expect ? J(to_string(*r.expect)) : J(nullptr);
  j["as_expected"] = as_expected(r, check);
  J d = J::object();
  for (const auto& x : r.dtypes) {
    J bounds = J::object();
    for (const auto& [rc, k] : x.bounds) bounds[rc] = k;
    J dj;
    dj["verdict"] = to_string(x.verdict);
    dj["limit"] = x.limit == Limit::None ? J(nullptr) : J(to_string(x.limit));
    dj["bounds"] = bounds;
    dj["tasks"] = x.tasks;
    dj["units"] = x.units;
    dj["max_units"] = x.max_units;
    dj["seconds"] = x.seconds;
    if (!x.reason.empty()) dj["reason"] = x.reason;
    d[to_string(x.dtype)] = dj;
  }
  j["dtypes"] = d;
  j["seconds"] = r.seconds;
  if (!r.note.empty()) j["note"] = r.note;
  j["counterexample"] = r.cex ? counterexample_json(*r.cex) : J(nullptr);
  return j;
}

J to_json(const Batch& b, bool check) {
  J rules = J::array();
  for (const auto& r : b.results) rules.push_back(rule_json(r, check));
  J not_run = J::array();
  for (const auto& r : b.not_run) not_run.push_back(ref_json(r));
  J out;
  out["schema_version"] = kSchemaVersion;
  out["options"] = options_json(b, check);
  out["rules"] = rules;
  out["not_run"] = not_run;
  out["skipped"] = skipped_json(b);
  out["summary"] = summary_json(b, check);
  out["failed_files"] = failed_json(b);
  return out;
}

J jsonl_rule(const RuleResult& r, bool check) {
  J j{{"type", "rule"}};
  j.update(rule_json(r, check));
  return j;
}

J jsonl_not_run(const RuleRef& r) {
  J j{{"type", "not_run"}};
  j.update(ref_json(r));
  return j;
}

J jsonl_summary(const Batch& b, bool check) {
  J j{{"type", "summary"}};
  j["schema_version"] = kSchemaVersion;
  j["options"] = options_json(b, check);
  j["summary"] = summary_json(b, check);
  j["failed_files"] = failed_json(b);
  return j;
}

}  // namespace tr::report
