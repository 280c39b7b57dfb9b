// Parsing and validation of problem documents (docs/splatc-patterns.md). Every check names the
// JSON path of the offending value and what was expected; nothing of problem size is allocated
// before the sizes are checked.
#include "libsplat/pattern/pattern.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "libsplat/pattern/json_reader.h"

namespace splat {

namespace {

std::string join_what(const std::string& file, const std::string& path, const std::string& msg) {
  std::string s;
  if (!file.empty()) s += file + ": ";
  if (!path.empty()) s += path + ": ";
  return detail::printable(s + msg);
}

__extension__ typedef __int128 i128;

std::string mib(int64_t bytes) {
  std::ostringstream m;
  m.setf(std::ios::fixed);
  m.precision(1);
  m << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return m.str();
}

// Largest absolute value accepted for offsets, window sizes etc.: keeps every product of two
// parameters and a position well inside int64.
constexpr int64_t kMaxParam = int64_t{1} << 40;

using json = nlohmann::json;

// Compact JSON text of v, stopping once `out` is longer than `limit` (values may be huge).
void render(const json& v, std::string& out, size_t limit) {
  if (out.size() > limit) return;
  if (v.is_binary() && v.get_binary().subtype() == detail::kCooPairs) {  // packed coo pairs
    const auto& b = v.get_binary();
    out += '[';
    for (size_t k = 0; k + 16 <= b.size() && out.size() <= limit; k += 16) {
      int64_t ij[2];
      std::memcpy(ij, b.data() + k, sizeof ij);
      out += (k ? ",[" : "[") + std::to_string(ij[0]) + "," + std::to_string(ij[1]) + "]";
    }
    out += ']';
  } else if (v.is_array()) {
    out += '[';
    for (size_t k = 0; k < v.size() && out.size() <= limit; ++k) {
      if (k) out += ',';
      render(v[k], out, limit);
    }
    out += ']';
  } else if (v.is_object()) {
    out += '{';
    bool first = true;
    for (auto it = v.begin(); it != v.end() && out.size() <= limit; ++it) {
      if (!first) out += ',';
      first = false;
      out += json(it.key().substr(0, limit)).dump(-1, ' ', false, json::error_handler_t::replace) + ":";
      render(it.value(), out, limit);
    }
    out += '}';
  } else if (v.is_string()) {
    out += json(v.get_ref<const std::string&>().substr(0, limit)).dump(-1, ' ', false, json::error_handler_t::replace);
  } else {
    out += v.dump(-1, ' ', false, json::error_handler_t::replace);
  }
}

std::string show(const json& v) {
  std::string s;
  render(v, s, 40);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

// Sorts 64-bit keys: least significant digit first, 11 bits a pass, only as many passes as the
// largest key needs (std::sort for short lists).
void sort_keys(std::vector<uint64_t>& keys) {
  if (keys.size() < (size_t{1} << 16) || std::is_sorted(keys.begin(), keys.end())) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  constexpr int kBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  uint64_t all = 0;
  for (uint64_t k : keys) all |= k;
  std::vector<uint64_t> tmp(keys.size());
  std::vector<size_t> count(size_t{1} << kBits);
  for (int shift = 0; shift < 64 && (all >> shift) != 0; shift += kBits) {
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : keys) ++count[(k >> shift) & kMask];
    size_t at = 0;
    for (size_t& c : count) at += std::exchange(c, at);
    for (uint64_t k : keys) tmp[count[(k >> shift) & kMask]++] = k;
    keys.swap(tmp);
  }
}

// x as int64 when v is an integer in [lo, hi].
bool int_in(const json& v, int64_t lo, int64_t hi, int64_t& x) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return false;
    x = static_cast<int64_t>(u);
  } else if (v.is_number_integer()) {
    x = v.get<int64_t>();
  } else {
    return false;
  }
  return x >= lo && x <= hi;
}

struct Parser {
  std::string file;
  Limits limits;
  int64_t held = 0;  // bytes counted against limits.max_memory (the text and its document, then terms)
  ProblemOverrides over = {};
  int64_t seq_len = 0, kv_len = 0;
  int64_t q_offset = 0;  // rows of coo points and row tokens are positions in [q_offset, q_offset + seq_len)

  [[noreturn]] void fail(const std::string& path, const std::string& msg) const {
    throw Error(file, path, msg);
  }

