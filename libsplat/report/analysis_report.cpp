// analyze / show output: the text report, the JSON object, the COO dump and the mask picture
// (SVG written directly; PNG compressed with zlib, with a 5x7 bitmap font).
#include "libsplat/report/analysis_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unistd.h>
#include <zlib.h>

namespace splat {

namespace {

std::string fmt_double(double x, int prec) {
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(prec);
  s << x;
  return s.str();
}

std::string human_bytes(int64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = static_cast<double>(b);
  int u = 0;
  while (x >= 1024 && u < 4) {
    x /= 1024;
    ++u;
  }
  return u == 0 ? std::to_string(b) + " B" : fmt_double(x, 1) + " " + unit[u];
}

// "(slope*i + offset)/den" printed compactly: "i-256", "0", "2*i+3", "(i+514)/2".
std::string affine_expr(int64_t slope, int64_t offset, int64_t den) {
  std::string s;
  if (slope != 0) {
    s = slope == 1 ? "i" : slope == -1 ? "-i" : std::to_string(slope) + "*i";
    if (offset > 0) s.append(1, '+').append(std::to_string(offset));
    if (offset < 0) s += std::to_string(offset);
  } else {
    s = std::to_string(offset);
  }
  if (den == 1) return s;
  // Built by appending: GCC 12 warns falsely (-Wrestrict) on "+" + std::to_string(x).
  std::string r;
  if (slope != 0) r.append(1, '(').append(s).append(1, ')');
  else r.append(s);
  r.append(1, '/').append(std::to_string(den));
  return r;
}

std::string segment_line(const Segment& g) {
  std::string s = "rows [" + std::to_string(g.row_begin) + ", " + std::to_string(g.row_end) + ")";
  if (g.row_stride != 1) s += " step " + std::to_string(g.row_stride);
  if (g.tabulated) return s + ": table of " + std::to_string(g.table.size()) + " runs";
  if (g.runs.empty()) return s + ": empty";
  s += ":";
  for (size_t k = 0; k < g.runs.size(); ++k) {
    const AffineRun& a = g.runs[k];
    s += (k ? " | " : " ") + std::string("start ") + affine_expr(a.start_slope, a.start_offset, a.den) + ", stride " +
         std::to_string(a.stride) + ", count " + affine_expr(a.count_slope, a.count_offset, a.den);
  }
  return s;
}

std::string tmp_name(const std::string& path) { return path + ".tmp" + std::to_string(::getpid()); }

void commit(const std::string& tmp, const std::string& path) {
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(path + ": cannot write: " + ec.message());
  }
}

// Writes path atomically: write(stream) into a temporary file next to it, then a rename; a failed
// write leaves neither a half-written file nor the temporary.
template <class Write> void write_atomically(const std::string& path, Write write) {
  const std::string tmp = tmp_name(path);
  {
    std::ofstream o(tmp, std::ios::binary);
    if (!o) throw std::runtime_error(path + ": cannot open for writing");
    try {
      write(o);
    } catch (...) {
      o.close();
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw;
    }
    o.close();
    if (!o) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw std::runtime_error(path + ": write failed");
    }
  }
  commit(tmp, path);
}

// ---- picture ------------------------------------------------------------------------------

struct Grid {
  int64_t f = 1;           // tokens per cell side
  int64_t gh = 0, gw = 0;  // cells
  std::vector<double> density;
};

