// JSON text -> document within the limits: a SAX handler builds the document itself, so that it
// can count nesting, number tokens and memory as it goes and pack `coo` pairs (json_reader.h).
// nlohmann's SAX interface gives no position except for syntax errors; a refused nesting level or
// integer is located afterwards by counting brackets or number tokens up to it in the text.
#include "libsplat/pattern/json_reader.h"

#include <cstring>
#include <vector>

namespace splat::detail {

namespace {

using json = nlohmann::json;

std::string location(const std::string& file, const std::string& text, size_t off) {
  off = std::min(off, text.size());
  int64_t line = 1, col = 1;
  for (size_t k = 0; k < off; ++k) {
    if (text[k] == '\n') {
      line += 1;
      col = 1;
    } else if ((static_cast<unsigned char>(text[k]) & 0xC0) != 0x80) {
      col += 1;  // columns count characters (UTF-8 continuation bytes do not start one)
    }
  }
  return (file.empty() ? std::string("<input>") : file) + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string abbreviated(const std::string& s, size_t keep = 24) {
  return s.size() <= keep ? s : s.substr(0, keep) + "... (" + std::to_string(s.size()) + " characters)";
}

// Offset of the n-th (1-based) opening bracket or number token outside strings; text.size() if none.
size_t nth_token(const std::string& t, bool number, int64_t n) {
  int64_t seen = 0;
  for (size_t k = 0; k < t.size(); ++k) {
    const char c = t[k];
    if (c == '"') {
      for (++k; k < t.size() && t[k] != '"'; ++k)
        if (t[k] == '\\') ++k;
      continue;
    }
    if (!number && (c == '[' || c == '{') && ++seen == n) return k;
    if (c == '-' || (c >= '0' && c <= '9')) {
      if (number && ++seen == n) return k;
      size_t e = k + 1;
      while (e < t.size() && t[e] != '\0' && std::strchr("+-.eE0123456789", t[e])) ++e;
      k = e - 1;
    }
  }
  return t.size();
}

// Approximate heap bytes of document parts (libstdc++, 64-bit): a JSON value is 16 bytes, vectors
// may hold twice their size, a std::map node holds the key string and the value.
constexpr int64_t kValueBytes = 32, kContainerBytes = 64, kMemberBytes = 96, kStringBytes = 64;

class Builder {
 public:
  enum class Stop { None, Deep, BigInt };

  Builder(const std::string& file, const Limits& limits, int64_t held)
      : file_(file), limits_(limits), used_(held) {}

  json root;
  Stop stop = Stop::None;
  int64_t opens = 0, numbers = 0;  // brackets and number tokens read so far (to locate a stop)
  std::string token;               // the integer literal that stopped the parse
  bool syntax_error = false;
  size_t error_pos = 0;
  std::string error_msg;

  bool null() { return scalar(json(nullptr)); }
  bool boolean(bool b) { return scalar(json(b)); }
  bool number_integer(int64_t v) {
    ++numbers;
    if (pair_value(true, v)) return true;
    return scalar(json(v));
  }
  bool number_unsigned(uint64_t v) {
    ++numbers;
    if (v <= static_cast<uint64_t>(INT64_MAX) && pair_value(true, static_cast<int64_t>(v))) return true;
    return scalar(json(v));
  }
  bool number_float(double v, const std::string& s) {
    ++numbers;
    if (s.find_first_of(".eE") == std::string::npos) {  // an integer literal beyond 64 bits
      stop = Stop::BigInt;
      token = s;
      return false;
    }
    return scalar(json(v));
  }
  bool string(std::string& s) {
    charge(kStringBytes + static_cast<int64_t>(s.size()));
    return scalar(json(std::move(s)));
  }
  bool binary(json::binary_t&) { return false; }  // JSON text has none
  bool start_object(size_t) { return open(json::value_t::object); }
  bool start_array(size_t) { return open(json::value_t::array); }
  bool key(std::string& k) {
    charge(kMemberBytes + static_cast<int64_t>(k.size()));
    coo_key_ = k == "coo";
    slot_ = &(*stack_.back())[k];
    return true;
  }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool parse_error(size_t pos, const std::string&, const nlohmann::detail::exception& ex) {
    syntax_error = true;
    error_pos = pos;
    error_msg = ex.what();
    return false;
  }

 private:
  enum class Elem { None, Pair, Scratch };  // what the coo array's current element is so far

  void charge(int64_t bytes) {
    used_ += bytes;
    if (scratch_open_) scratch_bytes_ += bytes;
    if (used_ > limits_.max_memory) throw_memory_limit(file_, "reading the JSON document", used_, limits_);
  }

  // Adds a finished value where the document is at (root, array element or object member).
  json* add(json&& v) {
    charge(kValueBytes);
    coo_key_ = false;
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    *slot_ = std::move(v);
    return slot_;
  }

  bool in_coo_array() const { return coo_ && stack_.size() == coo_level_; }

  // A number inside a pair being read packed: kept while it is the first or second int64.
  bool pair_value(bool is_int, int64_t v) {
    if (!in_coo_array() || elem_ != Elem::Pair || !is_int || pair_n_ >= 2) return false;
    pair_[pair_n_++] = v;
    return true;
  }

  // The packed pair so far becomes a JSON array (the element is not a plain pair after all).
  void unpack_pair() {
    scratch_ = json::array();
    scratch_open_ = true;
    scratch_bytes_ = 0;
    charge(kContainerBytes);
    for (int k = 0; k < pair_n_; ++k) {
      charge(kValueBytes);
      scratch_.push_back(pair_[k]);
    }
    stack_.push_back(&scratch_);
    elem_ = Elem::Scratch;
  }

  // The coo array's current element is complete and is not a pair: the first one is kept.
  void bad_element(json&& e) {
    if (!has_bad_) {
      bad_ = std::move(e);
      has_bad_ = true;
    } else {
      used_ -= scratch_bytes_;
    }
    scratch_open_ = false;
    scratch_bytes_ = 0;
    elem_ = Elem::None;
  }

  bool scalar(json&& v) {
    if (in_coo_array()) {
      if (elem_ == Elem::Pair) unpack_pair();
      else if (elem_ == Elem::None) return bad_element(std::move(v)), true;
    }
    add(std::move(v));
    return true;
  }

  bool open(json::value_t kind) {
    ++opens;
    if (++depth_ > limits_.max_depth) {
      stop = Stop::Deep;
      return false;
    }
    if (in_coo_array()) {
      if (elem_ == Elem::None && kind == json::value_t::array) {
        elem_ = Elem::Pair;
        pair_n_ = 0;
        return true;
      }
      if (elem_ == Elem::Pair) {
        unpack_pair();
      } else if (elem_ == Elem::None) {
        scratch_ = json(kind);
        scratch_open_ = true;
        scratch_bytes_ = 0;
        charge(kContainerBytes);
        stack_.push_back(&scratch_);
        elem_ = Elem::Scratch;
        return true;
      }
    }
    const bool starts_coo = !coo_ && coo_key_ && kind == json::value_t::array;
    charge(kContainerBytes);
    stack_.push_back(add(json(kind)));
    if (starts_coo) {
      coo_ = true;
      coo_level_ = stack_.size();
      bytes_.clear();
      has_bad_ = false;
      elem_ = Elem::None;
    }
    return true;
  }

  bool close() {
    --depth_;
    if (in_coo_array()) {
      if (elem_ == Elem::Pair) {  // a pair ends
        if (pair_n_ == 2) {
          if (!has_bad_) {
            charge(16);
            const uint8_t* p = reinterpret_cast<const uint8_t*>(pair_);
            bytes_.insert(bytes_.end(), p, p + sizeof pair_);
          }
          elem_ = Elem::None;
        } else {
          unpack_pair();
          stack_.pop_back();
          bad_element(std::move(scratch_));
        }
        return true;
      }
      finish_coo();  // the coo array itself ends
    }
    stack_.pop_back();
    if (coo_ && elem_ == Elem::Scratch && stack_.size() == coo_level_) bad_element(std::move(scratch_));
    return true;
  }

  void finish_coo() {
    coo_ = false;
    if (bytes_.empty() && !has_bad_) return;  // [] stays an empty array
    json packed = json::binary(std::move(bytes_), kCooPairs);
    bytes_ = {};
    *stack_.back() = has_bad_ ? json::array({std::move(packed), std::move(bad_)}) : std::move(packed);
  }

  const std::string& file_;
  const Limits& limits_;
  int64_t used_;
  std::vector<json*> stack_;
  json* slot_ = nullptr;
  int depth_ = 0;
  bool coo_key_ = false;
  // The coo array being read (never nested: a coo inside a coo element is read as plain JSON).
  bool coo_ = false;
  size_t coo_level_ = 0;
  std::vector<uint8_t> bytes_;
  Elem elem_ = Elem::None;
  int64_t pair_[2] = {0, 0};
  int pair_n_ = 0;
  json scratch_, bad_;
  bool has_bad_ = false, scratch_open_ = false;
  int64_t scratch_bytes_ = 0;
};

std::string syntax_message(std::string what) {
  // Drop nlohmann's "[json.exception.parse_error.101] parse error at line 1, column 2: " prefix.
  if (auto c = what.find("syntax error"); c != std::string::npos) what = what.substr(c);
  else if (auto c2 = what.find("] "); c2 != std::string::npos) what = what.substr(c2 + 2);
  if (what.size() > 200) what = what.substr(0, 200) + "...";
  return what;
}

}  // namespace

std::string printable(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  auto esc = [&](unsigned char c) {
    out += "\\x";
    out += hex[c >> 4];
    out += hex[c & 15];
  };
  for (size_t k = 0; k < s.size();) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7F) esc(c);
      else out += static_cast<char>(c);
      ++k;
      continue;
    }
    // Length and smallest code point of a sequence led by c (overlong forms are invalid).
    const int n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c <= 0xEF ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    bool ok = n > 0 && k + static_cast<size_t>(n) <= s.size();
    uint32_t cp = n == 2 ? c & 0x1F : n == 3 ? c & 0x0F : c & 0x07;
    for (int m = 1; ok && m < n; ++m) {
      const auto d = static_cast<unsigned char>(s[k + static_cast<size_t>(m)]);
      ok = (d & 0xC0) == 0x80;
      cp = cp << 6 | (d & 0x3F);
    }
    ok = ok && !(n == 3 && cp < 0x800) && !(n == 4 && (cp < 0x10000 || cp > 0x10FFFF)) &&
         !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      esc(c);
      ++k;
      continue;
    }
    out.append(s.substr(k, static_cast<size_t>(n)));
    k += static_cast<size_t>(n);
  }
  return out;
}

