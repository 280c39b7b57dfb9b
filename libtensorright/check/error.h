#pragma once
// The one exception type of libtensorright for user-facing errors (bad rule files, unsupported
// input). It carries the location, the bare message and the fully rendered diagnostic
// ("FILE:LINE:COL: error: MESSAGE", the source line, a caret line), so that the app can print
// it once, at the edge, without knowing where it came from.
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include "libtensorright/check/ir.h"

namespace tr {

class Error : public std::runtime_error {
 public:
  // `rendered` is what what() returns; when empty, "LOC: error: MESSAGE" (or just the message when
  // the location has no file) is used.
  Error(std::string message, SourceLoc loc = {}, std::string rendered = {});

  const std::string& message() const { return message_; }
  const SourceLoc& loc() const { return loc_; }
  const std::string& rendered() const { return rendered_; }

 private:
  std::string message_;
  SourceLoc loc_;
  std::string rendered_;
};

// Renders a diagnostic in the project's format:
//   FILE:LINE:COL: error: MESSAGE
//   <the source line>
//   <spaces>^
// `source` is the whole text of the file the location points into; when the line is not
// available only the first line is produced. COL counts bytes. A line longer than
// kDiagnosticWindow bytes is shown as a window around the column with "..." at the cut ends. The
// result is always valid UTF-8 without NUL: the file name, the message and the source line pass
// through escape_text, and the caret stays under the column.
std::string render_diagnostic(const SourceLoc& loc, const std::string& message,
                              const std::string& source, const char* severity = "error");

constexpr size_t kDiagnosticWindow = 160;

// The length of the UTF-8 sequence that starts at s[i] (1 for ASCII, 2..4 otherwise), or 0 when
// the bytes there are not UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF, no truncated sequence).
size_t utf8_sequence_length(std::string_view s, size_t i);

// `text` made safe to print and to put into JSON/XML: valid UTF-8 is kept, every byte that is not
// part of a UTF-8 sequence and every control character but tab and line feed becomes "\xNN".
std::string escape_text(std::string_view text);

}  // namespace tr