// Kept positions per cell: a unit-step run adds to its first and last cell and, through a
// difference array flushed once per row of cells, f to each cell between (O(1) a run); a run of a
// larger step visits the cells holding its points. The visits are counted first, against the work
// limit, so that a picture too costly to draw is refused before it is drawn.
Grid density_grid(const Problem& p, const Acsr& a, int max_cells) {
  Grid g;
  int64_t m = std::max(a.seq_len, a.kv_len);
  g.f = std::max<int64_t>(1, (m + max_cells - 1) / max_cells);
  g.gh = (a.seq_len + g.f - 1) / g.f;
  g.gw = (a.kv_len + g.f - 1) / g.f;
  if (16 * g.gh * g.gw > p.limits.max_memory / 2) throw_memory_limit(p.file, "drawing the picture", 16 * g.gh * g.gw, p.limits);
  int64_t steps = g.gh * g.gw;
  for (int64_t i = 0; i < a.seq_len && steps <= p.limits.max_work; ++i)
    for (const Run& r : a.row(i)) {
      const int64_t last = r.start + (r.count - 1) * r.stride;
      steps += 1 + (r.count == 1 || r.stride == 1 ? 0 : r.stride <= g.f ? last / g.f - r.start / g.f + 1 : r.count);
    }
  if (steps > p.limits.max_work)
    throw Error(p.file, "", "drawing the picture needs more than " + std::to_string(p.limits.max_work) +
                                " steps, the work limit (--max-work); a smaller --cells draws fewer cells");
  std::vector<int64_t> cnt(static_cast<size_t>(g.gh * g.gw), 0), diff(static_cast<size_t>(g.gw) + 1, 0);
  auto flush = [&](int64_t* row) {
    int64_t run = 0;
    for (int64_t c = 0; c < g.gw; ++c) {
      run += diff[static_cast<size_t>(c)];
      row[c] += run;
      diff[static_cast<size_t>(c)] = 0;
    }
  };
  for (int64_t i = 0; i < a.seq_len; ++i) {
    int64_t* row = cnt.data() + (i / g.f) * g.gw;
    for (const Run& r : a.row(i)) {
      int64_t last = r.start + (r.count - 1) * r.stride;
      if (r.count == 1 || r.stride == 1) {
        const int64_t c0 = r.start / g.f, c1 = last / g.f;
        if (c0 == c1) {
          row[c0] += r.count;
        } else {
          row[c0] += (c0 + 1) * g.f - r.start;
          row[c1] += last - c1 * g.f + 1;
          diff[static_cast<size_t>(c0 + 1)] += g.f;
          diff[static_cast<size_t>(c1)] -= g.f;
        }
        continue;
      }
      for (int64_t c = r.start / g.f; c <= last / g.f; ++c) {
        int64_t lo = c * g.f, hi = lo + g.f - 1;
        int64_t k0 = lo <= r.start ? 0 : (lo - r.start + r.stride - 1) / r.stride;
        int64_t k1 = std::min(r.count - 1, (hi - r.start) / r.stride);
        if (k1 >= k0) row[c] += k1 - k0 + 1;
        if (r.stride > g.f && k1 + 1 < r.count) c = (r.start + (k1 + 1) * r.stride) / g.f - 1;  // skip empty cells
      }
    }
    if ((i + 1) % g.f == 0 || i + 1 == a.seq_len) flush(row);
  }
  g.density.resize(cnt.size());
  for (int64_t y = 0; y < g.gh; ++y)
    for (int64_t x = 0; x < g.gw; ++x) {
      int64_t h = std::min(g.f, a.seq_len - y * g.f), w = std::min(g.f, a.kv_len - x * g.f);
      g.density[static_cast<size_t>(y * g.gw + x)] = static_cast<double>(cnt[static_cast<size_t>(y * g.gw + x)]) /
                                                     static_cast<double>(h * w);
    }
  return g;
}

struct Rgb {
  uint8_t r, g, b;
  bool operator==(const Rgb&) const = default;
};

// White for empty cells; any kept position is at least a clear light blue, full cells dark navy.
Rgb shade(double d) {
  if (d <= 0) return {255, 255, 255};
  double t = 0.25 + 0.75 * std::sqrt(std::min(1.0, d));
  auto mix = [&](int a, int b) { return static_cast<uint8_t>(std::lround(a + (b - a) * t)); };
  return {mix(222, 8), mix(235, 48), mix(247, 107)};
}

