#pragma once
// The outcome of one metered solver call (verify.cpp's check): cvc5's own Result, or an unsat that
// a forked copy of the process found (machine types: verify.cpp, try_in_copy), which is not solved
// again in the process since nothing is read from an unsat call. The accessors are cvc5::Result's.
#include <cvc5/cvc5.h>

namespace tr {

class Answer {
 public:
  Answer() = default;
  explicit Answer(const cvc5::Result& r) : result_(r), unsat_(r.isUnsat()) {}
  static Answer unsat_in_copy() {
    Answer a;
    a.unsat_ = true;
    a.from_copy_ = true;
    return a;
  }
  bool isSat() const { return !from_copy_ && result_.isSat(); }
  bool isUnsat() const { return unsat_; }
  bool isUnknown() const { return !from_copy_ && result_.isUnknown(); }
  cvc5::UnknownExplanation getUnknownExplanation() const { return result_.getUnknownExplanation(); }

 private:
  cvc5::Result result_;
  bool unsat_ = false;
  bool from_copy_ = false;
};

}  // namespace tr
