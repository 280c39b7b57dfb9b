#pragma once
// The tuning cache: the fused-kernel tuning `splatc tune` measured fastest for a problem, kept in one
// JSON file (docs/cli.md, "The tuning cache") and read back by `splatc emit` and `splatc bench` (and
// by the library's emit, bench and build_kernel when given a cache). The key is the SHA-256 of the
// problem in a canonical form (the parsed pattern, not the file's bytes: whitespace, key order and
// the name do not matter), the dtype, head_dim, the target architecture and splatc's version. No
// environment lookups here: the app resolves the file's path and passes it in.
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "libsplat/codegen/codegen.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

inline constexpr int kTuningCacheSchema = 1;

// The problem as the key sees it: sizes, heads, batch, causal, scale, dtype, head_dim and the term
// tree with each term's own fields, one canonical text (no name, no file, no JSON layout).
std::string canonical_problem(const Problem& p);
// SHA-256 hex of canonical_problem, the architecture ("sm_90a") and the splatc version.
std::string tuning_key(const Problem& p, const std::string& arch);

struct TuningEntry {
  std::string tuning;      // format_tuning of the winner; "" when the defaults won
  double time_us = 0;      // the winner's median time
  double default_us = 0;   // the defaults' median time
  std::string date;        // when it was measured, UTC ("2026-12-03T08:15:00Z")
  // For people reading the file (not part of the key's check): the problem's name, dtype,
  // head_dim, the architecture, the splatc version and the device.
  std::string problem, dtype, arch, version, device;
  int64_t head_dim = 0;
};

struct TuningCache {
  std::map<std::string, TuningEntry> entries;  // by tuning_key
  const TuningEntry* find(const std::string& key) const;
};

// Reads a cache file. A file that does not exist is an empty cache (missing_ok) or an Error; a file
// that cannot be read, is not JSON, has another schema_version or a malformed entry throws
// Error(path, json path, message) (JSON syntax errors as line:col).
TuningCache load_tuning_cache(const std::string& path, bool missing_ok = true);
// Writes `updates` into the cache file: read-modify-write (the entries now in the file are kept
// unless updated), to a temporary file in the same folder, then renamed over it; the folder is
// created when missing. A file that is unreadable or malformed throws as load_tuning_cache does,
// unless replace_bad, when it is replaced. Throws std::runtime_error on I/O errors.
void merge_tuning_cache(const std::string& path, const TuningCache& updates, bool replace_bad);
nlohmann::json tuning_cache_json(const TuningCache& cache);

// Where a kernel's tuning comes from: an explicit tuning (`--tune`) wins, then the cache's entry for
// the problem at the architecture, then the defaults.
struct ResolvedTuning {
  KernelTuning tuning;
  std::string source;  // "--tune", "cache FILE" or "default"
  const TuningEntry* entry = nullptr;  // the cache's entry when it was used
};
// A tuning cache as loaded from a file, for the library's entry points (EmitOptions, BenchOptions,
// BuildOptions).
struct TuningCacheRef {
  const TuningCache* cache = nullptr;
  std::string file;  // for "cache FILE"
};
ResolvedTuning resolve_tuning(const Problem& p, const std::string& arch, const std::optional<KernelTuning>& explicit_tuning,
                              const TuningCacheRef& cache);

}  // namespace splat
