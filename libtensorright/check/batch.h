#pragma once
// Loading a batch of rule files, as `trverify PATH...` does: files named directly, and *.tr files
// found recursively (sorted) under directories. A file that does not exist, parse or type-check, and
// a directory holding no *.tr file, are recorded as failures with their rendered diagnostics; the
// rest of the batch still loads. The path "-" reads one rule file from standard input.
#include <string>
#include <utility>
#include <vector>

#include "libtensorright/check/ir.h"

namespace tr {

struct LoadFailure {
  std::string file;
  std::string message;  // the rendered diagnostic (FILE:LINE:COL: error: ... with source and caret)
};

struct LoadedBatch {
  std::vector<std::string> files;                  // every file that was read, in order
  std::vector<std::pair<std::string, Rule>> rules; // (file, rule) in file order
  std::vector<LoadFailure> failed;
};

// The file name of the rules read from standard input (the path "-").
inline const std::string kStdinName = "<stdin>";

// rule_filter: when not empty, only rules of that name are kept.
LoadedBatch load_rule_paths(const std::vector<std::string>& paths, const std::string& rule_filter = "");

}  // namespace tr