  void charge(int64_t bytes) {
    held += bytes;
    if (held > limits.max_memory) throw_memory_limit(file, "reading the pattern", held, limits);
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

  Term term(const json& v, const std::string& path, int depth) {
    if (depth > limits.max_depth)
      fail(path, "terms nested deeper than " + std::to_string(limits.max_depth) + " levels");
    charge(static_cast<int64_t>(sizeof(Term) + path.size()));
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
      charge(static_cast<int64_t>(it->size() * sizeof(int64_t)));
      const int64_t n = std::max(q_offset + seq_len, kv_len);
      t.tokens.reserve(it->size());
      for (size_t k = 0; k < it->size(); ++k) {
        int64_t x = 0;
        if (!int_in((*it)[k], 0, n - 1, x))
          fail(p + ".tokens[" + std::to_string(k) + "]",
               "expected a token position in [0, " + std::to_string(n) + "), got " + show((*it)[k]));
        t.tokens.push_back(x);
      }
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
      coo(a, p, t);
    } else if (key == "union" || key == "intersect") {
      t.kind = key == "union" ? TermKind::Union : TermKind::Intersect;
      if (!a.is_array() || a.empty()) fail(p, "expected a non-empty array of pattern terms, got " + show(a));
      t.children.reserve(a.size());
      for (size_t k = 0; k < a.size(); ++k)
        t.children.push_back(term(a[k], p + "[" + std::to_string(k) + "]", depth + 1));
    } else {
      fail(p, "unknown pattern term (expected one of: window, dilated, strided, fixed, blocked, block_window, "
              "global, random_blocks, affine, coo, union, intersect)");
    }
    return t;
  }

  // A point as one key in row-major order: i * kv_len + j (< 2^63: i < 2^32, kv_len < 2^31).
  uint64_t key(int64_t i, int64_t j) const { return static_cast<uint64_t>(i) * static_cast<uint64_t>(kv_len) + static_cast<uint64_t>(j); }

  uint64_t coo_point(const std::string& p, size_t k, int64_t i, int64_t j) const {
    if (i < q_offset || i >= q_offset + seq_len)
      fail(p + "[" + std::to_string(k) + "][0]", "expected " + rows_text() + ", got " + std::to_string(i));
    if (j < 0 || j >= kv_len)
      fail(p + "[" + std::to_string(k) + "][1]", "expected a column in [0, kv_len) = [0, " + std::to_string(kv_len) +
                                                     "), got " + std::to_string(j));
    return key(i, j);
  }

  uint64_t coo_element(const std::string& p, size_t k, const json& e) const {
    const std::string q = p + "[" + std::to_string(k) + "]";
    if (!e.is_array() || e.size() != 2) fail(q, "expected a pair [i, j], got " + show(e));
    int64_t i = integer(e[0], q + "[0]", q_offset, q_offset + seq_len - 1, rows_text());
    int64_t j = integer(e[1], q + "[1]", 0, kv_len - 1, "a column in [0, kv_len) = [0, " + std::to_string(kv_len) + ")");
    return key(i, j);
  }

  std::string rows_text() const {
    if (q_offset == 0) return "a row in [0, seq_len) = [0, " + std::to_string(seq_len) + ")";
    return "a row position in [q_offset, q_offset + seq_len) = [" + std::to_string(q_offset) + ", " +
           std::to_string(q_offset + seq_len) + ")";
  }

  // A coo array as a document built in memory has it, or packed by the JSON reader (json_reader.h).
  void coo(const json& a, const std::string& p, Term& t) {
    auto is_packed = [](const json& v) { return v.is_binary() && v.get_binary().subtype() == detail::kCooPairs; };
    const json* packed = is_packed(a) ? &a : nullptr;
    const json* bad = nullptr;
    if (!packed && a.is_array() && a.size() == 2 && is_packed(a[0])) {
      packed = &a[0];
      bad = &a[1];
    }
    if (!packed && (!a.is_array() || a.empty())) fail(p, "expected a non-empty array of [i, j] pairs, got " + show(a));
    const size_t n_packed = packed ? packed->get_binary().size() / 16 : 0;
    const size_t n = packed ? n_packed + (bad ? 1 : 0) : a.size();
    if (static_cast<int64_t>(n) > limits.max_points)
      fail(p, "expected at most " + std::to_string(limits.max_points) + " points");
    charge(static_cast<int64_t>(n * (sizeof(std::pair<int64_t, int64_t>) + 2 * sizeof(uint64_t))));
    // Checked, then sorted and made unique as one 64-bit key per point.
    std::vector<uint64_t> keys;
    keys.reserve(n);
    if (packed) {
      const uint8_t* b = packed->get_binary().data();
      for (size_t k = 0; k < n_packed; ++k) {
        int64_t ij[2];
        std::memcpy(ij, b + 16 * k, sizeof ij);
        keys.push_back(coo_point(p, k, ij[0], ij[1]));
      }
      if (bad) keys.push_back(coo_element(p, n_packed, *bad));
    } else {
      for (size_t k = 0; k < n; ++k) keys.push_back(coo_element(p, k, a[k]));
    }
    sort_keys(keys);
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    t.points.resize(keys.size());
    for (size_t k = 0; k < keys.size(); ++k)
      t.points[k] = {static_cast<int64_t>(keys[k] / static_cast<uint64_t>(kv_len)),
                     static_cast<int64_t>(keys[k] % static_cast<uint64_t>(kv_len))};
  }