std::string hex(Rgb c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

// Tick positions: a 1/2/5 x 10^k step giving 4 to 8 intervals, plus the end.
std::vector<int64_t> ticks(int64_t n) {
  int64_t step = 1;
  for (int64_t p = 1;; p *= 10) {
    for (int64_t m : {1, 2, 5}) {
      if (n / (m * p) <= 8) {
        step = m * p;
        goto done;
      }
    }
  }
done:
  std::vector<int64_t> t;
  for (int64_t x = 0; x < n; x += step) t.push_back(x);
  if (n - t.back() < step / 2 && t.size() > 1) t.back() = n;
  else t.push_back(n);
  return t;
}

std::string title_of(const Problem& p, const AnalysisStats& s) {
  return p.name + "  " + std::to_string(p.seq_len) + "x" + std::to_string(p.kv_len) + "  density " +
         fmt_double(100 * s.density, 2) + "%" + (p.causal ? "  causal" : "");
}

std::string subtitle_of(const Problem&, const AnalysisStats& s, const Grid& g) {
  std::string t = "nnz " + std::to_string(s.nnz) + ", " + std::to_string(s.segments) + " segments";
  if (g.f > 1) t += ", 1 cell = " + std::to_string(g.f) + "x" + std::to_string(g.f) + " tokens (shade = density)";
  return t;
}

struct Layout {
  int zoom, left, top, w, h, width, height;
};

Layout layout(const Grid& g) {
  Layout l;
  l.zoom = static_cast<int>(std::max<int64_t>(1, 512 / std::max(g.gh, g.gw)));
  l.w = static_cast<int>(g.gw) * l.zoom;
  l.h = static_cast<int>(g.gh) * l.zoom;
  l.left = 110;
  l.top = 70;
  l.width = std::max(l.left + l.w + 40, 720);
  l.height = l.top + l.h + 70;
  return l;
}

void write_svg(const Problem& p, const AnalysisStats& s, const Grid& g, std::ostream& o) {
  Layout L = layout(g);
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
  o << "<g shape-rendering=\"crispEdges\">\n";
  for (int64_t y = 0; y < g.gh; ++y) {
    for (int64_t x = 0; x < g.gw;) {
      Rgb c = shade(g.density[static_cast<size_t>(y * g.gw + x)]);
      int64_t e = x + 1;
      while (e < g.gw && shade(g.density[static_cast<size_t>(y * g.gw + e)]) == c) ++e;
      if (!(c == Rgb{255, 255, 255}))
        o << "<rect x=\"" << L.left + x * L.zoom << "\" y=\"" << L.top + y * L.zoom << "\" width=\"" << (e - x) * L.zoom
          << "\" height=\"" << L.zoom << "\" fill=\"" << hex(c) << "\"/>\n";
      x = e;
    }
  }
  o << "</g>\n<rect x=\"" << L.left << "\" y=\"" << L.top << "\" width=\"" << L.w << "\" height=\"" << L.h
    << "\" fill=\"none\" stroke=\"#888\"/>\n";
  const double sx = static_cast<double>(L.w) / static_cast<double>(p.kv_len), sy = static_cast<double>(L.h) / static_cast<double>(p.seq_len);
  for (int64_t t : ticks(p.kv_len)) {
    double x = L.left + t * sx;
    o << "<line x1=\"" << x << "\" y1=\"" << L.top + L.h << "\" x2=\"" << x << "\" y2=\"" << L.top + L.h + 5 << "\" stroke=\"#444\"/>"
      << "<text x=\"" << x << "\" y=\"" << L.top + L.h + 19 << "\" font-size=\"12\" text-anchor=\"middle\">" << t << "</text>\n";
  }
  for (int64_t t : ticks(p.seq_len)) {
    double y = L.top + t * sy;
    o << "<line x1=\"" << L.left - 5 << "\" y1=\"" << y << "\" x2=\"" << L.left << "\" y2=\"" << y << "\" stroke=\"#444\"/>"
      << "<text x=\"" << L.left - 8 << "\" y=\"" << y + 4 << "\" font-size=\"12\" text-anchor=\"end\">" << t << "</text>\n";
  }
  o << "<text x=\"" << L.left + L.w / 2 << "\" y=\"" << L.top + L.h + 42 << "\" font-size=\"14\" text-anchor=\"middle\">key position j</text>\n";
  o << "<text x=\"20\" y=\"" << L.top + L.h / 2 << "\" font-size=\"14\" text-anchor=\"middle\" transform=\"rotate(-90 20 "
    << L.top + L.h / 2 << ")\">query position i</text>\n</svg>\n";
}

// 5x7 bitmap font; bit 4 is the leftmost column. Lower case is drawn as upper case.
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
  if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
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
    size_t o = (static_cast<size_t>(y) * w + x) * 3;
    rgb[o] = static_cast<char>(c.r);
    rgb[o + 1] = static_cast<char>(c.g);
    rgb[o + 2] = static_cast<char>(c.b);
  }
  void fill(int x, int y, int ww, int hh, Rgb c) {
    for (int b = y; b < y + hh; ++b)
      for (int a = x; a < x + ww; ++a) put(a, b, c);
  }
  // Text at scale s; anchor: 0 left, 1 centre, 2 right. Returns the width.
  int text(int x, int y, const std::string& t, int s, int anchor = 0, Rgb c = {0, 0, 0}) {
    int width = static_cast<int>(t.size()) * 6 * s - s;
    if (anchor == 1) x -= width / 2;
    if (anchor == 2) x -= width;
    for (size_t k = 0; k < t.size(); ++k) {
      const auto* g = glyph(t[k]);
      if (!g) continue;
      for (int r = 0; r < 7; ++r)
        for (int col = 0; col < 5; ++col)
          if ((*g)[static_cast<size_t>(r)] & (0x10 >> col)) fill(x + static_cast<int>(k) * 6 * s + col * s, y + r * s, s, s, c);
    }
    return width;
  }
};

