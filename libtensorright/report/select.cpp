#include "libtensorright/report/select.h"

#include <fnmatch.h>

#include <cctype>

namespace tr::report {

RuleList match_rules(RuleList rules, const std::vector<std::string>& patterns, std::vector<std::string>& unmatched) {
  if (patterns.empty()) return rules;
  std::vector<bool> used(patterns.size(), false);
  RuleList out;
  for (auto& fr : rules) {
    bool keep = false;
    for (size_t p = 0; p < patterns.size(); ++p)
      if (fnmatch(patterns[p].c_str(), fr.second.name.c_str(), 0) == 0) keep = used[p] = true;
    if (keep) out.push_back(std::move(fr));
  }
  for (size_t p = 0; p < patterns.size(); ++p)
    if (!used[p]) unmatched.push_back(patterns[p]);
  return out;
}

bool glob_selected(const std::string& name, const std::vector<std::string>& patterns) {
  if (patterns.empty()) return true;
  for (const auto& p : patterns)
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

namespace {
int positive(const std::string& s, const std::string& text) {
  bool digits = !s.empty() && s.size() <= 9;
  for (char c : s) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (!digits || std::stoi(s) < 1)
    throw std::invalid_argument("expected K/N with whole numbers 1 <= K <= N, got '" + text + "'");
  return std::stoi(s);
}
}  // namespace

Shard parse_shard(const std::string& text) {
  auto slash = text.find('/');
  if (slash == std::string::npos)
    throw std::invalid_argument("expected K/N with whole numbers 1 <= K <= N, got '" + text + "'");
  Shard s{positive(text.substr(0, slash), text), positive(text.substr(slash + 1), text)};
  if (s.k > s.n) throw std::invalid_argument("shard " + std::to_string(s.k) + " of " + std::to_string(s.n) +
                                             " does not exist: K must be between 1 and N");
  return s;
}

RuleList shard_rules(RuleList rules, const Shard& s) {
  RuleList out;
  for (size_t i = static_cast<size_t>(s.k - 1); i < rules.size(); i += static_cast<size_t>(s.n))
    out.push_back(std::move(rules[i]));
  return out;
}

}  // namespace tr::report
