#pragma once
// The column ACSR: the pattern seen from the keys. Row j of the result holds the query rows i that
// keep key j (ascending), as an ACSR over kv_len rows and seq_len columns: what a backward pass walks
// for dK and dV (the kept rows of each key tile), compressed by the same analysis as the rows
// (windows, dilated windows and strides stay affine: a window's columns are a window again).
#include <string>

#include "libsplat/analysis/acsr.h"
#include "libsplat/analysis/analysis.h"
#include "libsplat/pattern/pattern.h"

namespace splat {

// Transposes an ACSR by counting and bucketing its kept pairs (two passes over the rows; 4 bytes a
// kept pair and 8 a key of memory, checked against limits.max_memory / 2 first, and one work step a
// pair against limits.max_work), then groups the columns with analyze_rows. Throws Error (file in
// the message) past a limit.
Acsr column_acsr(const Acsr& rows, const Limits& limits, const std::string& file = "", const AnalyzeOptions& = {});

}  // namespace splat
