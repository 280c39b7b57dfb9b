#pragma once
// Shared by the libFuzzer targets of tests/fuzz (docs/fuzzing.md). A finding is an abort with a
// message on stderr: libFuzzer then saves the input as the reproducer.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

namespace fuzz {

[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "\n==== FUZZ FINDING ====\n%s\n======================\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

// The message of the exception in flight (inside a catch block).
inline std::string current_exception_text() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "(an exception of unknown type)";
  }
}

}  // namespace fuzz
