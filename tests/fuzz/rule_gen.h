#pragma once
// A generator of small trverify rules driven by fuzz input (used by fuzz_verify.cpp).
//
// The rule has a fixed set of declarations (rclasses R and S; sizes, attribute maps and
// summation-index maps; numeric and bool tensors of both ranks; scalars) and a dtype of int, real,
// num, bool or any. Its left side is a random expression over a small grammar: tensors, scalars and
// literals; elementwise arithmetic, comparisons and logic; abs, exp, max, min, select, clamp;
// reverse, slice, pad, dynslice, const, broadcast; sum, dot and reduce_max over S. The right side
// is the left side after one to three rewrites at random places, sound ones (commuting,
// re-associating, distributing, identities, max as a select, De Morgan, ...) and unsound ones
// (another operator, another leaf, a subterm dropped), so that both proved rules and
// counterexamples come out. Summation indices are renamed on the right side and matched where both
// sides still use them. Preconditions and an assumption are added sometimes. Most rules check; the
// rest are refused by the checker, which is fine.
#include <fuzzer/FuzzedDataProvider.h>

#include <string>

namespace fuzz {

std::string generate_rule(FuzzedDataProvider& in);

}  // namespace fuzz
