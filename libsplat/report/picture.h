#pragma once
// `splatc show`: a picture of the mask (docs/splatc-patterns.md, "show").
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "libsplat/analysis/analysis.h"

namespace splat {

struct PictureOptions {
  int max_cells = 512;  // cells per side at most: larger masks are downsampled (f x f tokens a cell)
  // The part drawn: query rows [first, second) and key positions [first, second); all when unset.
  std::optional<std::pair<int64_t, int64_t>> rows, cols;
};

// Writes the picture of the mask, .svg or .png chosen by the extension (anything else, or a zoom
// outside the mask, is a splat::Error), through a temporary file renamed into place. Each cell is
// shaded by its density in the colour of what keeps most of its positions: the global tokens'
// rows and columns (the pattern's `global` terms, outside intersections), else the ACSR's affine
// run families, contiguous (stride 1) or strided, or its per-row tables; a legend names the
// colours present.
void write_picture(const Problem&, const Acsr&, const AnalysisStats&, const std::string& path,
                   const PictureOptions& options = {});

// The PNG encoder of write_picture: 8-bit RGB, rows top to bottom, one zlib stream (best
// compression). Exposed for tests.
std::string encode_png(int width, int height, const std::string& rgb);

}  // namespace splat
