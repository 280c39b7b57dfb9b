#include "libtensorright/check/error.h"

#include <algorithm>
#include <cstdio>

namespace tr {

namespace {
std::string default_rendering(const std::string& message, const SourceLoc& loc) {
  if (loc.file.empty() && loc.line == 0) return escape_text(message);
  if (loc.line == 0) return escape_text(loc.file) + ": error: " + escape_text(message);
  return escape_text(loc.str()) + ": error: " + escape_text(message);
}

std::string hex_byte(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

bool is_control(unsigned char c) { return (c < 0x20 && c != '\t' && c != '\n') || c == 0x7f; }

// The unit of text at line[i]: a whole UTF-8 sequence, or one byte that is not part of one.
size_t unit_length(std::string_view line, size_t i) {
  size_t n = utf8_sequence_length(line, i);
  return n == 0 ? 1 : n;
}

// The source line of a diagnostic and its caret line: a window of at most kDiagnosticWindow bytes
// around the column (cut at character boundaries, "..." marking a cut), escaped like escape_text.
// The caret line copies tabs and pads every other character with one space per column it takes
// on screen (an escaped byte "\xNN" takes four), so the caret lines up under the column.
std::pair<std::string, std::string> echo_line(std::string_view line, size_t col0) {
  size_t from = 0, to = line.size();
  if (line.size() > kDiagnosticWindow) {
    from = col0 > kDiagnosticWindow / 2 ? col0 - kDiagnosticWindow / 2 : 0;
    to = std::min(line.size(), from + kDiagnosticWindow);
    while (from > 0 && (static_cast<unsigned char>(line[from]) & 0xC0) == 0x80) --from;
    while (to < line.size() && (static_cast<unsigned char>(line[to]) & 0xC0) == 0x80) ++to;
  }
  std::string text = from > 0 ? "..." : "", caret = from > 0 ? "   " : "";
  for (size_t i = from; i < to;) {
    size_t n = std::min(unit_length(line, i), to - i);
    unsigned char c = static_cast<unsigned char>(line[i]);
    std::string shown = (n == 1 && (c >= 0x80 || is_control(c))) ? hex_byte(c) : std::string(line.substr(i, n));
    text += shown;
    if (i < col0) caret += c == '\t' ? std::string("\t") : std::string(n > 1 ? 1 : shown.size(), ' ');
    i += n;
  }
  if (to < line.size()) text += "...";
  return {text, caret + "^"};
}
}  // namespace

Error::Error(std::string message, SourceLoc loc, std::string rendered)
    : std::runtime_error(rendered.empty() ? default_rendering(message, loc) : escape_text(rendered)),
      message_(std::move(message)),
      loc_(std::move(loc)),
      rendered_(what()) {}

size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto at = [&](size_t k) -> unsigned { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return at(k) >= lo && at(k) <= hi; };
  const unsigned c = at(0);
  if (i >= s.size()) return 0;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c == 0xE0) return cont(1, 0xA0) && cont(2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(1) && cont(2) ? 3 : 0;
  if (c == 0xED) return cont(1, 0x80, 0x9F) && cont(2) ? 3 : 0;  // not a surrogate
  if (c == 0xF0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c == 0xF4) return cont(1, 0x80, 0x8F) && cont(2) && cont(3) ? 4 : 0;  // up to U+10FFFF
  return 0;
}

std::string escape_text(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8_sequence_length(text, i);
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (n == 0 || (n == 1 && is_control(c))) {
      out += hex_byte(c);
      ++i;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string render_diagnostic(const SourceLoc& loc, const std::string& message,
                              const std::string& source, const char* severity) {
  if (loc.line <= 0)
    return (loc.file.empty() ? "" : escape_text(loc.file) + ": ") + severity + ": " + escape_text(message);
  std::string out = escape_text(loc.str()) + ": " + severity + ": " + escape_text(message);
  // Find the line (1-based).
  size_t start = 0;
  for (int l = 1; l < loc.line; ++l) {
    size_t nl = source.find('\n', start);
    if (nl == std::string::npos) return out;
    start = nl + 1;
  }
  size_t end = source.find('\n', start);
  if (end == std::string::npos) end = source.size();
  std::string_view line(source.data() + start, end - start);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  auto [text, caret] = echo_line(line, static_cast<size_t>(std::max(1, loc.col) - 1));
  return out + "\n" + text + "\n" + caret;
}

}  // namespace tr
