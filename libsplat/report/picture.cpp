// `splatc show`: the mask as SVG (written directly) or PNG (a 5x7 bitmap font, zlib), each cell
// shaded by density in the colour of what keeps most of its positions, with a legend and ticks.
#include "libsplat/report/picture.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <set>
#include <stdexcept>
#include <vector>

#include "libsplat/report/atomic_file.h"

namespace splat {

namespace {

// What keeps a position: the global tokens' rows and columns, else an affine run family of the
// row's segment, contiguous (stride 1: windows, blocks) or strided (lattices, dilations), or a
// tabulated segment's runs (random blocks, coo, ...).
enum Category { kGlobal, kContiguous, kStrided, kTables, kCategories };
constexpr const char* kCategoryName[kCategories] = {"global tokens' rows and columns", "contiguous runs",
                                                    "strided runs", "per-row tables"};
// Global tokens beyond this many are drawn as their run families (the per-run token search stays cheap).
constexpr size_t kMaxGlobalTokens = 4096;

// The tokens of the pattern's `global` terms that are not inside an intersection (there a token's
// row or column is not kept whole), sorted and unique; empty past kMaxGlobalTokens.
void collect_tokens(const Term& t, std::set<int64_t>& out) {
  if (t.kind == TermKind::Global) out.insert(t.tokens.begin(), t.tokens.end());
  if (t.kind == TermKind::Union)
    for (const Term& c : t.children) collect_tokens(c, out);
}
std::vector<int64_t> global_tokens(const Problem& p) {
  std::set<int64_t> s;
  collect_tokens(p.pattern, s);
  if (s.size() > kMaxGlobalTokens) return {};
  return {s.begin(), s.end()};
}

// The part drawn: rows [r0, r1), key positions [c0, c1).
struct View {
  int64_t r0, r1, c0, c1;
  int64_t rows() const { return r1 - r0; }
  int64_t cols() const { return c1 - c0; }
};

View view_of(const Problem& p, const PictureOptions& o) {
  View v{0, p.seq_len, 0, p.kv_len};
  const auto take = [&](const std::optional<std::pair<int64_t, int64_t>>& r, int64_t n, int64_t& lo, int64_t& hi,
                        const char* flag) {
    if (!r) return;
    if (r->first < 0 || r->second > n || r->first >= r->second)
      throw Error("", flag,
                  "expected A:B with 0 <= A < B <= " + std::to_string(n) + ", got " + std::to_string(r->first) + ":" +
                      std::to_string(r->second));
    lo = r->first;
    hi = r->second;
  };
  take(o.rows, p.seq_len, v.r0, v.r1, "--rows");
  take(o.cols, p.kv_len, v.c0, v.c1, "--cols");
  return v;
}

// A run clipped to the view's columns [c0, c1) and shifted to start at c0 (count 0: nothing left).
Run clip(const Run& r, const View& v) {
  if (r.count <= 0) return {0, 1, 0};
  const int64_t last = r.start + (r.count - 1) * r.stride;
  if (last < v.c0 || r.start >= v.c1) return {0, 1, 0};
  const int64_t k0 = r.start >= v.c0 ? 0 : (v.c0 - r.start + r.stride - 1) / r.stride;
  const int64_t k1 = std::min(r.count - 1, (v.c1 - 1 - r.start) / r.stride);
  if (k1 < k0) return {0, 1, 0};
  return {r.start + k0 * r.stride - v.c0, r.stride, k1 - k0 + 1};
}

// Row i's runs with their categories (before the global tokens are taken out).
template <class F> void for_each_family_run(const Acsr& a, int64_t i, F f) {
  const int64_t si = a.segment_of(i);
  if (si < 0) return;
  const Segment& s = a.segments[static_cast<size_t>(si)];
  if (s.tabulated) {
    const size_t r = static_cast<size_t>((i - s.row_begin) / s.row_stride);
    for (int64_t k = s.row_ptr[r]; k < s.row_ptr[r + 1]; ++k) f(s.table[static_cast<size_t>(k)], kTables);
    return;
  }
  for (const AffineRun& r : s.runs) f(r.at(i), r.stride == 1 ? kContiguous : kStrided);
}

struct Grid {
  View view{};
  int64_t f = 1;           // tokens per cell side
  int64_t gh = 0, gw = 0;  // cells
  std::vector<double> density;
  std::vector<uint8_t> category;  // the category with the most kept positions of each cell
  std::array<bool, kCategories> present{};
};

// Kept positions per cell and category: a unit-step run adds to its first and last cell and,
// through a difference array flushed once per row of cells, f to each cell between (O(1) a run); a
// run of a larger step visits the cells holding its points; a global token's column met by a run
// moves one position from the run's category to the global one. The visits are counted first,
// against the work limit, so that a picture too costly to draw is refused before it is drawn.
void check_cost(const Problem& p, const Acsr& a, const Grid& g, size_t tokens) {
  if (int64_t{9} * g.gh * g.gw > p.limits.max_memory / 2)  // density (double) and category (byte) per cell
    throw_memory_limit(p.file, "drawing the picture", int64_t{9} * g.gh * g.gw, p.limits);
  int64_t steps = g.gh * g.gw * kCategories;
  for (int64_t i = g.view.r0; i < g.view.r1 && steps <= p.limits.max_work; ++i)
    for_each_family_run(a, i, [&](const Run& r0, Category) {
      const Run r = clip(r0, g.view);
      if (r.count <= 0) return;
      const int64_t last = r.start + (r.count - 1) * r.stride;
      steps += 1 + (tokens > 0 ? 12 : 0) +
               (r.count == 1 || r.stride == 1 ? 0 : r.stride <= g.f ? last / g.f - r.start / g.f + 1 : r.count);
    });
  if (steps > p.limits.max_work)
    throw Error(p.file, "", "drawing the picture needs more than " + std::to_string(p.limits.max_work) +
                                " steps, the work limit (--max-work)" + work_share_note(p.limits) + "; a smaller --cells draws fewer cells, a zoom (--rows, --cols) fewer rows");
}

// Adds run r (view columns) of category c to the row of cells `row` (per-category counts) and diff.
void add_run(const Run& r, int c, int64_t f, std::vector<int64_t*>& row, std::vector<std::vector<int64_t>>& diff) {
  const int64_t last = r.start + (r.count - 1) * r.stride;
  if (r.count == 1 || r.stride == 1) {
    const int64_t c0 = r.start / f, c1 = last / f;
    if (c0 == c1) {
      row[c][c0] += r.count;
    } else {
      row[c][c0] += (c0 + 1) * f - r.start;
      row[c][c1] += last - c1 * f + 1;
      diff[c][static_cast<size_t>(c0 + 1)] += f;
      diff[c][static_cast<size_t>(c1)] -= f;
    }
    return;
  }
  for (int64_t x = r.start / f; x <= last / f; ++x) {
    const int64_t lo = x * f, hi = lo + f - 1;
    const int64_t k0 = lo <= r.start ? 0 : (lo - r.start + r.stride - 1) / r.stride;
    const int64_t k1 = std::min(r.count - 1, (hi - r.start) / r.stride);
    if (k1 >= k0) row[c][x] += k1 - k0 + 1;
    if (r.stride > f && k1 + 1 < r.count) x = (r.start + (k1 + 1) * r.stride) / f - 1;  // skip empty cells
  }
}

// The finished row of cells y: each cell's density (all categories) and leading category.
void finish_cell_row(Grid& g, int64_t y, std::vector<std::vector<int64_t>>& cnt) {
  const View& v = g.view;
  for (int64_t x = 0; x < g.gw; ++x) {
    int64_t total = 0;
    int best = 0;
    for (int c = 0; c < kCategories; ++c) {
      total += cnt[c][static_cast<size_t>(x)];
      if (cnt[c][static_cast<size_t>(x)] > cnt[best][static_cast<size_t>(x)]) best = c;
      cnt[c][static_cast<size_t>(x)] = 0;
    }
    const int64_t h = std::min(g.f, v.rows() - y * g.f), w = std::min(g.f, v.cols() - x * g.f);
    const size_t k = static_cast<size_t>(y * g.gw + x);
    g.density[k] = static_cast<double>(total) / static_cast<double>(h * w);
    g.category[k] = static_cast<uint8_t>(best);
    if (total > 0) g.present[static_cast<size_t>(best)] = true;
  }
}

Grid density_grid(const Problem& p, const Acsr& a, const View& v, int max_cells, const std::vector<int64_t>& tokens) {
  Grid g;
  g.view = v;
  g.f = std::max<int64_t>(1, (std::max(v.rows(), v.cols()) + max_cells - 1) / max_cells);
  g.gh = (v.rows() + g.f - 1) / g.f;
  g.gw = (v.cols() + g.f - 1) / g.f;
  check_cost(p, a, g, tokens.size());
  g.density.resize(static_cast<size_t>(g.gh * g.gw));
  g.category.resize(static_cast<size_t>(g.gh * g.gw));
  // Counts of the row of cells being filled, per category, and their difference arrays.
  std::vector<std::vector<int64_t>> cnt(kCategories, std::vector<int64_t>(static_cast<size_t>(g.gw), 0)),
      diff(kCategories, std::vector<int64_t>(static_cast<size_t>(g.gw) + 1, 0));
  std::vector<int64_t*> row(kCategories);
  for (int c = 0; c < kCategories; ++c) row[c] = cnt[c].data();
  for (int64_t i = v.r0; i < v.r1; ++i) {
    const bool global_row = std::binary_search(tokens.begin(), tokens.end(), i + p.q_offset);
    for_each_family_run(a, i, [&](const Run& r0, Category c) {
      const Run r = clip(r0, v);
      if (r.count <= 0) return;
      add_run(r, global_row ? kGlobal : c, g.f, row, diff);
      if (global_row) return;
      // The run's global columns: from the first token at or after its start, while within it.
      const int64_t last = r.start + (r.count - 1) * r.stride + v.c0;
      for (auto t = std::lower_bound(tokens.begin(), tokens.end(), r.start + v.c0); t != tokens.end() && *t <= last; ++t)
        if ((*t - v.c0 - r.start) % r.stride == 0) {
          const int64_t x = (*t - v.c0) / g.f;
          --row[c][x];
          ++row[kGlobal][x];
        }
    });
    if ((i - v.r0 + 1) % g.f == 0 || i + 1 == v.r1) {
      for (int c = 0; c < kCategories; ++c) {
        int64_t run = 0;
        for (int64_t x = 0; x < g.gw; ++x) {
          run += diff[c][static_cast<size_t>(x)];
          row[c][x] += run;
          diff[c][static_cast<size_t>(x)] = 0;
        }
      }
      finish_cell_row(g, (i - v.r0) / g.f, cnt);
    }
  }
  return g;
}

struct Rgb {
  uint8_t r, g, b;
  bool operator==(const Rgb&) const = default;
};
constexpr Rgb kWhite{255, 255, 255};

// Each category's colour from light (a lone kept position) to dark (every position of the cell).
constexpr std::array<std::pair<Rgb, Rgb>, kCategories> kRamp = {{
    {{254, 224, 210}, {165, 15, 21}},   // global: red
    {{222, 235, 247}, {8, 48, 107}},    // contiguous: blue
    {{229, 245, 224}, {0, 109, 44}},    // strided: green
    {{239, 237, 245}, {84, 39, 143}},   // tables: purple
}};

Rgb shade(double d, int category) {
  if (d <= 0) return kWhite;
  const double t = 0.25 + 0.75 * std::sqrt(std::min(1.0, d));
  const auto& [lo, hi] = kRamp[static_cast<size_t>(category)];
  auto mix = [&](int a, int b) { return static_cast<uint8_t>(std::lround(a + (b - a) * t)); };
  return {mix(lo.r, hi.r), mix(lo.g, hi.g), mix(lo.b, hi.b)};
}
Rgb cell(const Grid& g, int64_t y, int64_t x) {
  const size_t k = static_cast<size_t>(y * g.gw + x);
  return shade(g.density[k], g.category[k]);
}
// A category's swatch in the legend: its colour at density one half.
Rgb swatch(int category) { return shade(0.5, category); }

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

// Tick positions in [lo, hi]: a 1/2/5 x 10^k step giving 4 to 8 intervals, from a multiple of the
// step, plus both ends.
std::vector<int64_t> ticks(int64_t lo, int64_t hi) {
  const int64_t n = hi - lo;
  int64_t step = 0;
  for (int64_t p = 1; step == 0; p *= 10)
    for (int64_t m : {1, 2, 5})
      if (step == 0 && n / (m * p) <= 8) step = m * p;
  std::vector<int64_t> t = {lo};
  for (int64_t x = (lo / step + 1) * step; x < hi; x += step)
    if (x - t.back() >= step / 2) t.push_back(x);
  if (hi - t.back() < step / 2 && t.size() > 1) t.back() = hi;
  else t.push_back(hi);
  return t;
}

std::string title_of(const Problem& p, const AnalysisStats& s) {
  char d[32];
  std::snprintf(d, sizeof d, "%.2f", 100 * s.density);
  return p.name + "  " + std::to_string(p.seq_len) + "x" + std::to_string(p.kv_len) + "  density " + d + "%" +
         (p.causal ? "  causal" : "");
}

std::string subtitle_of(const Problem& p, const AnalysisStats& s, const Grid& g) {
  std::string t = "nnz " + std::to_string(s.nnz) + ", " + std::to_string(s.segments) + " segments";
  const View& v = g.view;
  if (v.rows() != p.seq_len || v.cols() != p.kv_len)
    t += ", rows " + std::to_string(v.r0) + ":" + std::to_string(v.r1) + ", keys " + std::to_string(v.c0) + ":" +
         std::to_string(v.c1);
  if (g.f > 1) t += ", 1 cell = " + std::to_string(g.f) + "x" + std::to_string(g.f) + " tokens (shade = density)";
  return t;
}

struct Layout {
  int zoom, left, top, w, h, width, height, legend_y;
};

Layout layout(const Grid& g) {
  Layout l;
  l.zoom = static_cast<int>(std::max<int64_t>(1, 512 / std::max(g.gh, g.gw)));
  l.w = static_cast<int>(g.gw) * l.zoom;
  l.h = static_cast<int>(g.gh) * l.zoom;
  l.left = 110;
  l.legend_y = 58;
  l.top = 92;
  l.width = std::max(l.left + l.w + 40, 760);
  l.height = l.top + l.h + 70;
  return l;
}

// The legend's entries, in order: the categories present, each at its x offset from the left.
std::vector<std::pair<int, int>> legend(const Grid& g) {
  std::vector<std::pair<int, int>> e;
  int x = 0;
  for (int c = 0; c < kCategories; ++c)
    if (g.present[static_cast<size_t>(c)]) {
      e.push_back({c, x});
      x += 14 + 6 * static_cast<int>(std::string(kCategoryName[c]).size()) + 18;
    }
  return e;
}

void write_svg(const Problem& p, const AnalysisStats& s, const Grid& g, std::ostream& o) {
  const Layout L = layout(g);
  const View& v = g.view;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << L.width << "\" height=\"" << L.height << "\" viewBox=\"0 0 "
    << L.width << " " << L.height << "\" font-family=\"sans-serif\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  auto esc = [](const std::string& x) {
    std::string r;
    for (char c : x) r += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
    return r;
  };
  o << "<text x=\"" << L.left << "\" y=\"26\" font-size=\"18\" font-weight=\"bold\">" << esc(title_of(p, s)) << "</text>\n";
  o << "<text x=\"" << L.left << "\" y=\"46\" font-size=\"13\" fill=\"#444\">" << esc(subtitle_of(p, s, g)) << "</text>\n";
  for (const auto& [c, x] : legend(g))
    o << "<rect x=\"" << L.left + x << "\" y=\"" << L.legend_y << "\" width=\"12\" height=\"12\" fill=\"" << hex(swatch(c))
      << "\"/><text x=\"" << L.left + x + 16 << "\" y=\"" << L.legend_y + 10 << "\" font-size=\"12\">" << kCategoryName[c]
      << "</text>\n";
  o << "<g shape-rendering=\"crispEdges\">\n";
  for (int64_t y = 0; y < g.gh; ++y)
    for (int64_t x = 0; x < g.gw;) {
      const Rgb c = cell(g, y, x);
      int64_t e = x + 1;
      while (e < g.gw && cell(g, y, e) == c) ++e;
      if (!(c == kWhite))
        o << "<rect x=\"" << L.left + x * L.zoom << "\" y=\"" << L.top + y * L.zoom << "\" width=\"" << (e - x) * L.zoom
          << "\" height=\"" << L.zoom << "\" fill=\"" << hex(c) << "\"/>\n";
      x = e;
    }
  o << "</g>\n<rect x=\"" << L.left << "\" y=\"" << L.top << "\" width=\"" << L.w << "\" height=\"" << L.h
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  const double sx = static_cast<double>(L.w) / static_cast<double>(v.cols()), sy = static_cast<double>(L.h) / static_cast<double>(v.rows());
  for (int64_t t : ticks(v.c0, v.c1)) {
    const double x = L.left + static_cast<double>(t - v.c0) * sx;
    o << "<line x1=\"" << x << "\" y1=\"" << L.top + L.h << "\" x2=\"" << x << "\" y2=\"" << L.top + L.h + 5 << "\" stroke=\"#444\"/>"
      << "<text x=\"" << x << "\" y=\"" << L.top + L.h + 19 << "\" font-size=\"12\" text-anchor=\"middle\">" << t << "</text>\n";
  }
  for (int64_t t : ticks(v.r0, v.r1)) {
    const double y = L.top + static_cast<double>(t - v.r0) * sy;
    o << "<line x1=\"" << L.left - 5 << "\" y1=\"" << y << "\" x2=\"" << L.left << "\" y2=\"" << y << "\" stroke=\"#444\"/>"
      << "<text x=\"" << L.left - 8 << "\" y=\"" << y + 4 << "\" font-size=\"12\" text-anchor=\"end\">" << t << "</text>\n";
  }
  o << "<text x=\"" << L.left + L.w / 2 << "\" y=\"" << L.top + L.h + 42 << "\" font-size=\"14\" text-anchor=\"middle\">key position j</text>\n";
  o << "<text x=\"20\" y=\"" << L.top + L.h / 2 << "\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
    << L.top + L.h / 2 << ")\">query row i</text>\n</svg>\n";
}

// 5x7 bitmap font; bit 4 is the leftmost column; nullptr for a space, '?' for a character it lacks.
const std::array<uint8_t, 7>* glyph(char ch) {
  static const std::pair<char, std::array<uint8_t, 7>> font[] = {
      {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
      {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
      {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
      {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
      {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'B', {0x1E, 0x11, 0x11, 0x1E, 0x11, 0x11, 0x1E}},
      {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}}, {'D', {0x1C, 0x12, 0x11, 0x11, 0x11, 0x12, 0x1C}},
      {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}}, {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}},
      {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}}, {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}},
      {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}}, {'J', {0x07, 0x02, 0x02, 0x02, 0x02, 0x12, 0x0C}},
      {'K', {0x11, 0x12, 0x14, 0x18, 0x14, 0x12, 0x11}}, {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}},
      {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}}, {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}},
      {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}},
      {'Q', {0x0E, 0x11, 0x11, 0x11, 0x15, 0x12, 0x0D}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
      {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
      {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'V', {0x11, 0x11, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x15, 0x0A}}, {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}},
      {'Y', {0x11, 0x11, 0x11, 0x0A, 0x04, 0x04, 0x04}}, {'Z', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x10, 0x1F}},
      {'a', {0, 0, 0x0E, 0x01, 0x0F, 0x11, 0x0F}},       {'b', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x1E}},
      {'c', {0, 0, 0x0E, 0x10, 0x10, 0x11, 0x0E}},       {'d', {0x01, 0x01, 0x0D, 0x13, 0x11, 0x11, 0x0F}},
      {'e', {0, 0, 0x0E, 0x11, 0x1F, 0x10, 0x0E}},       {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
      {'g', {0, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}},    {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'i', {0x04, 0, 0x0C, 0x04, 0x04, 0x04, 0x0E}},    {'j', {0x02, 0, 0x06, 0x02, 0x02, 0x12, 0x0C}},
      {'k', {0x10, 0x10, 0x12, 0x14, 0x18, 0x14, 0x12}}, {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
      {'m', {0, 0, 0x1A, 0x15, 0x15, 0x11, 0x11}},       {'n', {0, 0, 0x16, 0x19, 0x11, 0x11, 0x11}},
      {'o', {0, 0, 0x0E, 0x11, 0x11, 0x11, 0x0E}},       {'p', {0, 0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10}},
      {'q', {0, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x01}},    {'r', {0, 0, 0x16, 0x19, 0x10, 0x10, 0x10}},
      {'s', {0, 0, 0x0F, 0x10, 0x0E, 0x01, 0x1E}},       {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
      {'u', {0, 0, 0x11, 0x11, 0x11, 0x13, 0x0D}},       {'v', {0, 0, 0x11, 0x11, 0x11, 0x0A, 0x04}},
      {'w', {0, 0, 0x11, 0x11, 0x15, 0x15, 0x0A}},       {'x', {0, 0, 0x11, 0x0A, 0x04, 0x0A, 0x11}},
      {'y', {0, 0x11, 0x11, 0x11, 0x0F, 0x01, 0x0E}},    {'z', {0, 0, 0x1F, 0x02, 0x04, 0x08, 0x1F}},
      {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},                 {',', {0, 0, 0, 0, 0x0C, 0x04, 0x08}},
      {'-', {0, 0, 0, 0x1F, 0, 0, 0}},                    {':', {0, 0x0C, 0x0C, 0, 0x0C, 0x0C, 0}},
      {'(', {0x02, 0x04, 0x08, 0x08, 0x08, 0x04, 0x02}}, {')', {0x08, 0x04, 0x02, 0x02, 0x02, 0x04, 0x08}},
      {'%', {0x18, 0x19, 0x02, 0x04, 0x08, 0x13, 0x03}}, {'/', {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0}},
      {'_', {0, 0, 0, 0, 0, 0, 0x1F}},                    {'=', {0, 0, 0x1F, 0, 0x1F, 0, 0}},
      {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},       {'[', {0x0E, 0x08, 0x08, 0x08, 0x08, 0x08, 0x0E}},
      {']', {0x0E, 0x02, 0x02, 0x02, 0x02, 0x02, 0x0E}}, {'?', {0x0E, 0x11, 0x01, 0x02, 0x04, 0, 0x04}},
      {'<', {0x02, 0x04, 0x08, 0x10, 0x08, 0x04, 0x02}}, {'>', {0x08, 0x04, 0x02, 0x01, 0x02, 0x04, 0x08}},
      {'|', {0x04, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}}, {'\'', {0x04, 0x04, 0x08, 0, 0, 0, 0}},
  };
  if (ch == ' ') return nullptr;
  for (const auto& [c, g] : font)
    if (c == ch) return &g;
  return glyph('?');
}

struct Canvas {
  int w, h;
  std::string rgb;
  Canvas(int width, int height) : w(width), h(height), rgb(static_cast<size_t>(width) * height * 3, static_cast<char>(255)) {}
  void put(int x, int y, Rgb c) {
    if (x < 0 || y < 0 || x >= w || y >= h) return;
    const size_t o = (static_cast<size_t>(y) * w + x) * 3;
    rgb[o] = static_cast<char>(c.r);
    rgb[o + 1] = static_cast<char>(c.g);
    rgb[o + 2] = static_cast<char>(c.b);
  }
  void fill(int x, int y, int ww, int hh, Rgb c) {
    for (int b = y; b < y + hh; ++b)
      for (int a = x; a < x + ww; ++a) put(a, b, c);
  }
  // Text at scale s; anchor: 0 left, 1 centre, 2 right.
  void text(int x, int y, const std::string& t, int s, int anchor = 0, Rgb c = {0, 0, 0}) {
    const int width = static_cast<int>(t.size()) * 6 * s - s;
    if (anchor == 1) x -= width / 2;
    if (anchor == 2) x -= width;
    for (size_t k = 0; k < t.size(); ++k) {
      const auto* g = glyph(t[k]);
      if (!g) continue;
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if ((*g)[static_cast<size_t>(r)] & (0x10 >> col)) fill(x + static_cast<int>(k) * 6 * s + col * s, y + r * s, s, s, c);
    }
  }
};

std::string render_png(const Problem& p, const AnalysisStats& s, const Grid& g) {
  const Layout L = layout(g);
  const View& v = g.view;
  Canvas cv(L.width, L.height);
  cv.text(L.left, 12, title_of(p, s), 2);
  cv.text(L.left, 36, subtitle_of(p, s, g), 1, 0, {68, 68, 68});
  for (const auto& [c, x] : legend(g)) {
    cv.fill(L.left + x, L.legend_y, 12, 12, swatch(c));
    cv.text(L.left + x + 16, L.legend_y + 3, kCategoryName[c], 1);
  }
  for (int64_t y = 0; y < g.gh; ++y)
    for (int64_t x = 0; x < g.gw; ++x)
      cv.fill(L.left + static_cast<int>(x) * L.zoom, L.top + static_cast<int>(y) * L.zoom, L.zoom, L.zoom, cell(g, y, x));
  const Rgb frame{136, 136, 136}, ink{68, 68, 68};
  cv.fill(L.left - 1, L.top - 1, L.w + 2, 1, frame);
  cv.fill(L.left - 1, L.top + L.h, L.w + 2, 1, frame);
  cv.fill(L.left - 1, L.top - 1, 1, L.h + 2, frame);
  cv.fill(L.left + L.w, L.top - 1, 1, L.h + 2, frame);
  const double sx = static_cast<double>(L.w) / static_cast<double>(v.cols()), sy = static_cast<double>(L.h) / static_cast<double>(v.rows());
  for (int64_t t : ticks(v.c0, v.c1)) {
    const int x = L.left + static_cast<int>(std::lround(static_cast<double>(t - v.c0) * sx));
    cv.fill(x, L.top + L.h + 1, 1, 5, ink);
    cv.text(x, L.top + L.h + 9, std::to_string(t), 1, 1);
  }
  for (int64_t t : ticks(v.r0, v.r1)) {
    const int y = L.top + static_cast<int>(std::lround(static_cast<double>(t - v.r0) * sy));
    cv.fill(L.left - 6, y, 5, 1, ink);
    cv.text(L.left - 9, y - 3, std::to_string(t), 1, 2);
  }
  cv.text(L.left + L.w / 2, L.top + L.h + 30, "key position j", 2, 1);
  cv.text(8, L.top - 18, "query row i", 1);
  return encode_png(cv.w, cv.h, cv.rgb);
}

void be32(std::string& o, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) o += static_cast<char>((v >> s) & 0xFF);
}