std::string render_png(const Problem& p, const AnalysisStats& s, const Grid& g) {
  Layout L = layout(g);
  Canvas cv(L.width, L.height);
  cv.text(L.left, 12, title_of(p, s), 2);
  cv.text(L.left, 36, subtitle_of(p, s, g), 1, 0, {68, 68, 68});
  for (int64_t y = 0; y < g.gh; ++y)
    for (int64_t x = 0; x < g.gw; ++x)
      cv.fill(L.left + static_cast<int>(x) * L.zoom, L.top + static_cast<int>(y) * L.zoom, L.zoom, L.zoom,
              shade(g.density[static_cast<size_t>(y * g.gw + x)]));
  const Rgb frame{136, 136, 136};
  cv.fill(L.left - 1, L.top - 1, L.w + 2, 1, frame);
  cv.fill(L.left - 1, L.top + L.h, L.w + 2, 1, frame);
  cv.fill(L.left - 1, L.top - 1, 1, L.h + 2, frame);
  cv.fill(L.left + L.w, L.top - 1, 1, L.h + 2, frame);
  const double sx = static_cast<double>(L.w) / static_cast<double>(p.kv_len), sy = static_cast<double>(L.h) / static_cast<double>(p.seq_len);
  for (int64_t t : ticks(p.kv_len)) {
    int x = L.left + static_cast<int>(std::lround(t * sx));
    cv.fill(x, L.top + L.h + 1, 1, 5, {68, 68, 68});
    cv.text(x, L.top + L.h + 9, std::to_string(t), 1, 1);
  }
  for (int64_t t : ticks(p.seq_len)) {
    int y = L.top + static_cast<int>(std::lround(t * sy));
    cv.fill(L.left - 6, y, 5, 1, {68, 68, 68});
    cv.text(L.left - 9, y - 3, std::to_string(t), 1, 2);
  }
  cv.text(L.left + L.w / 2, L.top + L.h + 30, "key position j", 2, 1);
  cv.text(8, L.top - 18, "query i", 2);
  return encode_png(cv.w, cv.h, cv.rgb);
}

