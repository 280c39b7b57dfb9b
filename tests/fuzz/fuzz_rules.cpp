// Target 1: the rule-file front end (parser + checker) on arbitrary bytes.
//
// Any input may be refused with a tr::Error (a located user error); nothing else may happen: no
// crash, sanitizer report, hang, leak, internal error or other exception. For input that parses,
// also checked: printing is a fixpoint (print -> parse -> print gives the same text), the printed
// text parses and checks exactly as the original does, to the same checked IR (dump_rule).
// Like trverify, the front end runs on a StackThread (its recursion depth is bounded by the
// language, libtensorright/syntax/syntax.h kMaxNesting, with the tool's stack).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "libtensorright/base/internal_error.h"
#include "libtensorright/check/batch.h"
#include "libtensorright/check/check.h"
#include "libtensorright/check/error.h"
#include "libtensorright/syntax/syntax.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// Checks a parsed file; nullopt when the checker refuses it with a user error.
std::optional<tr::LoadedFile> check_or_refuse(const tr::syntax::File& f) {
  try {
    return tr::check_file(f);
  } catch (const tr::Error&) {
    return std::nullopt;
  }
}

void one_input(const std::string& text) {
  tr::syntax::File f1;
  try {
    f1 = tr::syntax::parse(text, "fuzz.tr");
  } catch (const tr::Error&) {
    return;  // a parse error: fine
  }
  const std::string t1 = tr::syntax::print_file(f1);
  tr::syntax::File f2;
  try {
    f2 = tr::syntax::parse(t1, "printed.tr");
  } catch (const tr::Error& e) {
    fuzz::finding("the printed text of a parsed file does not parse:\n" + std::string(e.what()) +
                  "\n--- printed ---\n" + t1);
  }
  const std::string t2 = tr::syntax::print_file(f2);
  if (t2 != t1) fuzz::finding("print/parse is not a fixpoint:\n--- first ---\n" + t1 + "\n--- second ---\n" + t2);
  auto l1 = check_or_refuse(f1);
  auto l2 = check_or_refuse(f2);
  if (l1.has_value() != l2.has_value())
    fuzz::finding(std::string("the original ") + (l1 ? "checks" : "does not check") + " but its printed text " +
                  (l2 ? "does" : "does not") + "\n--- printed ---\n" + t1);
  if (!l1) return;
  if (l1->rules.size() != l2->rules.size()) fuzz::finding("the printed text checks to a different number of rules");
  for (size_t i = 0; i < l1->rules.size(); ++i)
    if (tr::dump_rule(l1->rules[i]) != tr::dump_rule(l2->rules[i]))
      fuzz::finding("the printed text checks to a different IR for rule " + l1->rules[i].name + "\n--- printed ---\n" + t1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tr::StackThread t([&] {
    try {
      one_input(text);
    } catch (...) {
      fuzz::finding("the front end threw something other than tr::Error: " + fuzz::current_exception_text());
    }
  });
  t.join();
  return 0;
}
