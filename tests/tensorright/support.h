#pragma once
// Helpers shared by the trverify unit tests: rules from source text, and their checker errors.
#include <doctest/doctest.h>

#include <sstream>
#include <string>

#include "libtensorright/check/check.h"
#include "libtensorright/check/error.h"

namespace trtest {

// The single rule of a source text (fails the test if there is not exactly one).
inline tr::Rule one_rule(const std::string& src, const std::string& file = "t.tr") {
  tr::LoadedFile f = tr::load_rule_source(src, file);
  REQUIRE(f.rules.size() == 1);
  return f.rules[0];
}

// The rendered diagnostic of a source text that must not load, or "" if it loads.
inline std::string check_error(const std::string& src, const std::string& file = "t.tr") {
  try {
    tr::load_rule_source(src, file);
  } catch (const tr::Error& e) {
    return e.what();
  }
  return "";
}

// A rendered diagnostic for `src` has the documented layout: "FILE:LINE:COL: error: ...", then the
// source line LINE, then a caret under column COL.
inline void check_diagnostic_layout(const std::string& err, const std::string& src) {
  std::istringstream is(err);
  std::string l1, l2, l3;
  std::getline(is, l1);
  std::getline(is, l2);
  std::getline(is, l3);
  auto c1 = l1.find(':'), c2 = l1.find(':', c1 + 1), c3 = l1.find(':', c2 + 1);
  REQUIRE(c3 != std::string::npos);
  int line = std::stoi(l1.substr(c1 + 1, c2 - c1 - 1)), col = std::stoi(l1.substr(c2 + 1, c3 - c2 - 1));
  std::istringstream ss(src);
  std::string want;
  for (int i = 0; i < line; ++i) std::getline(ss, want);
  if (l2 == want) {
    CHECK(l3 == std::string(static_cast<size_t>(col - 1), ' ') + "^");
    return;
  }
  // A long line is shown as a window around the column, cut with "...": the caret stays under it.
  CHECK(want.size() > l2.size());
  CHECK(l2.find("...") != std::string::npos);
  REQUIRE(!l3.empty());
  CHECK(l3.back() == '^');
  CHECK(l3.size() <= l2.size());
}

}  // namespace trtest
