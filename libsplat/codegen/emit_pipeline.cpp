#include <sstream>
#include <stdexcept>

#include "libsplat/codegen/emit.h"

namespace splat::emit {

std::vector<KernelDesc> pipeline(std::ostream& s, const Context& c, std::vector<int32_t>& table, int64_t offsets_word) {
  const Problem& p = c.p;
  const Plan& plan = c.plan;
  s << "\n// Pipeline: segments {row_begin, row_stride, first_block, run_begin, run_count (<0: tabulated item -n-1)}\n";
  std::ostringstream segs, runs, pitems;
  int64_t first_block = 0, nruns = 0, nseg = 0, npitems = 0;
  // With global keys factored out, the plan's items describe the rows without them: the
  // pipeline's tabulated segments then get their own items and table words.
  const bool own_items = plan.global_keys.has_value();
  for (size_t si = 0; si < c.acsr.segments.size(); ++si) {
    const Segment& sg = c.acsr.segments[si];
    if (sg.rows() == 0) continue;
    int64_t run_count = static_cast<int64_t>(sg.runs.size()), run_begin = nruns;
    if (sg.tabulated && own_items) {
      int64_t rp = 0, rr = 0;
      append_table_rows(sg, table, rp, rr);
      pitems << "  {" << sg.row_begin << ", " << sg.row_end << ", " << sg.row_stride << ", 0, 0, 1, 0, 0, 1, 1, " << rp << ", "
             << rr << "},  // segment " << si << "\n";
      run_count = -(npitems++) - 1;
    } else if (sg.tabulated) {
      run_count = 0;
      for (size_t k = 0; k < plan.items.size(); ++k)
        if (plan.items[k].tabulated && plan.items[k].segment == static_cast<int>(si)) run_count = -static_cast<int64_t>(k) - 1;
    } else {
      for (const AffineRun& a : sg.runs) {
        runs << "  {" << a.start_slope << ", " << a.start_offset << ", " << a.stride << ", " << a.count_slope << ", "
             << a.count_offset << ", " << a.den << "},\n";
        ++nruns;
      }
    }
    segs << "  {" << sg.row_begin << ", " << sg.row_stride << ", " << first_block << ", " << run_begin << ", " << run_count
         << "},  // segment " << si << ": " << sg.rows() << " rows\n";
    first_block += sg.rows();
    ++nseg;
  }
  if (first_block != p.seq_len) throw std::invalid_argument("ACSR segments do not cover every row exactly once");
  if (nruns == 0) runs << "  {0, 0, 1, 0, 0, 1},\n";
  s << "__device__ const Seg kSegs[] = {\n" << segs.str() << "};\n";
  s << "__device__ const SegRun kSegRuns[] = {\n" << runs.str() << "};\n";
  if (npitems > 0)
    s << "// The pipeline's tabulated segments (the fused plan's items omit the global keys).\n"
      << "__device__ const Item kPipeItems[] = {\n" << pitems.str() << "};\n";
  const std::string pipe_items = npitems > 0 ? "kPipeItems" : "kItems";
  const std::string seg_args = "kSegs, " + std::to_string(nseg);
  const std::string off = std::to_string(offsets_word) + "ll, " + std::to_string(plan.nnz) + "ll";
  const std::string& T = c.elt;
  const std::string lse_param = c.lse ? ", float* lse" : "";
  if (c.lse) s << "// lse: saved by splat_softmax; the other entry points take it and leave it.\n";
  s << "extern \"C\" __global__ void __launch_bounds__(128) splat_sddmm(const void* q, const void* k, const void* v, "
       "void* o, float* ws, float* scores, const int* table, const void* tmaps" << lse_param << ") {\n"
    << "  (void)v; (void)o; (void)ws; (void)tmaps;" << (c.lse ? " (void)lse;" : "") << "\n"
    << "  sddmm_row<" << T << ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV>(" << seg_args << ", kSegRuns, " << pipe_items << ", table, " << off
    << ", " << f32_literal(p.scale) << ", static_cast<const " << T << "*>(q), static_cast<const " << T << "*>(k), scores);\n}\n";
  s << "extern \"C\" __global__ void __launch_bounds__(128) splat_softmax(const void* q, const void* k, const void* v, "
       "void* o, float* ws, float* scores, const int* table, const void* tmaps" << lse_param << ") {\n"
    << "  (void)q; (void)k; (void)v; (void)o; (void)ws; (void)tmaps;\n"
    << "  softmax_row<SPLAT_SEQ>(" << seg_args << ", table, " << off << ", scores, " << c.lse_arg() << ");\n}\n";
  s << "extern \"C\" __global__ void __launch_bounds__(128) splat_spmm(const void* q, const void* k, const void* v, "
       "void* o, float* ws, float* scores, const int* table, const void* tmaps" << lse_param << ") {\n"
    << "  (void)q; (void)k; (void)ws; (void)tmaps;" << (c.lse ? " (void)lse;" : "") << "\n"
    << "  spmm_row<" << T << ", SPLAT_HD, SPLAT_SEQ, SPLAT_KV>(" << seg_args << ", kSegRuns, " << pipe_items << ", table, " << off
    << ", scores, static_cast<const " << T << "*>(v), static_cast<" << T << "*>(o));\n}\n";
  std::vector<KernelDesc> out;
  for (const auto& [name, role] : {std::pair{"splat_sddmm", "r-sddmm: scaled Q.K^T at kept positions, compressed"},
                                   std::pair{"splat_softmax", "r-softmax: per row over its slots, in place"},
                                   std::pair{"splat_spmm", "r-spmm: O = P.V from the compressed probabilities"}}) {
    KernelDesc kd;
    kd.name = name;
    kd.role = role;
    kd.grid_x = p.seq_len;
    out.push_back(kd);
  }
  return out;
}

}  // namespace splat::emit
