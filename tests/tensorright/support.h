#pragma once
// Helpers shared by the trverify unit tests: rules from source text, and their checker errors.
#include <doctest/doctest.h>

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

}  // namespace trtest
