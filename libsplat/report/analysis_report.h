#pragma once
// Output of `splatc analyze` (formats in docs/splatc-patterns.md); `splatc show`: picture.h.
#include <nlohmann/json_fwd.hpp>

#include <string>

#include "libsplat/analysis/analysis.h"

namespace splat {

// Human report: sizes, nnz, density, runs per row, segments (with their formulas, the first
// max_segments of them), metadata bytes per format, block density.
std::string analysis_text(const Problem&, const Acsr&, const AnalysisStats&, int max_segments = 12);
// One object: seq_len, kv_len, nnz, density, metadata_bytes{acsr,csr,bsr64,bsr128,blockmask128}, ...
nlohmann::json analysis_json(const Problem&, const Acsr&, const AnalysisStats&);

// The column ACSR (analysis/columns.h; `analyze --columns`): its segments and bytes, and the first
// max_segments segments with their formulas in the key j.
std::string columns_text(const Acsr& columns, int max_segments = 6);
// {segments, affine, tabulated, tabulated_keys, max_column_nnz, metadata_bytes}.
nlohmann::json columns_json(const Acsr& columns);

// Writes every kept position as a line "i j", row-major, through a temporary file renamed into
// place (nothing half-written on error). Throws std::runtime_error on I/O failure.
void write_coo(const Acsr&, const std::string& path);

}  // namespace splat
