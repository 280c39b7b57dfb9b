#pragma once
// Conventions shared by splatc and trverify (docs/cli.md): exit codes, -v/-q logging to stderr,
// --version. Only flag plumbing lives here; the work is in the libraries.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "trsplat/version.h"

namespace cli {

enum Exit : int {
  kOk = 0,           // success
  kCheckFailed = 1,  // a check or verification failed
  kBadInput = 2,     // bad usage or bad input
  kEnvironment = 3,  // environment or internal error (e.g. no GPU where one is needed)
};

struct Verbosity {
  int verbose = 0;
  bool quiet = false;
};

// Adds --version, -v (repeatable) and -q to the app.
inline void add_common(CLI::App& app, const std::string& tool, Verbosity& v) {
  app.set_version_flag("--version", tool + " " + TRSPLAT_VERSION);
  app.add_flag("-v,--verbose", v.verbose, "More log output on stderr (-vv for debug traces)");
  app.add_flag("-q,--quiet", v.quiet, "Only errors on stderr");
}

// Logs go to stderr so that stdout carries only the report (and --json stays parseable).
inline void setup_logging(const std::string& tool, const Verbosity& v) {
  auto logger = spdlog::stderr_color_mt(tool);
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  if (v.quiet)
    spdlog::set_level(spdlog::level::err);
  else if (v.verbose >= 2)
    spdlog::set_level(spdlog::level::trace);
  else if (v.verbose == 1)
    spdlog::set_level(spdlog::level::debug);
  else
    spdlog::set_level(spdlog::level::warn);
}

// Colour only on a terminal, and never when NO_COLOR is set to a non-empty value (no-color.org).
inline bool use_color(int fd) {
  const char* no = std::getenv("NO_COLOR");
  return !(no && *no) && isatty(fd);
}

// A usage error in trverify's one diagnostic form, `TOOL: error: MESSAGE`; returns exit code 2.
inline int usage_error(const std::string& tool, const std::string& message) {
  std::cerr << tool << ": error: " << message << "\n";
  return kBadInput;
}

// CLI11 parse errors in the same form (help and version print as usual and exit 0).
inline int parse_error_prefixed(CLI::App& app, const std::string& tool, const CLI::ParseError& e) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e) == 0 ? kOk : kBadInput;
  return usage_error(tool, std::string(e.what()) + " (see " + tool + " --help)");
}

// CLI11 parse errors are usage errors: exit 2 (help and version exit 0).
inline int parse_error(CLI::App& app, const CLI::ParseError& e) {
  int rc = app.exit(e);
  return rc == 0 ? kOk : kBadInput;
}

}  // namespace cli
