#pragma once
// Flags that emit, bench and tune share: --dtype and --head-dim (the pattern file's values replaced),
// --cache FILE and --no-cache (the tuning cache). The default cache file is resolved here, from the
// environment ($XDG_CACHE_HOME/splatc/tuning.json, else $HOME/.cache/splatc/tuning.json); the
// library only ever gets a path or a loaded cache.
#include <CLI/CLI.hpp>

#include <memory>
#include <string>
#include <vector>

#include "libsplat/compile/tuning_cache.h"
#include "libsplat/pattern/pattern.h"

namespace splatc {

struct ProblemFlags {
  std::string dtype;
  int64_t head_dim = 0;
  void add(CLI::App* sub);
  // Each pattern file, with the overrides (splat::Error on bad input).
  std::vector<splat::Problem> load(const std::vector<std::string>& files) const;
};

// "" when neither XDG_CACHE_HOME (absolute) nor HOME is set.
std::string default_cache_path();

struct CacheFlags {
  std::string file;
  bool none = false;
  void add(CLI::App* sub, const std::string& what);
  // The cache file in use: --cache, else the default path ("" with --no-cache or no default).
  std::string path() const;
  bool explicit_file() const { return !file.empty(); }
  // Loads the cache. --cache FILE: unreadable or malformed is a splat::Error (exit 2), and so is a
  // missing file unless missing_ok; the default file: a warning and an empty cache (bad_default).
  void load(bool missing_ok);
  splat::TuningCacheRef ref() const { return {cache.get(), path()}; }
  std::shared_ptr<splat::TuningCache> cache;  // null: no cache
  bool bad_default = false;  // the default file is unreadable or malformed (ignored; tune replaces it)
};

}  // namespace splatc
