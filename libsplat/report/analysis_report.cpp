// analyze output: the text report, the JSON object and the COO dump (show: picture.cpp).
#include "libsplat/report/analysis_report.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "libsplat/report/atomic_file.h"

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

// "(slope*i + offset)/den" printed compactly: "i-256", "0", "2*i+3", "(i+514)/2" (v: the variable).
std::string affine_expr(int64_t slope, int64_t offset, int64_t den, char v = 'i') {
  std::string s;
  if (slope != 0) {
    const std::string x(1, v);
    s = slope == 1 ? x : slope == -1 ? "-" + x : std::to_string(slope) + "*" + x;
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

// what: "rows" (query rows i) or "keys" (the column ACSR's rows, keys j).
std::string segment_line(const Segment& g, const std::string& what = "rows") {
  const char v = what == "keys" ? 'j' : 'i';
  std::string s = what + " [" + std::to_string(g.row_begin) + ", " + std::to_string(g.row_end) + ")";
  if (g.row_stride != 1) s += " step " + std::to_string(g.row_stride);
  if (g.tabulated) return s + ": table of " + std::to_string(g.table.size()) + " runs";
  if (g.runs.empty()) return s + ": empty";
  s += ":";
  for (size_t k = 0; k < g.runs.size(); ++k) {
    const AffineRun& a = g.runs[k];
    s += (k ? " | " : " ") + std::string("start ") + affine_expr(a.start_slope, a.start_offset, a.den, v) + ", stride " +
         std::to_string(a.stride) + ", count " + affine_expr(a.count_slope, a.count_offset, a.den, v);
  }
  return s;
}

}  // namespace

std::string analysis_text(const Problem& p, const Acsr& a, const AnalysisStats& s, int max_segments) {
  std::ostringstream o;
  o << p.name << ": seq_len " << p.seq_len << ", kv_len " << p.kv_len << ", head_dim " << p.head_dim << ", heads "
    << p.heads;
  if (p.kv_heads != p.heads) o << " (kv_heads " << p.kv_heads << ")";
  o << ", batch " << p.batch << ", " << dtype_name(p.dtype) << (p.causal ? ", causal" : "");
  if (p.q_offset != 0) o << ", q_offset " << p.q_offset;
  o << "\n";
  if (!p.group_heads.empty()) {
    o << "  head group       heads";
    for (int64_t h : p.group_heads) o << " " << h;
    o << " of " << p.heads << " (per-head patterns)\n";
  }
  if (p.varlen) {
    int64_t total = 0;
    for (int64_t n : p.varlen->lengths) total += n;
    o << "  varlen           sequences of up to seq_len tokens packed, at most " << p.varlen->max_total_tokens
      << " tokens; the analysis is the longest sequence's";
    if (!p.varlen->lengths.empty()) o << "; lengths: " << p.varlen->lengths.size() << " sequences, " << total << " tokens";
    o << "\n";
  }
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
  if (p.varlen) j["varlen"] = {{"max_total_tokens", p.varlen->max_total_tokens}, {"lengths", p.varlen->lengths}};
  if (!p.group_heads.empty()) j["group_heads"] = p.group_heads;
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

std::string columns_text(const Acsr& c, int max_segments) {
  int affine = 0;
  int64_t tab_rows = 0;
  for (const Segment& g : c.segments) {
    affine += !g.tabulated;
    if (g.tabulated) tab_rows += g.rows();
  }
  std::ostringstream o;
  o << "  column ACSR      " << c.segments.size() << " segments (" << affine << " affine, " << c.segments.size() - affine
    << " tabulated over " << tab_rows << " keys), widest column " << c.max_row_nnz() << " rows, " << c.metadata_bytes()
    << " B: the query rows of each key (a backward pass's dK/dV walk)\n";
  int shown = 0;
  for (const Segment& g : c.segments) {
    if (shown++ == max_segments) {
      o << "    ... " << c.segments.size() - max_segments << " more\n";
      break;
    }
    o << "    " << segment_line(g, "keys") << "\n";
  }
  return o.str();
}

nlohmann::json columns_json(const Acsr& c) {
  int64_t affine = 0, tab_rows = 0;
  for (const Segment& g : c.segments) {
    affine += !g.tabulated;
    if (g.tabulated) tab_rows += g.rows();
  }
  return {{"segments", c.segments.size()}, {"affine", affine}, {"tabulated", static_cast<int64_t>(c.segments.size()) - affine},
          {"tabulated_keys", tab_rows}, {"max_column_nnz", c.max_row_nnz()}, {"metadata_bytes", c.metadata_bytes()}};
}

}  // namespace splat
