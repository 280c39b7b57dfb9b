#include "libsplat/compile/tuning_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "libsplat/compile/sha256.h"
#include "trsplat/version.h"

namespace fs = std::filesystem;

namespace splat {
namespace {

using Sink = std::function<void(const std::string&)>;

std::string num(int64_t x) { return std::to_string(x); }

std::string real(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

std::string term_text(const Term& t);

// One term as text: its kind and its own fields (pattern.h's table), children in a canonical order
// (union and intersection are commutative).
void write_term(const Term& t, const Sink& out) {
  out(term_name(t.kind));
  out("(");
  switch (t.kind) {
    case TermKind::Window: out("left=" + num(t.left) + ",right=" + num(t.right)); break;
    case TermKind::Dilated: out("left=" + num(t.left) + ",right=" + num(t.right) + ",dilation=" + num(t.dilation)); break;
    case TermKind::Strided: out("stride=" + num(t.stride) + ",offset=" + num(t.offset)); break;
    case TermKind::Fixed: out("block=" + num(t.block) + ",summary=" + num(t.summary)); break;
    case TermKind::Blocked: out("block=" + num(t.block)); break;
    case TermKind::BlockWindow: out("block=" + num(t.block) + ",left=" + num(t.left) + ",right=" + num(t.right)); break;
    case TermKind::RandomBlocks:
      out("block=" + num(t.block) + ",per_row=" + num(t.per_row) + ",seed=" + std::to_string(t.seed));
      break;
    case TermKind::Affine:
      out("slope=" + num(t.slope) + ",offset=" + num(t.offset) + ",stride=" + num(t.stride) + ",count=" + num(t.count));
      break;
    case TermKind::Global:
      for (int64_t x : t.tokens) out(num(x) + ";");
      break;
    case TermKind::Coo:
      for (const auto& [i, j] : t.points) out(num(i) + "," + num(j) + ";");
      break;
    case TermKind::Union:
    case TermKind::Intersect: {
      std::vector<std::string> kids;
      for (const Term& c : t.children) kids.push_back(term_text(c));
      std::sort(kids.begin(), kids.end());
      for (const std::string& k : kids) out(k + ";");
      break;
    }
  }
  out(")");
}

std::string term_text(const Term& t) {
  std::string s;
  write_term(t, [&](const std::string& x) { s += x; });
  return s;
}

void write_problem(const Problem& p, const Sink& out) {
  out("splatc-problem/1 seq_len=" + num(p.seq_len) + " kv_len=" + num(p.kv_len) + " heads=" + num(p.heads) +
      " batch=" + num(p.batch) + " causal=" + (p.causal ? "1" : "0") + " scale=" + real(p.scale) +
      " dtype=" + dtype_name(p.dtype) + " head_dim=" + num(p.head_dim) +
      // Added fields only when they differ from their defaults, so that older keys stay valid.
      (p.kv_heads != p.heads ? " kv_heads=" + num(p.kv_heads) : std::string()) +
      (p.q_offset != 0 ? " q_offset=" + num(p.q_offset) : std::string()) +
      (p.group_heads.empty() ? std::string() : " group_heads=" + num(static_cast<int64_t>(p.group_heads.size()))) +
      " pattern=");
  write_term(p.pattern, out);
}

// Line and column (1-based) of a byte offset of text.
std::string line_col(const std::string& text, size_t byte) {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte && i < text.size(); ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return num(static_cast<int64_t>(line)) + ":" + num(static_cast<int64_t>(col));
}

TuningEntry entry_from(const nlohmann::json& e, const std::string& file, const std::string& path) {
  if (!e.is_object()) throw Error(file, path, "expected an object");
  const auto str = [&](const char* k, bool required) -> std::string {
    auto it = e.find(k);
    if (it == e.end()) {
      if (required) throw Error(file, path + "." + k, "missing");
      return "";
    }
    if (!it->is_string()) throw Error(file, path + "." + k, "expected a string");
    return it->get<std::string>();
  };
  const auto number = [&](const char* k) -> double {
    auto it = e.find(k);
    if (it == e.end() || !it->is_number() || it->get<double>() < 0)
      throw Error(file, path + "." + k, it == e.end() ? "missing" : "expected a number >= 0");
    return it->get<double>();
  };
  TuningEntry t;
  t.tuning = str("tuning", true);
  try {
    t.tuning = format_tuning(parse_tuning(t.tuning));
  } catch (const std::invalid_argument& ex) {
    throw Error(file, path + ".tuning", ex.what());
  }
  t.time_us = number("time_us");
  t.default_us = number("default_us");
  t.date = str("date", false);
  t.problem = str("problem", false);
  t.dtype = str("dtype", false);
  t.arch = str("arch", false);
  t.version = str("splatc", false);
  t.device = str("device", false);
  if (auto it = e.find("head_dim"); it != e.end() && it->is_number_integer()) t.head_dim = it->get<int64_t>();
  return t;
}

}  // namespace

std::string canonical_problem(const Problem& p) {
  std::string s;
  write_problem(p, [&](const std::string& x) { s += x; });
  return s;
}

std::string tuning_key(const Problem& p, const std::string& arch) {
  Sha256 h;
  write_problem(p, [&](const std::string& x) { h.add(x); });
  h.add(std::string(" arch=") + arch + " splatc=" + TRSPLAT_VERSION);
  return h.hex();
}

const TuningEntry* TuningCache::find(const std::string& key) const {
  auto it = entries.find(key);
  return it == entries.end() ? nullptr : &it->second;
}

TuningCache load_tuning_cache(const std::string& path, bool missing_ok) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    if (missing_ok) return {};
    throw Error(path, "", "cannot read the tuning cache: no such file");
  }
  if (fs::is_directory(st)) throw Error(path, "", "cannot read the tuning cache: it is a directory");
  std::ifstream in(path, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in) throw Error(path, "", "cannot read the tuning cache");
  const std::string text = buf.str();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(path + ":" + line_col(text, e.byte > 0 ? e.byte - 1 : 0), "",
                "the tuning cache is not valid JSON (delete it, or run splatc tune to rewrite it)");
  }
  if (!doc.is_object()) throw Error(path, "", "the tuning cache is not a JSON object");
  auto sv = doc.find("schema_version");
  if (sv == doc.end() || !sv->is_number_integer()) throw Error(path, "schema_version", "missing or not an integer");
  if (sv->get<int64_t>() != kTuningCacheSchema)
    throw Error(path, "schema_version",
                "this splatc reads schema " + num(kTuningCacheSchema) + ", the file has " + sv->dump());
  auto es = doc.find("entries");
  if (es == doc.end() || !es->is_object()) throw Error(path, "entries", "missing or not an object");
  TuningCache c;
  for (const auto& [key, e] : es->items()) {
    if (key.size() != 64 || key.find_first_not_of("0123456789abcdef") != std::string::npos)
      throw Error(path, "entries." + key, "the key is not a SHA-256 (64 lowercase hex digits)");
    c.entries[key] = entry_from(e, path, "entries." + key);
  }
  return c;
}