json read_json(const std::string& text, const std::string& file, const Limits& limits, int64_t held) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(file.empty() ? "<input>" : file, "", text.empty() ? "the file is empty (expected a JSON object)"
                                                                  : "the file holds only white space (expected a JSON object)");
  Builder b(file, limits, held);
  const bool ok = json::sax_parse(text, &b);
  // The parser takes a NUL byte for the end of the input; JSON text holds none, not even in
  // strings. One the parse reached is the first error.
  if (const size_t z = text.find('\0'); z != std::string::npos && (ok || (b.syntax_error && b.error_pos >= z + 1)))
    throw Error(location(file, text, z), "", "invalid JSON: NUL byte (\\x00); JSON text holds no control characters");
  if (ok) return std::move(b.root);
  if (b.stop == Builder::Stop::Deep)
    throw Error(location(file, text, nth_token(text, false, b.opens)), "",
                "JSON nesting deeper than " + std::to_string(limits.max_depth) + " levels (arrays and objects)");
  if (b.stop == Builder::Stop::BigInt)
    throw Error(location(file, text, nth_token(text, true, b.numbers)), "",
                "integer " + abbreviated(b.token) + " does not fit in 64 bits");
  // nlohmann reports the byte offset just past the offending token: point at its last character.
  const size_t off = b.error_pos == 0 ? 0 : b.error_pos - 1;
  throw Error(location(file, text, off), "", "invalid JSON: " + syntax_message(b.error_msg));
}

}  // namespace splat::detail
