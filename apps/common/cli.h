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

#include "common/cli_docs.h"
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
  add_doc_flags(app, tool, TRSPLAT_VERSION);
  app.add_flag("-v,--verbose", v.verbose, "More log output on stderr: -v info, -vv debug, -vvv trace");
  app.add_flag("-q,--quiet", v.quiet, "Only errors on stderr");
}

// Colour only on a terminal, and never when NO_COLOR is set to a non-empty value (no-color.org).
inline bool use_color(int fd) {
  const char* no = std::getenv("NO_COLOR");
  return !(no && *no) && isatty(fd);
}

// Logs go to stderr so that stdout carries only the report (and --json stays parseable): warnings
// and errors by default, info with -v, debug with -vv, trace with -vvv, errors only with -q; level
// names coloured only where use_color(2) says so.
inline void setup_logging(const std::string& tool, const Verbosity& v) {
  auto logger = spdlog::stderr_color_mt(tool, use_color(2) ? spdlog::color_mode::automatic : spdlog::color_mode::never);
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  if (v.quiet)
    spdlog::set_level(spdlog::level::err);
  else if (v.verbose >= 3)
    spdlog::set_level(spdlog::level::trace);
  else if (v.verbose == 2)
    spdlog::set_level(spdlog::level::debug);
  else if (v.verbose == 1)
    spdlog::set_level(spdlog::level::info);
  else
    spdlog::set_level(spdlog::level::warn);
}

// An existing file, or "-" for standard input.
inline CLI::Validator pattern_file() {
  return CLI::Validator(
      [](std::string& v) { return v == "-" ? std::string() : CLI::ExistingFile(v); }, "FILE or -");
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

// When a tool that needs a subcommand got none: the word that stood where the command should be
// (an unknown command, or an option the tool does not have), named in a usage error; an empty
// string when the command line has no such word (then CLI11's own message stands). Options of the
// main app are skipped, with their value when they take one.
inline std::string misplaced_command_word(const CLI::App& app, int argc, char** argv) {
  if (!app.get_subcommands().empty()) return "";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) != 0) {
      std::string names;
      for (const CLI::App* s : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + s->get_name();
      return "unknown command '" + a + "' (commands: " + names + ")";
    }
    // A cluster of short flags (-vv): named by its first letter.
    const bool cluster = a.size() > 2 && a[1] != '-';
    const std::string name = cluster ? a.substr(0, 2) : a.substr(0, a.find('='));
    const CLI::Option* o = nullptr;
    try {
      o = app.get_option(name);
    } catch (const CLI::OptionNotFound&) {
      return "unknown option '" + name + "'";
    }
    if (!cluster && o->get_expected_min() > 0 && a.find('=') == std::string::npos) ++i;  // its value
  }
  return "";
}

// CLI11 parse errors are usage errors: exit 2 (help and version exit 0).
inline int parse_error(CLI::App& app, const CLI::ParseError& e) {
  int rc = app.exit(e);
  return rc == 0 ? kOk : kBadInput;
}

}  // namespace cli
