#include "libtensorright/check/error.h"

#include <algorithm>

namespace tr {

namespace {
std::string default_rendering(const std::string& message, const SourceLoc& loc) {
  if (loc.file.empty() && loc.line == 0) return message;
  if (loc.line == 0) return loc.file + ": error: " + message;
  return loc.str() + ": error: " + message;
}
}  // namespace

Error::Error(std::string message, SourceLoc loc, std::string rendered)
    : std::runtime_error(rendered.empty() ? default_rendering(message, loc) : rendered),
      message_(std::move(message)),
      loc_(std::move(loc)),
      rendered_(what()) {}

std::string render_diagnostic(const SourceLoc& loc, const std::string& message,
                              const std::string& source, const char* severity) {
  if (loc.line <= 0) return (loc.file.empty() ? "" : loc.file + ": ") + severity + ": " + message;
  std::string out = loc.str() + ": " + severity + ": " + message;
  // Find the line (1-based).
  size_t start = 0;
  for (int l = 1; l < loc.line; ++l) {
    size_t nl = source.find('\n', start);
    if (nl == std::string::npos) return out;
    start = nl + 1;
  }
  size_t end = source.find('\n', start);
  if (end == std::string::npos) end = source.size();
  std::string line = source.substr(start, end - start);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  out += "\n" + line + "\n";
  // The caret line copies tabs so the caret lines up under any tab width.
  int col = std::max(1, loc.col);
  for (int c = 1; c < col; ++c) {
    size_t idx = static_cast<size_t>(c - 1);
    out += (idx < line.size() && line[idx] == '\t') ? '\t' : ' ';
  }
  out += '^';
  return out;
}

}  // namespace tr