// A PNG chunk: length, type, data, and zlib's CRC-32 of type and data.
void chunk(std::string& out, const char* type, const std::string& data) {
  be32(out, static_cast<uint32_t>(data.size()));
  const size_t from = out.size();
  out += type;
  out += data;
  be32(out, static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(out.data() + from), static_cast<uInt>(out.size() - from))));
}

}  // namespace

std::string encode_png(int width, int height, const std::string& rgb) {
  if (width <= 0 || height <= 0 || rgb.size() != static_cast<size_t>(width) * height * 3)
    throw std::invalid_argument("encode_png: pixel data does not match the size");
  // Raw scanlines, each with filter byte 0.
  std::string raw;
  raw.reserve(static_cast<size_t>(height) * (width * 3 + 1));
  for (int y = 0; y < height; ++y) {
    raw += '\0';
    raw.append(rgb, static_cast<size_t>(y) * width * 3, static_cast<size_t>(width) * 3);
  }
  // The zlib stream of the scanlines (the PNG's IDAT).
  uLongf zlen = compressBound(static_cast<uLong>(raw.size()));
  std::string z(zlen, '\0');
  if (compress2(reinterpret_cast<Bytef*>(z.data()), &zlen, reinterpret_cast<const Bytef*>(raw.data()),
                static_cast<uLong>(raw.size()), Z_BEST_COMPRESSION) != Z_OK)
    throw std::runtime_error("encode_png: zlib compression failed");
  z.resize(zlen);
  std::string out = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  be32(ihdr, static_cast<uint32_t>(width));
  be32(ihdr, static_cast<uint32_t>(height));
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit, RGB, deflate, no filter, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", "");
  return out;
}

void write_picture(const Problem& p, const Acsr& a, const AnalysisStats& s, const std::string& path, const PictureOptions& o) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext != ".svg" && ext != ".png") throw Error("", "-o", "expected an output file ending in .svg or .png, got " + path);
  const Grid g = density_grid(p, a, view_of(p, o), o.max_cells, global_tokens(p));
  write_atomically(path, [&](std::ofstream& out) {
    if (ext == ".svg") write_svg(p, s, g, out);
    else out << render_png(p, s, g);
  });
}

}  // namespace splat
