// Parsing and validation of problem documents (docs/splatc-patterns.md). Every check names the
// JSON path of the offending value and what was expected; nothing of problem size is allocated
// before the sizes are checked.
#include "libsplat/pattern/pattern.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>

namespace splat {

namespace {

std::string join_what(const std::string& file, const std::string& path, const std::string& msg) {
  std::string s;
  if (!file.empty()) s += file + ": ";
  if (!path.empty()) s += path + ": ";
  return s + msg;
}

// Largest absolute value accepted for offsets, window sizes etc.: keeps every product of two
// parameters and a position well inside int64.
constexpr int64_t kMaxParam = int64_t{1} << 40;

using json = nlohmann::json;

std::string show(const json& v) {
  std::string s = v.dump();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

struct Parser {
  std::string file;
  Limits limits;
  int64_t seq_len = 0, kv_len = 0;

  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw Error(file, path, msg);
  }

  void check_fields(const json& obj, const std::string& path,
                    std::initializer_list<const char*> allowed) const {
    if (!obj.is_object()) fail(path, "expected an object, got " + show(obj));
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool ok = false;
      for (const char* a : allowed) ok = ok || it.key() == a;
      if (!ok) {
        std::string list;
        for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
        fail(path.empty() ? it.key() : path + "." + it.key(), "unknown field (expected one of: " + list + ")");
      }
    }
  }

