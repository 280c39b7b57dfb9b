// splatc: parses flags and hands the pattern files to libsplat. Subcommands live in
// analysis_commands.cpp (analyze, show), gpu_commands.cpp (emit, bench) and tune_command.cpp (tune);
// see commands.h.
#include <cctype>
#include <exception>
#include <new>
#include <vector>

#include "commands.h"
#include "common/cli.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/runtime/runtime.h"

namespace splatc {

splat::Limits& limits() {
  static splat::Limits l;
  return l;
}

namespace {

// "123", "512M", "4G", "1GiB": bytes, suffixes in powers of 1024. -1 when malformed or not in [1, 2^62].
int64_t parse_size(const std::string& s, bool suffixes) {
  constexpr uint64_t kMax = uint64_t{1} << 62;
  size_t k = 0;
  uint64_t v = 0;
  while (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])) && v <= kMax)
    v = v * 10 + static_cast<unsigned>(s[k++] - '0');
  if (k == 0 || v > kMax) return -1;
  std::string unit = s.substr(k);
  int shift = 0;
  if (suffixes && !unit.empty()) {
    const std::string u(1, static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
    shift = u == "K" ? 10 : u == "M" ? 20 : u == "G" ? 30 : u == "T" ? 40 : -1;
    unit = unit.substr(1);
    if (unit == "iB" || unit == "B" || unit == "ib" || unit == "b") unit.clear();
  }
  if (shift < 0 || !unit.empty()) return -1;
  if (v < 1 || v > (kMax >> shift)) return -1;
  return static_cast<int64_t>(v << shift);
}

}  // namespace
}  // namespace splatc

int main(int argc, char** argv) {
  CLI::App app{"splatc: sparse-attention kernels specialised to a pattern"};
  cli::Verbosity verbosity;
  cli::add_common(app, "splatc", verbosity);
  app.require_subcommand(1);
  app.fallthrough();  // -v/-q may also follow the subcommand: `splatc emit P.json -q`
  std::string max_memory, max_work;
  app.add_option("--max-memory", max_memory,
                 "Memory budget for reading and analysing a pattern: bytes, or with a K, M, G or T suffix "
                 "(default: half of physical memory or of ulimit -v, whichever is smaller)")
      ->type_name("SIZE");
  app.add_option("--max-work", max_work, "Steps allowed for analysing a pattern (default 268435456; docs/cli.md)")
      ->type_name("N");
  std::vector<splatc::Command> commands = {
      splatc::register_analyze(app), splatc::register_show(app),
      splatc::register_emit(app), splatc::register_bench(app), splatc::register_tune(app)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const std::string word = e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)
                                 ? ""
                                 : cli::misplaced_command_word(app, argc, argv);
    if (!word.empty()) return cli::usage_error("splatc", word + " (see splatc --help)");
    return cli::parse_error(app, e);
  }
  cli::setup_logging("splatc", verbosity);
  if (!max_memory.empty() && (splatc::limits().max_memory = splatc::parse_size(max_memory, true)) < 0) {
    spdlog::error("--max-memory: expected a size in bytes (at least 1, at most 2^62) with an optional K, M, G or T "
                  "suffix, got '{}'", max_memory);
    return cli::kBadInput;
  }
  if (!max_work.empty() && (splatc::limits().max_work = splatc::parse_size(max_work, false)) < 0) {
    spdlog::error("--max-work: expected a whole number of steps (at least 1, at most 2^62), got '{}'", max_work);
    return cli::kBadInput;
  }
  // Errors are reported once, here, at the edge.
  try {
    for (const splatc::Command& c : commands)
      if (c.sub && c.sub->parsed() && c.run) return c.run();
  } catch (const splat::Error& e) {
    spdlog::error("{}", e.what());
    return cli::kBadInput;
  } catch (const splat::ArchMismatch& e) {
    spdlog::error("--arch: {}", e.what());
    return cli::kBadInput;
  } catch (const splat::NoGpuError& e) {
    spdlog::error("{}", e.what());
    return cli::kEnvironment;
  } catch (const std::bad_alloc& e) {
    spdlog::error("internal error: out of memory ({}) in an allocation the --max-memory budget did not foresee", e.what());
    return cli::kEnvironment;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return cli::kEnvironment;
  }
  spdlog::error("no subcommand ran");
  return cli::kBadInput;
}
