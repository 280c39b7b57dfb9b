#pragma once
// The one exception type of libtensorright for user-facing errors (bad rule files, unsupported
// input). It carries the location, the bare message and the fully rendered diagnostic
// ("FILE:LINE:COL: error: MESSAGE", the source line, a caret line), so that the app can print
// it once, at the edge, without knowing where it came from.
#include <stdexcept>
#include <string>

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
// available only the first line is produced.
std::string render_diagnostic(const SourceLoc& loc, const std::string& message,
                              const std::string& source, const char* severity = "error");

}  // namespace tr