  static std::string sub(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // An integer in [lo, hi]; `what` says what is expected ("a positive integer").
  int64_t integer(const json& v, const std::string& path, int64_t lo, int64_t hi, const std::string& what) const {
    if (!v.is_number_integer()) fail(path, "expected " + what + ", got " + show(v));
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo)))
        fail(path, "expected " + what + ", got " + show(v));
      return static_cast<int64_t>(u);
    }
    int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) fail(path, "expected " + what + ", got " + show(v));
    return x;
  }

  int64_t field(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi,
                const std::string& what, const int64_t* dflt = nullptr) const {
    auto it = obj.find(key);
    if (it == obj.end()) {
      if (dflt) return *dflt;
      fail(sub(path, key), "missing (expected " + what + ")");
    }
    return integer(*it, sub(path, key), lo, hi, what);
  }

  Term term(const json& v, const std::string& path) const {
    if (!v.is_object() || v.size() != 1)
      fail(path, "expected a pattern term: an object with exactly one key (window, dilated, strided, fixed, "
                 "blocked, block_window, global, random_blocks, affine, coo, union, intersect), got " + show(v));
    const std::string key = v.begin().key();
    const json& a = v.begin().value();
    const std::string p = path + "." + key;
    Term t;
    t.path = path;
    const std::string nonneg = "a non-negative integer", pos = "a positive integer";
    const int64_t zero = 0;
    if (key == "window") {
      t.kind = TermKind::Window;
      check_fields(a, p, {"left", "right"});
      t.left = field(a, p, "left", 0, kMaxParam, nonneg, &zero);
      t.right = field(a, p, "right", 0, kMaxParam, nonneg, &zero);
    } else if (key == "dilated") {
      t.kind = TermKind::Dilated;
      check_fields(a, p, {"left", "right", "dilation"});
      t.left = field(a, p, "left", 0, kMaxParam, nonneg, &zero);
      t.right = field(a, p, "right", 0, kMaxParam, nonneg, &zero);
      t.dilation = field(a, p, "dilation", 1, kMaxParam, pos);
    } else if (key == "strided") {
      t.kind = TermKind::Strided;
      check_fields(a, p, {"stride", "offset"});
      t.stride = field(a, p, "stride", 1, kMaxParam, pos);
      t.offset = field(a, p, "offset", 0, t.stride - 1,
                       "an integer in [0, stride) = [0, " + std::to_string(t.stride) + ")", &zero);
    } else if (key == "fixed") {
      t.kind = TermKind::Fixed;
      check_fields(a, p, {"block", "summary"});
      t.block = field(a, p, "block", 1, kMaxParam, pos);
      t.summary = field(a, p, "summary", 0, t.block,
                        "an integer in [0, block] = [0, " + std::to_string(t.block) + "]");
    } else if (key == "blocked") {
      t.kind = TermKind::Blocked;
      check_fields(a, p, {"block"});
      t.block = field(a, p, "block", 1, kMaxParam, pos);
    } else if (key == "block_window") {
      t.kind = TermKind::BlockWindow;
      check_fields(a, p, {"block", "left", "right"});
      t.block = field(a, p, "block", 1, kMaxParam, pos);
      t.left = field(a, p, "left", 0, kMaxParam, nonneg, &zero);
      t.right = field(a, p, "right", 0, kMaxParam, nonneg, &zero);
    } else if (key == "global") {
      t.kind = TermKind::Global;
      check_fields(a, p, {"tokens"});
      auto it = a.find("tokens");
      if (it == a.end()) fail(p + ".tokens", "missing (expected a non-empty array of token positions)");
      if (!it->is_array() || it->empty())
        fail(p + ".tokens", "expected a non-empty array of token positions, got " + show(*it));
      if (static_cast<int64_t>(it->size()) > limits.max_points)
        fail(p + ".tokens", "expected at most " + std::to_string(limits.max_points) + " tokens");
      const int64_t n = std::max(seq_len, kv_len);
      for (size_t k = 0; k < it->size(); ++k)
        t.tokens.push_back(integer((*it)[k], p + ".tokens[" + std::to_string(k) + "]", 0, n - 1,
                                   "a token position in [0, " + std::to_string(n) + ")"));
      std::sort(t.tokens.begin(), t.tokens.end());
      t.tokens.erase(std::unique(t.tokens.begin(), t.tokens.end()), t.tokens.end());
    } else if (key == "random_blocks") {
      t.kind = TermKind::RandomBlocks;
      check_fields(a, p, {"block", "per_row", "seed"});
      t.block = field(a, p, "block", 1, kMaxParam, pos);
      const int64_t nkb = (kv_len + t.block - 1) / t.block;
      t.per_row = field(a, p, "per_row", 1, nkb,
                        "an integer in [1, key blocks] = [1, " + std::to_string(nkb) + "]");
      auto it = a.find("seed");
      if (it != a.end()) {
        if (!it->is_number_integer() || (!it->is_number_unsigned() && it->get<int64_t>() < 0))
          fail(p + ".seed", "expected a non-negative integer, got " + show(*it));
        t.seed = it->get<uint64_t>();
      }
    } else if (key == "affine") {
      t.kind = TermKind::Affine;
      check_fields(a, p, {"slope", "offset", "stride", "count"});
      const int64_t one = 1;
      t.slope = field(a, p, "slope", -kMaxParam, kMaxParam, "an integer", &zero);
      t.offset = field(a, p, "offset", -kMaxParam, kMaxParam, "an integer", &zero);
      t.stride = field(a, p, "stride", 1, kMaxParam, pos, &one);
      t.count = field(a, p, "count", 1, kMaxParam, pos);
    } else if (key == "coo") {
      t.kind = TermKind::Coo;
      if (!a.is_array() || a.empty()) fail(p, "expected a non-empty array of [i, j] pairs, got " + show(a));
      if (static_cast<int64_t>(a.size()) > limits.max_points)
        fail(p, "expected at most " + std::to_string(limits.max_points) + " points");
      t.points.reserve(a.size());
      for (size_t k = 0; k < a.size(); ++k) {
        const std::string q = p + "[" + std::to_string(k) + "]";
        const json& e = a[k];
        if (!e.is_array() || e.size() != 2) fail(q, "expected a pair [i, j], got " + show(e));
        int64_t i = integer(e[0], q + "[0]", 0, seq_len - 1, "a row in [0, seq_len) = [0, " + std::to_string(seq_len) + ")");
        int64_t j = integer(e[1], q + "[1]", 0, kv_len - 1, "a column in [0, kv_len) = [0, " + std::to_string(kv_len) + ")");
        t.points.emplace_back(i, j);
      }
      std::sort(t.points.begin(), t.points.end());
      t.points.erase(std::unique(t.points.begin(), t.points.end()), t.points.end());
    } else if (key == "union" || key == "intersect") {
      t.kind = key == "union" ? TermKind::Union : TermKind::Intersect;
      if (!a.is_array() || a.empty()) fail(p, "expected a non-empty array of pattern terms, got " + show(a));
      for (size_t k = 0; k < a.size(); ++k) t.children.push_back(term(a[k], p + "[" + std::to_string(k) + "]"));
    } else {
      fail(p, "unknown pattern term (expected one of: window, dilated, strided, fixed, blocked, block_window, "
              "global, random_blocks, affine, coo, union, intersect)");
    }
    return t;
  }

  Problem problem(const json& doc, const std::string& name_hint) {
    check_fields(doc, "", {"name", "seq_len", "kv_len", "head_dim", "heads", "batch", "dtype", "scale",
                           "causal", "pattern"});
    Problem pr;
    pr.file = file;
    pr.name = name_hint;
    if (auto it = doc.find("name"); it != doc.end()) {
      if (!it->is_string() || it->get<std::string>().empty()) fail("name", "expected a non-empty string, got " + show(*it));
      pr.name = it->get<std::string>();
    }
    const std::string len = "an integer in [1, " + std::to_string(limits.max_len) + "]";
    pr.seq_len = field(doc, "", "seq_len", 1, limits.max_len, len);
    pr.kv_len = field(doc, "", "kv_len", 1, limits.max_len, len, &pr.seq_len);
    pr.head_dim = field(doc, "", "head_dim", 1, 65536, "an integer in [1, 65536]");
    const int64_t one = 1;
    pr.heads = field(doc, "", "heads", 1, 1 << 20, "an integer in [1, 1048576]", &one);
    pr.batch = field(doc, "", "batch", 1, 1 << 20, "an integer in [1, 1048576]", &one);
    if (auto it = doc.find("dtype"); it != doc.end()) {
      const std::string s = it->is_string() ? it->get<std::string>() : "";
      if (s == "fp32") pr.dtype = DType::FP32;
      else if (s == "tf32") pr.dtype = DType::TF32;
      else if (s == "fp16") pr.dtype = DType::FP16;
      else if (s == "bf16") pr.dtype = DType::BF16;
      else fail("dtype", "expected one of \"fp32\", \"tf32\", \"fp16\", \"bf16\", got " + show(*it));
    }
    pr.scale = 1.0 / std::sqrt(static_cast<double>(pr.head_dim));
    if (auto it = doc.find("scale"); it != doc.end()) {
      if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() <= 0)
        fail("scale", "expected a positive finite number, got " + show(*it));
      pr.scale = it->get<double>();
    }
    if (auto it = doc.find("causal"); it != doc.end()) {
      if (!it->is_boolean()) fail("causal", "expected true or false, got " + show(*it));
      pr.causal = it->get<bool>();
    }
    // Sizes first: a problem too large is refused before its pattern (coo lists, token lists) is read.
    const long double bytes = static_cast<long double>(pr.batch) * pr.heads * (2.0L * pr.seq_len + 2.0L * pr.kv_len) *
                              pr.head_dim * dtype_bytes(pr.dtype);
    if (bytes > static_cast<long double>(limits.max_tensor_bytes)) {
      std::ostringstream m;
      m.precision(3);
      m << "problem too large: Q, K, V and O need " << static_cast<double>(bytes / (1024.0L * 1024 * 1024))
        << " GiB (batch*heads*(2*seq_len+2*kv_len)*head_dim*" << dtype_bytes(pr.dtype) << " bytes), more than the limit of "
        << static_cast<double>(limits.max_tensor_bytes) / (1024.0 * 1024 * 1024) << " GiB";
      fail("seq_len", m.str());
    }
    seq_len = pr.seq_len;
    kv_len = pr.kv_len;
    auto it = doc.find("pattern");
    if (it == doc.end()) fail("pattern", "missing (expected a pattern term)");
    pr.pattern = term(*it, "pattern");
    return pr;
  }
};

uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int64_t fdiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }
int64_t fmod(int64_t a, int64_t b) { return a - fdiv(a, b) * b; }

}  // namespace

Error::Error(std::string file, std::string json_path, std::string message)
    : std::runtime_error(join_what(file, json_path, message)),
      file_(std::move(file)), path_(std::move(json_path)), message_(std::move(message)) {}

const char* dtype_name(DType d) {
  switch (d) {
    case DType::FP32: return "fp32";
    case DType::TF32: return "tf32";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

int dtype_bytes(DType d) { return d == DType::FP16 || d == DType::BF16 ? 2 : 4; }

const char* term_name(TermKind k) {
  switch (k) {
    case TermKind::Window: return "window";
    case TermKind::Dilated: return "dilated";
    case TermKind::Strided: return "strided";
    case TermKind::Fixed: return "fixed";
    case TermKind::Blocked: return "blocked";
    case TermKind::BlockWindow: return "block_window";
    case TermKind::Global: return "global";
    case TermKind::RandomBlocks: return "random_blocks";
    case TermKind::Affine: return "affine";
    case TermKind::Coo: return "coo";
    case TermKind::Union: return "union";
    case TermKind::Intersect: return "intersect";
  }
  return "?";
}

Problem parse_problem(const nlohmann::json& doc, const std::string& name_hint, const std::string& file,
                      const Limits& limits) {
  Parser p{file, limits};
  return p.problem(doc, name_hint);
}

Problem parse_problem_text(const std::string& text, const std::string& name_hint, const std::string& file,
                           const Limits& limits) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    // nlohmann reports the byte offset just past the offending token; turn it into the line:col of
    // the token's last character.
    size_t off = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    int64_t line = 1, col = 1;
    for (size_t k = 0; k < off; ++k) {
      if (text[k] == '\n') { ++line; col = 1; } else { ++col; }
    }
    std::string what = e.what();
    // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
    if (auto c = what.find("syntax error"); c != std::string::npos) what = what.substr(c);
    else if (auto c2 = what.rfind(": "); c2 != std::string::npos) what = what.substr(c2 + 2);
    throw Error(file.empty() ? "<input>:" + std::to_string(line) + ":" + std::to_string(col)
                             : file + ":" + std::to_string(line) + ":" + std::to_string(col),
                "", "invalid JSON: " + what);
  }
  return parse_problem(doc, name_hint, file, limits);
}

