#pragma once
// Loading a batch of rule files, as `trverify PATH...` does: files named directly, and *.tr files
// found recursively (sorted) under directories. A file that does not exist, parse or type-check, a
// file without rules (empty, or comments only), and a directory holding no *.tr file, are recorded
// as failures with their rendered diagnostics; the rest of the batch still loads. Every message is
// valid UTF-8 (paths pass through escape_text). The path "-" reads one rule file from standard input.
#include <cstddef>
#include <exception>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <pthread.h>

#include "libtensorright/check/check.h"
#include "libtensorright/check/ir.h"

namespace tr {

struct LoadFailure {
  std::string file;     // as shown (escape_text of the path)
  std::string message;  // the rendered diagnostic (FILE:LINE:COL: error: ... with source and caret)
};

struct LoadedBatch {
  std::vector<std::string> files;                  // every file that was read, in order
  std::vector<std::pair<std::string, Rule>> rules; // (file as shown, rule) in file order
  std::vector<LoadFailure> failed;
  std::vector<std::pair<std::string, SkippedRule>> skipped;  // (file as shown, rule) under CheckOptions::machine
};

// The file name of the rules read from standard input (the path "-").
inline const std::string kStdinName = "<stdin>";

// rule_filter: when not empty, only rules of that name are kept. The files are parsed and checked
// on a StackThread (below).
LoadedBatch load_rule_paths(const std::vector<std::string>& paths, const std::string& rule_filter = "",
                            const CheckOptions& opts = {});

// A thread with a stack of its own size. The parser, the checker and the later stages recurse
// over expressions whose depth the language bounds (syntax::kMaxNesting); they run on these
// threads, so that the bound holds with a wide margin whatever `ulimit -s` gives the main thread
// (8 MiB is enough for the bound, 1 MiB is not). When the system refuses a stack that big (an
// address-space limit), the thread gets the default stack. An exception that escapes fn is
// rethrown by join().
class StackThread {
 public:
  static constexpr size_t kStackBytes = size_t{64} << 20;
  explicit StackThread(std::function<void()> fn, size_t stack_bytes = kStackBytes);
  ~StackThread();  // joins if join() was not called (an exception is then dropped)
  void join();
  StackThread(const StackThread&) = delete;
  StackThread& operator=(const StackThread&) = delete;

 private:
  static void* trampoline(void* self);
  std::function<void()> fn_;
  std::exception_ptr error_;
  pthread_t thread_{};
  bool running_ = false;
};

// Runs fn on a StackThread and waits for it.
void run_with_stack(const std::function<void()>& fn);

}  // namespace tr