nlohmann::json tuning_cache_json(const TuningCache& cache) {
  nlohmann::json es = nlohmann::json::object();
  for (const auto& [key, e] : cache.entries)
    es[key] = {{"tuning", e.tuning},     {"time_us", e.time_us}, {"default_us", e.default_us}, {"date", e.date},
               {"problem", e.problem},   {"dtype", e.dtype},     {"head_dim", e.head_dim},     {"arch", e.arch},
               {"splatc", e.version},    {"device", e.device}};
  return {{"schema_version", kTuningCacheSchema},
          {"generator", std::string("splatc ") + TRSPLAT_VERSION},
          {"note", "splatc tune's measured fused-kernel tunings; key: SHA-256 of the canonical problem, arch and "
                   "splatc version; tuning \"\": the defaults won"},
          {"entries", es}};
}

void merge_tuning_cache(const std::string& path, const TuningCache& updates, bool replace_bad) {
  TuningCache merged;
  try {
    merged = load_tuning_cache(path, true);
  } catch (const Error&) {
    if (!replace_bad) throw;
  }
  for (const auto& [key, e] : updates.entries) merged.entries[key] = e;
  const fs::path dst(path);
  if (dst.has_parent_path()) fs::create_directories(dst.parent_path());
  const fs::path tmp = dst.string() + ".tmp." + std::to_string(::getpid());
  const std::string text = tuning_cache_json(merged).dump(2) + "\n";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
    f.close();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("cannot write the tuning cache " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, dst, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("cannot write the tuning cache " + path + ": " + ec.message());
  }
}

ResolvedTuning resolve_tuning(const Problem& p, const std::string& arch, const std::optional<KernelTuning>& explicit_tuning,
                              const TuningCacheRef& cache) {
  ResolvedTuning r;
  if (explicit_tuning) {
    r.tuning = *explicit_tuning;
    r.source = "--tune";
    return r;
  }
  if (cache.cache)
    if (const TuningEntry* e = cache.cache->find(tuning_key(p, arch))) {
      r.tuning = parse_tuning(e->tuning);
      r.source = "cache " + cache.file;
      r.entry = e;
      return r;
    }
  r.source = "default";
  return r;
}

}  // namespace splat