Problem load_problem(const std::string& path, const Limits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "cannot read the file");
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  if (!ec && size > (uint64_t{1} << 32)) throw Error(path, "", "file larger than 4 GiB");
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_problem_text(ss.str(), std::filesystem::path(path).stem().string(), path, limits);
}

int64_t tensor_bytes(const Problem& p) {
  return p.batch * p.heads * (2 * p.seq_len + 2 * p.kv_len) * p.head_dim * dtype_bytes(p.dtype);
}

std::vector<int64_t> random_key_blocks(const Term& t, int64_t rb, int64_t nkb) {
  std::vector<int64_t> out;
  const int64_t r = std::min(t.per_row, nkb);
  if (r <= 0) return out;
  uint64_t state = t.seed ^ (static_cast<uint64_t>(rb) * 0xD1B54A32D192ED03ull);
  out.reserve(static_cast<size_t>(r));
  while (static_cast<int64_t>(out.size()) < r) {
    int64_t k = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(nkb));
    if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool kept(const Term& t, const Problem& p, int64_t i, int64_t j) {
  if (i < 0 || i >= p.seq_len || j < 0 || j >= p.kv_len) return false;
  switch (t.kind) {
    case TermKind::Window: return i - t.left <= j && j <= i + t.right;
    case TermKind::Dilated: {
      int64_t d = j - i;
      return fmod(d, t.dilation) == 0 && -t.left <= d / t.dilation && d / t.dilation <= t.right;
    }
    case TermKind::Strided: return fmod(i - j, t.stride) == t.offset;
    case TermKind::Fixed: return fdiv(i, t.block) == fdiv(j, t.block) || fmod(j, t.block) >= t.block - t.summary;
    case TermKind::Blocked: return fdiv(i, t.block) == fdiv(j, t.block);
    case TermKind::BlockWindow: {
      int64_t d = fdiv(j, t.block) - fdiv(i, t.block);
      return -t.left <= d && d <= t.right;
    }
    case TermKind::Global:
      return std::binary_search(t.tokens.begin(), t.tokens.end(), i) ||
             std::binary_search(t.tokens.begin(), t.tokens.end(), j);
    case TermKind::RandomBlocks: {
      auto ks = random_key_blocks(t, fdiv(i, t.block), (p.kv_len + t.block - 1) / t.block);
      return std::binary_search(ks.begin(), ks.end(), fdiv(j, t.block));
    }
    case TermKind::Affine: {
      int64_t d = j - (t.slope * i + t.offset);
      return d >= 0 && d % t.stride == 0 && d / t.stride < t.count;
    }
    case TermKind::Coo: return std::binary_search(t.points.begin(), t.points.end(), std::make_pair(i, j));
    case TermKind::Union:
      for (const Term& c : t.children)
        if (kept(c, p, i, j)) return true;
      return false;
    case TermKind::Intersect:
      for (const Term& c : t.children)
        if (!kept(c, p, i, j)) return false;
      return true;
  }
  return false;
}

bool kept(const Problem& p, int64_t i, int64_t j) {
  if (p.causal && j > i) return false;
  return kept(p.pattern, p, i, j);
}

}  // namespace splat