  // "varlen": {"max_total_tokens": T, "lengths": [...]}: seq_len is the longest sequence; no kv_len
  // other than seq_len, no q_offset, no batch other than 1 (the sequences are the batch).
  Varlen varlen(const json& v, const json& doc, const Problem& pr) {
    check_fields(v, "varlen", {"max_total_tokens", "lengths"});
    if (doc.contains("kv_len") && pr.kv_len != pr.seq_len)
      fail("kv_len", "a packed variable-length batch attends within each sequence: kv_len must equal seq_len (" +
                         std::to_string(pr.seq_len) + ") or be left out, got " + std::to_string(pr.kv_len));
    if (pr.q_offset != 0) fail("q_offset", "not with \"varlen\": each sequence's queries are its keys");
    if (pr.batch != 1)
      fail("batch", "not with \"varlen\": the number of sequences is given at launch (cu_seqlens), got " +
                        std::to_string(pr.batch));
    Varlen out;
    out.max_total_tokens = field(v, "varlen", "max_total_tokens", 1, limits.max_len,
                                 "an integer in [1, " + std::to_string(limits.max_len) + "]");
    auto it = v.find("lengths");
    if (it == v.end()) return out;
    const std::string path = "varlen.lengths";
    if (!it->is_array() || it->empty() || it->size() > (size_t{1} << 20))
      fail(path, "expected a non-empty array of at most 1048576 sequence lengths, got " + show(*it));
    charge(static_cast<int64_t>(it->size() * sizeof(int64_t)));
    int64_t total = 0;
    for (size_t k = 0; k < it->size(); ++k) {
      const int64_t n = integer((*it)[k], path + "[" + std::to_string(k) + "]", 0, pr.seq_len,
                                "a length in [0, seq_len] = [0, " + std::to_string(pr.seq_len) + "]");
      total += n;
      if (total > out.max_total_tokens)
        fail(path, "the lengths add up to more than max_total_tokens (" + std::to_string(out.max_total_tokens) +
                       ") at [" + std::to_string(k) + "]");
      out.lengths.push_back(n);
    }
    return out;
  }

  // "head_patterns": [T, ...]: n terms, n dividing heads; head h has entry h / (heads / n). Entries
  // that are the same JSON value form one group; a single group is the plain "pattern".
  void head_patterns(const json& v, Problem& pr) {
    const std::string path = "head_patterns";
    if (!v.is_array() || v.empty()) fail(path, "expected a non-empty array of pattern terms, got " + show(v));
    const int64_t n = static_cast<int64_t>(v.size());
    if (n > pr.heads || pr.heads % n != 0)
      fail(path, "expected one term per head or per group of heads: a number of terms dividing heads (" +
                     std::to_string(pr.heads) + "), got " + std::to_string(n));
    std::vector<std::string> keys;  // each group's JSON text
    std::vector<int64_t> group_of(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) {
      const json& t = v[static_cast<size_t>(e)];
      std::string key = t.dump();
      const auto at = std::find(keys.begin(), keys.end(), key);
      if (at != keys.end()) {
        group_of[static_cast<size_t>(e)] = at - keys.begin();
        continue;
      }
      charge(static_cast<int64_t>(key.size()));
      if (static_cast<int64_t>(keys.size()) == kMaxHeadGroups)
        fail(path + "[" + std::to_string(e) + "]", "more than " + std::to_string(kMaxHeadGroups) +
                                                        " distinct patterns (each is analysed and compiled on its own)");
      group_of[static_cast<size_t>(e)] = static_cast<int64_t>(keys.size());
      keys.push_back(std::move(key));
      pr.head_groups.push_back({term(t, path + "[" + std::to_string(e) + "]", 1), {}});
    }
    const int64_t per = pr.heads / n;
    for (int64_t h = 0; h < pr.heads; ++h)
      pr.head_groups[static_cast<size_t>(group_of[static_cast<size_t>(h / per)])].heads.push_back(h);
    if (pr.head_groups.size() == 1) {  // the same pattern for every head
      pr.pattern = std::move(pr.head_groups.front().pattern);
      pr.head_groups.clear();
    }
  }

