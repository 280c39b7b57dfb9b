#pragma once
// Output of `splatc analyze` and `splatc show` (formats in docs/splatc-patterns.md).
#include <nlohmann/json_fwd.hpp>

#include <string>

#include "libsplat/analysis/analysis.h"

namespace splat {

// Human report: sizes, nnz, density, runs per row, segments (with their formulas, the first
// max_segments of them), metadata bytes per format, block density.
std::string analysis_text(const Problem&, const Acsr&, const AnalysisStats&, int max_segments = 12);
// One object: seq_len, kv_len, nnz, density, metadata_bytes{acsr,csr,bsr64,bsr128,blockmask128}, ...
nlohmann::json analysis_json(const Problem&, const Acsr&, const AnalysisStats&);

// Writes every kept position as a line "i j", row-major, through a temporary file renamed into
// place (nothing half-written on error). Throws std::runtime_error on I/O failure.
void write_coo(const Acsr&, const std::string& path);

// Writes a picture of the mask: .svg or .png chosen by the extension (anything else is a
// splat::Error). Large masks are downsampled (one pixel = f x f tokens, shaded by density).
void write_picture(const Problem&, const Acsr&, const AnalysisStats&, const std::string& path, int max_cells = 512);

// The PNG encoder used by write_picture: 8-bit RGB, rows top to bottom, stored (uncompressed)
// deflate blocks. Exposed for tests.
std::string encode_png(int width, int height, const std::string& rgb);

}  // namespace splat
