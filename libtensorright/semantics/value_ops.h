#pragma once
// Element arithmetic of the concrete evaluator (internal to the semantics stage; exposed for tests
// and for the encoder's cross-checks). Every function propagates Value::inexact.
#include <optional>

#include "libtensorright/semantics/semantics.h"

namespace tr::vops {

Rational to_rat(const Value& v);  // Int or Real
Value add(const Value& a, const Value& b);
Value sub(const Value& a, const Value& b);
Value mul(const Value& a, const Value& b);
Value div(const Value& a, const Value& b);
Value rem(const Value& a, const Value& b);
Value neg(const Value& a);
Value abs(const Value& a);
Value exp(const Value& a);
Value max(const Value& a, const Value& b);
Value min(const Value& a, const Value& b);
// -1/0/1 over -inf < finite < +inf (false < true for bools); nullopt if either is Unknown.
std::optional<int> compare(const Value& a, const Value& b);

}  // namespace tr::vops