  Problem problem(const json& doc, const std::string& name_hint) {
    check_fields(doc, "", {"name", "seq_len", "kv_len", "head_dim", "heads", "batch", "dtype", "scale",
                           "causal", "pattern", "head_patterns", "kv_heads", "q_offset", "varlen"});
    Problem pr;
    pr.file = file;
    pr.limits = limits;
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
    pr.kv_heads = field(doc, "", "kv_heads", 1, pr.heads, "a divisor of heads (" + std::to_string(pr.heads) + ")",
                        &pr.heads);
    if (pr.heads % pr.kv_heads != 0)
      fail("kv_heads", "expected a divisor of heads (" + std::to_string(pr.heads) + "), got " +
                           std::to_string(pr.kv_heads));
    const int64_t zero = 0;
    pr.q_offset = field(doc, "", "q_offset", 0, limits.max_len, "an integer in [0, " + std::to_string(limits.max_len) + "]",
                        &zero);
    if (auto it = doc.find("dtype"); it != doc.end()) {
      const std::optional<DType> d = dtype_from_name(it->is_string() ? it->get<std::string>() : "");
      if (!d) fail("dtype", "expected one of \"fp32\", \"tf32\", \"fp16\", \"bf16\", got " + show(*it));
      pr.dtype = *d;
    }
    if (over.dtype) pr.dtype = *over.dtype;
    if (over.head_dim) {
      if (*over.head_dim < 1 || *over.head_dim > 65536)
        throw Error("", "--head-dim", "expected an integer in [1, 65536], got " + std::to_string(*over.head_dim));
      pr.head_dim = *over.head_dim;
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
    if (auto it = doc.find("varlen"); it != doc.end()) pr.varlen = varlen(*it, doc, pr);
    // Sizes first: a problem too large is refused before its pattern (coo lists, token lists) is read.
    const long double tokens = pr.varlen ? static_cast<long double>(pr.varlen->max_total_tokens) : 0.0L;
    const long double bytes =
        pr.varlen ? (2.0L * pr.heads + 2.0L * pr.kv_heads) * tokens * pr.head_dim * dtype_bytes(pr.dtype)
                  : static_cast<long double>(pr.batch) * (2.0L * pr.heads * pr.seq_len + 2.0L * pr.kv_heads * pr.kv_len) *
                        pr.head_dim * dtype_bytes(pr.dtype);
    if (bytes > static_cast<long double>(limits.max_tensor_bytes)) {
      std::ostringstream m;
      m.precision(3);
      m << "problem too large: Q, K, V and O need " << static_cast<double>(bytes / (1024.0L * 1024 * 1024)) << " GiB ("
        << (pr.varlen ? "(2*heads+2*kv_heads)*max_total_tokens" : "batch*(2*heads*seq_len+2*kv_heads*kv_len)")
        << "*head_dim*" << dtype_bytes(pr.dtype) << " bytes), more than the limit of "
        << static_cast<double>(limits.max_tensor_bytes) / (1024.0 * 1024 * 1024) << " GiB";
      fail(pr.varlen ? "varlen.max_total_tokens" : "seq_len", m.str());
    }
    seq_len = pr.seq_len;
    kv_len = pr.kv_len;
    q_offset = pr.q_offset;
    auto it = doc.find("pattern");
    const auto hp = doc.find("head_patterns");
    if (it != doc.end() && hp != doc.end())
      fail("head_patterns", "give either \"pattern\" (every head) or \"head_patterns\" (one per head), not both");
    if (hp != doc.end()) {
      head_patterns(*hp, pr);
      return pr;
    }
    if (it == doc.end()) fail("pattern", "missing (expected a pattern term, or \"head_patterns\")");
    pr.pattern = term(*it, "pattern", 1);
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

std::optional<DType> dtype_from_name(const std::string& s) {
  if (s == "fp32") return DType::FP32;
  if (s == "tf32") return DType::TF32;
  if (s == "fp16") return DType::FP16;
  if (s == "bf16") return DType::BF16;
  return std::nullopt;
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

int64_t default_max_memory() {
  static const int64_t budget = [] {
    int64_t m = INT64_MAX;
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) m = std::min<int64_t>(m, static_cast<int64_t>(pages) * page);
    for (int res : {RLIMIT_AS, RLIMIT_DATA}) {
      rlimit rl{};
      if (::getrlimit(res, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        m = std::min<int64_t>(m, static_cast<int64_t>(std::min<rlim_t>(rl.rlim_cur, INT64_MAX)));
    }
    std::ifstream cg("/sys/fs/cgroup/memory.max");
    long long v = 0;
    if (cg >> v && v > 0) m = std::min<int64_t>(m, v);  // "max" (no limit) does not read as a number
    if (m == INT64_MAX) m = int64_t{8} << 30;
    return m / 2;
  }();
  return budget;
}

std::string work_share_note(const Limits& l) {
  return l.work_shares <= 1 ? "" : " (one head group's share, 1/" + std::to_string(l.work_shares) + ")";
}

WorkMeter::WorkMeter(const Limits& l, std::string file, std::string what)
    : limit_(l.max_work), file_(std::move(file)), what_(std::move(what)), limit_text_("the work limit (--max-work)" + work_share_note(l)) {}

void WorkMeter::fail() const {
  const std::string at = row < 0 ? "" : " (stopped at row " + std::to_string(row) + " of " + std::to_string(rows) + ")";
  throw Error(file_, "", what_ + " needs more than " + std::to_string(limit_) + " steps" + at + ", " + limit_text_);
}

void throw_memory_limit(const std::string& file, const std::string& what, int64_t bytes, const Limits& l) {
  throw Error(file, "", what + " needs " + (bytes == INT64_MAX ? std::string() : "at least " + mib(bytes) + ", ") +
                            "more than the memory budget of " + mib(l.max_memory) + " (--max-memory)");
}

Problem parse_problem(const nlohmann::json& doc, const std::string& name_hint, const std::string& file,
                      const Limits& limits) {
  Parser p{file, limits};
  return p.problem(doc, name_hint);
}

Problem parse_problem_text(const std::string& text, const std::string& name_hint, const std::string& file,
                           const Limits& limits) {
  int64_t held = static_cast<int64_t>(text.size());
  const json doc = detail::read_json(text, file, limits, held);
  Parser p{file, limits, held};
  return p.problem(doc, name_hint);
}

namespace {

// A pipe, a device or standard input: what comes, within half the budget (the string may double).
std::string read_stream(std::istream& in, const std::string& label, const Limits& limits) {
  std::string text;
  std::vector<char> chunk(size_t{1} << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    if (static_cast<int64_t>(text.size() + chunk.size()) > limits.max_memory / 2)
      throw_memory_limit(label, "reading the file", INT64_MAX, limits);
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(label, "", "cannot read the file");
  return text;
}

std::string read_file(const std::string& path, const Limits& limits) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(path, "", "cannot read the file: no such file");
  if (fs::is_directory(st)) throw Error(path, "", "cannot read the file: it is a directory (expected a pattern JSON file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, "", "cannot read the file");
  if (!fs::is_regular_file(st)) return read_stream(in, path, limits);
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw Error(path, "", "cannot read the file: " + ec.message());
  if (size > static_cast<uintmax_t>(limits.max_memory))
    throw_memory_limit(path, "reading the file", static_cast<int64_t>(std::min<uintmax_t>(size, INT64_MAX)), limits);
  std::string text(static_cast<size_t>(size), '\0');
  in.read(text.data(), static_cast<std::streamsize>(size));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw Error(path, "", "cannot read the file");
  return text;
}

}  // namespace

Problem load_problem(const std::string& path, const Limits& limits, const ProblemOverrides& over) {
  // "-": standard input, named "stdin" unless the document has a name.
  const bool stdin_doc = path == "-";
  const std::string label = stdin_doc ? "<stdin>" : path;
  std::string text = stdin_doc ? read_stream(std::cin, label, limits) : read_file(path, limits);
  int64_t held = static_cast<int64_t>(text.size());
  const json doc = detail::read_json(text, label, limits, held);
  held -= static_cast<int64_t>(text.size());
  std::string().swap(text);  // the document holds everything from here on
  Parser p{label, limits, held, over};
  return p.problem(doc, stdin_doc ? "stdin" : std::filesystem::path(path).stem().string());
}

int64_t tensor_bytes(const Problem& p) {
  if (p.varlen) return (2 * p.heads + 2 * p.kv_heads) * p.varlen->max_total_tokens * p.head_dim * dtype_bytes(p.dtype);
  return p.batch * (2 * p.heads * p.seq_len + 2 * p.kv_heads * p.kv_len) * p.head_dim * dtype_bytes(p.dtype);
}

std::vector<int64_t> random_key_blocks(const Term& t, int64_t rb, int64_t nkb) {
  std::vector<int64_t> out;
  const int64_t r = std::min(t.per_row, nkb);
  if (r <= 0) return out;
  out.reserve(static_cast<size_t>(r));
  if (r == nkb) {  // every block: what the draws end with
    out.resize(static_cast<size_t>(r));
    std::iota(out.begin(), out.end(), int64_t{0});
    return out;
  }
  uint64_t state = t.seed ^ (static_cast<uint64_t>(rb) * 0xD1B54A32D192ED03ull);
  if (r <= 32) {
    while (static_cast<int64_t>(out.size()) < r) {
      int64_t k = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(nkb));
      if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
    }
  } else {
    std::unordered_set<int64_t> seen;
    seen.reserve(static_cast<size_t>(2 * r));
    while (static_cast<int64_t>(out.size()) < r) {
      int64_t k = static_cast<int64_t>(splitmix64(state) % static_cast<uint64_t>(nkb));
      if (seen.insert(k).second) out.push_back(k);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool kept(const Term& t, const Problem& p, int64_t i, int64_t j) {  // i: a position
  if (i < p.q_offset || i >= p.q_offset + p.seq_len || j < 0 || j >= p.kv_len) return false;
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
      const i128 d = static_cast<i128>(j) - (static_cast<i128>(t.slope) * i + t.offset);  // slope*i may pass 2^63
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
  if (!p.head_groups.empty()) throw std::logic_error("kept: a problem with per-head patterns needs a head");
  if (i < 0 || i >= p.seq_len) return false;
  const int64_t pos = i + p.q_offset;
  if (p.causal && j > pos) return false;
  return kept(p.pattern, p, pos, j);
}

bool kept(const Problem& p, int64_t h, int64_t i, int64_t j) {
  if (i < 0 || i >= p.seq_len) return false;
  const int64_t pos = i + p.q_offset;
  if (p.causal && j > pos) return false;
  return kept(head_pattern(p, h), p, pos, j);
}

Problem head_group(const Problem& p, size_t g) {
  if (g >= p.head_groups.size()) throw std::out_of_range("head_group: no head group " + std::to_string(g));
  Problem r = p;
  r.head_groups.clear();
  r.pattern = p.head_groups[g].pattern;
  r.group_heads = p.head_groups[g].heads;
  r.group_index = static_cast<int64_t>(g);
  r.group_count = static_cast<int64_t>(p.head_groups.size());
  r.name = p.name + ".h" + std::to_string(g);
  // The groups share the problem's work limit: analysing all of them stays within it.
  r.limits.work_shares = static_cast<int64_t>(p.head_groups.size());
  r.limits.max_work = std::max<int64_t>(1, p.limits.max_work / r.limits.work_shares);
  return r;
}

std::vector<Problem> head_group_problems(const Problem& p) {
  if (p.head_groups.empty()) return {p};
  std::vector<Problem> out;
  for (size_t g = 0; g < p.head_groups.size(); ++g) out.push_back(head_group(p, g));
  return out;
}

size_t head_group_of(const Problem& p, int64_t h) {
  if (h < 0 || h >= p.heads) throw std::out_of_range("no head " + std::to_string(h) + " of " + std::to_string(p.heads));
  for (size_t g = 0; g < p.head_groups.size(); ++g)
    if (std::binary_search(p.head_groups[g].heads.begin(), p.head_groups[g].heads.end(), h)) return g;
  return 0;
}

const Term& head_pattern(const Problem& p, int64_t h) {
  return p.head_groups.empty() ? p.pattern : p.head_groups[head_group_of(p, h)].pattern;
}

int64_t served_heads(const Problem& p) {
  return p.group_heads.empty() ? p.heads : static_cast<int64_t>(p.group_heads.size());
}

}  // namespace splat