uint32_t crc32(const std::string& data, size_t from) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t n = 0; n < 256; ++n) {
      uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  for (size_t k = from; k < data.size(); ++k) c = table[(c ^ static_cast<uint8_t>(data[k])) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

void be32(std::string& o, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) o += static_cast<char>((v >> s) & 0xFF);
}

void chunk(std::string& out, const char* type, const std::string& data) {
  be32(out, static_cast<uint32_t>(data.size()));
  size_t from = out.size();
  out += type;
  out += data;
  be32(out, crc32(out, from));
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

std::string analysis_text(const Problem& p, const Acsr& a, const AnalysisStats& s, int max_segments) {
  std::ostringstream o;
  o << p.name << ": seq_len " << p.seq_len << ", kv_len " << p.kv_len << ", head_dim " << p.head_dim << ", heads "
    << p.heads;
  if (p.kv_heads != p.heads) o << " (kv_heads " << p.kv_heads << ")";
  o << ", batch " << p.batch << ", " << dtype_name(p.dtype) << (p.causal ? ", causal" : "");
  if (p.q_offset != 0) o << ", q_offset " << p.q_offset;
  o << "\n";
  o << "  nnz              " << s.nnz << "  (density " << fmt_double(s.density, 4) << " = " << fmt_double(100 * s.density, 2)
    << "%)\n";
  o << "  rows             " << s.rows << "  (empty " << s.empty_rows << ", widest " << s.nnz_row_max << " keys)\n";
  o << "  runs per row     max " << s.runs_max << ", mean " << fmt_double(s.runs_mean, 2) << "\n";
  o << "  row segments     " << s.segments << "  (" << s.affine_segments << " affine, " << s.tabulated_segments
    << " tabulated over " << s.tabulated_rows << " rows)\n";
  o << "  block density    64x64: " << fmt_double(s.block_density64, 4) << " (" << s.blocks64 << " tiles), 128x128: "
    << fmt_double(s.block_density128, 4) << " (" << s.blocks128 << " tiles)\n";
  o << "  metadata bytes   (int32 indices)\n";
  auto line = [&](const char* n, int64_t b) {
    const auto digits = static_cast<int64_t>(std::to_string(b).size());  // may pass 12: no unsigned wrap
    o << "    " << n << std::string(14 - std::string(n).size(), ' ') << std::string(static_cast<size_t>(std::max<int64_t>(1, 12 - digits)), ' ')
      << b << "  " << human_bytes(b) << "\n";
  };
  line("ACSR", s.bytes_acsr);
  line("CSR", s.bytes_csr);
  line("BSR-64", s.bytes_bsr64);
  line("BSR-128", s.bytes_bsr128);
  line("BlockMask-128", s.bytes_blockmask128);
  o << "  segments:\n";
  int shown = 0;
  for (const Segment& g : a.segments) {
    if (shown++ >= max_segments) {
      o << "    ... " << a.segments.size() - static_cast<size_t>(max_segments) << " more\n";
      break;
    }
    o << "    " << segment_line(g) << "\n";
  }
  return o.str();
}

nlohmann::json analysis_json(const Problem& p, const Acsr&, const AnalysisStats& s) {
  nlohmann::json j;
  j["name"] = p.name;
  j["seq_len"] = p.seq_len;
  j["kv_len"] = p.kv_len;
  j["head_dim"] = p.head_dim;
  j["heads"] = p.heads;
  j["kv_heads"] = p.kv_heads;
  j["q_offset"] = p.q_offset;
  j["batch"] = p.batch;
  j["dtype"] = dtype_name(p.dtype);
  j["causal"] = p.causal;
  j["nnz"] = s.nnz;
  j["density"] = s.density;
  j["empty_rows"] = s.empty_rows;
  j["max_row_nnz"] = s.nnz_row_max;
  j["runs_per_row"] = {{"max", s.runs_max}, {"mean", s.runs_mean}};
  j["segments"] = {{"total", s.segments}, {"affine", s.affine_segments}, {"tabulated", s.tabulated_segments},
                   {"tabulated_rows", s.tabulated_rows}};
  j["metadata_bytes"] = {{"acsr", s.bytes_acsr}, {"csr", s.bytes_csr}, {"bsr64", s.bytes_bsr64},
                         {"bsr128", s.bytes_bsr128}, {"blockmask128", s.bytes_blockmask128}};
  j["block_density"] = {{"64", s.block_density64}, {"128", s.block_density128}};
  j["blocks"] = {{"64", s.blocks64}, {"128", s.blocks128}};
  j["tensor_bytes"] = tensor_bytes(p);
  return j;
}

void write_coo(const Acsr& a, const std::string& path) {
  write_atomically(path, [&](std::ofstream& o) {
    std::string buf;
    char num[48];
    for (int64_t i = 0; i < a.seq_len; ++i) {
      for (const Run& r : a.row(i))
        for (int64_t k = 0; k < r.count; ++k) {
          int n = std::snprintf(num, sizeof num, "%lld %lld\n", static_cast<long long>(i),
                                static_cast<long long>(r.start + k * r.stride));
          buf.append(num, static_cast<size_t>(n));
        }
      if (buf.size() > (1u << 20)) {
        o.write(buf.data(), static_cast<std::streamsize>(buf.size()));
        buf.clear();
      }
    }
    o.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  });
}

void write_picture(const Problem& p, const Acsr& a, const AnalysisStats& s, const std::string& path, int max_cells) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (ext != ".svg" && ext != ".png") throw Error("", "-o", "expected an output file ending in .svg or .png, got " + path);
  Grid g = density_grid(p, a, max_cells);
  write_atomically(path, [&](std::ofstream& o) {
    if (ext == ".svg") write_svg(p, s, g, o);
    else o << render_png(p, s, g);
  });
}

}  // namespace splat
