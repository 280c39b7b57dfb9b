#pragma once
// The one exception type for a broken invariant of libtensorright: a stage met an input that an
// earlier stage guarantees never to produce (an IR the checker should have rejected, an encoding
// that the evaluator contradicts). It is never turned into a verdict: the app reports it with the
// rule and its location and exits 3. User errors are tr::Error (a located diagnostic, exit 2);
// language limits are enc::Unsupported (the verdict `unsupported`).
#include <stdexcept>
#include <string>

namespace tr {

struct InternalError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace tr
