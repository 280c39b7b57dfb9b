// --dtype, --head-dim, --cache, --no-cache (tuning_flags.h).
#include "tuning_flags.h"

#include <spdlog/spdlog.h>

#include <cstdlib>

#include "commands.h"

namespace splatc {

void ProblemFlags::add(CLI::App* sub) {
  sub->add_option("--dtype", dtype, "Use this dtype instead of the pattern file's")
      ->check(CLI::IsMember({"fp32", "tf32", "fp16", "bf16"}));
  sub->add_option("--head-dim", head_dim, "Use this head_dim instead of the pattern file's (the default scale follows it)")
      ->check(CLI::Range(int64_t{1}, int64_t{65536}));
}

std::vector<splat::Problem> ProblemFlags::load(const std::vector<std::string>& files) const {
  splat::ProblemOverrides over;
  if (!dtype.empty()) over.dtype = splat::dtype_from_name(dtype);
  if (head_dim > 0) over.head_dim = head_dim;
  std::vector<splat::Problem> out;
  for (const std::string& f : files) out.push_back(splat::load_problem(f, limits(), over));
  return out;
}

std::string default_cache_path() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/splatc/tuning.json";
  const char* home = std::getenv("HOME");
  if (home && *home) return std::string(home) + "/.cache/splatc/tuning.json";
  return "";
}

void CacheFlags::add(CLI::App* sub, const std::string& what) {
  auto* c = sub->add_option("--cache", file,
                            "Tuning cache file " + what + " (default: $XDG_CACHE_HOME/splatc/tuning.json, else "
                            "~/.cache/splatc/tuning.json)");
  auto* n = sub->add_flag("--no-cache", none, "Neither read nor write the tuning cache");
  c->excludes(n);
}

std::string CacheFlags::path() const {
  if (none) return "";
  return file.empty() ? default_cache_path() : file;
}

void CacheFlags::load(bool missing_ok) {
  cache.reset();
  const std::string p = path();
  if (p.empty()) return;
  if (explicit_file()) {
    cache = std::make_shared<splat::TuningCache>(splat::load_tuning_cache(p, missing_ok));
    return;
  }
  try {
    cache = std::make_shared<splat::TuningCache>(splat::load_tuning_cache(p, true));
  } catch (const splat::Error& e) {
    spdlog::warn("ignoring the tuning cache: {}", e.what());
    bad_default = true;
    cache = std::make_shared<splat::TuningCache>();
  }
}

}  // namespace splatc
