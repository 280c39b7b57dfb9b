#pragma once
// Reading a problem file's JSON text within the Limits (internal to libsplat/pattern): nesting
// deeper than Limits::max_depth and integer literals outside 64 bits are refused with FILE:LINE:COL,
// the document's memory is counted against Limits::max_memory while it is built, and the [i, j]
// pairs of a `coo` array are stored packed (16 bytes a pair instead of a JSON array each).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "libsplat/pattern/pattern.h"

namespace splat::detail {

// A `coo` array of integer pairs as read_json stores it: a binary value with this subtype holding
// the pairs as native int64 (i, j), or, when some element is not a pair of int64 integers, an
// array [that binary (the pairs before it), the first such element]. JSON text cannot produce a
// binary value, so documents built in memory are never mistaken for one.
inline constexpr uint64_t kCooPairs = 0x636f6f;  // "coo"

// Parses `text` (the contents of `file`, or "<input>" when file is empty) into a document. Every
// error is an Error located as FILE:LINE:COL (syntax, nesting, numbers) or FILE (memory).
// `held` bytes (the text itself) count against the memory budget too.
nlohmann::json read_json(const std::string& text, const std::string& file, const Limits&, int64_t held);

// `s` with bytes that are not printable UTF-8 written as \xNN (so messages stay valid UTF-8).
std::string printable(std::string_view s);

}  // namespace splat::detail
