#include "libsplat/codegen/codegen.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

#include "libsplat/analysis/structure.h"
#include "libsplat/codegen/emit.h"

namespace splat {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// "fnv1a64:<16 hex>" of the problem's shape and the ACSR.
std::string pattern_hash(const Problem& p, const Acsr& a) {
  std::ostringstream o;
  o << "seq " << a.seq_len << " kv " << a.kv_len << " d " << p.head_dim << " dtype " << dtype_name(p.dtype) << " scale "
    << emit::f32_literal(p.scale) << "\n";
  if (p.kv_heads != p.heads) o << "kv_group " << p.heads / p.kv_heads << "\n";  // the code reads K/V by group
  if (!p.group_heads.empty()) {  // a head group's module maps grid.y to its heads
    o << "heads " << p.heads << " group";
    for (int64_t h : p.group_heads) o << " " << h;
    o << "\n";
  }
  for (const Segment& s : a.segments) {
    o << "seg " << s.row_begin << " " << s.row_end << " " << s.row_stride << " " << s.tabulated << "\n";
    for (const AffineRun& r : s.runs)
      o << " run " << r.start_slope << " " << r.start_offset << " " << r.stride << " " << r.count_slope << " "
        << r.count_offset << " " << r.den << "\n";
    for (int64_t x : s.row_ptr) o << " p" << x;
    for (const Run& r : s.table) o << " t" << r.start << "," << r.stride << "," << r.count;
    o << "\n";
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "fnv1a64:%016llx", static_cast<unsigned long long>(fnv1a(o.str())));
  return buf;
}

// The pipeline's compressed row offsets (int64, 8-byte aligned) appended to the table; returns their
// word offset (-1 without the pipeline). Sets the module's most runs per row.
int64_t append_row_offsets(const Problem& p, const Acsr& acsr, const CodegenOptions& opt, GeneratedModule& mod) {
  std::vector<int64_t> offsets(static_cast<size_t>(p.seq_len) + 1, 0);
  for (int64_t i = 0; i < p.seq_len; ++i) {
    std::vector<Run> runs = acsr.row(i);
    mod.max_row_runs = std::max<int64_t>(mod.max_row_runs, static_cast<int64_t>(runs.size()));
    int64_t n = 0;
    for (const Run& r : runs) n += r.count;
    offsets[static_cast<size_t>(i) + 1] = offsets[static_cast<size_t>(i)] + n;
  }
  if (!opt.pipeline) return -1;
  if (mod.max_row_runs > 32) throw Error(p.file, "pattern", "the pipeline supports at most 32 runs per row");
  if (mod.table.size() % 2) mod.table.push_back(0);
  const int64_t word = static_cast<int64_t>(mod.table.size());
  for (int64_t x : offsets) {
    mod.table.push_back(static_cast<int32_t>(static_cast<uint64_t>(x) & 0xffffffffu));
    mod.table.push_back(static_cast<int32_t>(static_cast<uint64_t>(x) >> 32));
  }
  return word;
}

// Fused state handed from pass to pass [seq_len][head_dim + 2], then the split-KV partials
// [slots * 64][head_dim + 2], which start at a multiple of 4 floats (split_region in
// online_softmax.cuh): 4 floats per batch*heads more cover that rounding of the whole state.
int64_t workspace_floats(const Problem& p, const Plan& plan, const CodegenOptions& opt) {
  int max_slots = 0;
  for (const PlanPass& pass : plan.passes) max_slots = std::max(max_slots, pass.slots);
  if (!opt.fused || (plan.passes.size() <= 1 && max_slots == 0)) return 0;
  const int64_t state = p.seq_len * (p.head_dim + 2);
  if (max_slots == 0) return state;
  return state + 4 + int64_t{64} * max_slots * (p.head_dim + 2);
}

void emit_fused(std::ostream& s, const emit::Context& c, const KernelSpec& k) {
  switch (k.family()) {
    case KernelFamily::Table: emit::table_pass(s, c, k); break;
    case KernelFamily::Band: emit::band(s, c, k); break;
    case KernelFamily::BandWithGlobals: emit::band_with_globals(s, c, k); break;
    case KernelFamily::Lattice: emit::lattice(s, c, k); break;
    case KernelFamily::Combine: emit::combine(s, c, k); break;
  }
}

KernelDesc launch_of(const KernelSpec& k) {
  KernelDesc d;
  d.name = k.name;
  d.role = k.role;
  d.grid_x = k.grid_x;
  d.block = k.block;
  d.smem_dynamic = k.smem;
  d.programmatic = k.programmatic;
  return d;
}

}  // namespace

GeneratedModule generate(const Problem& p, const Acsr& acsr, const CodegenOptions& options) {
  if (acsr.seq_len != p.seq_len || acsr.kv_len != p.kv_len) throw std::invalid_argument("ACSR and problem sizes differ");
  if (!p.head_groups.empty()) throw std::invalid_argument("generate: per-head patterns are generated one head group at a time");
  CodegenOptions opt = options;
  if (p.varlen) {  // a packed variable-length batch: the fused kernels only
    if (!opt.fused)
      throw Error(p.file, "varlen", "the pipeline kernels do not take packed variable-length batches (--kernel fused)");
    opt.pipeline = false;
  }
  GeneratedModule mod;
  mod.name = p.name;
  mod.varlen = p.varlen.has_value();
  mod.save_lse = opt.save_lse;
  // 1. Analysis: the structures with closed-form kernels (bands, lattices) and the global keys.
  const Structure structure = analyze_structure(acsr);
  // 2. Plan: row tiles of 64 rows and key tiles of 64 keys over the ACSR.
  mod.plan = make_plan(acsr, structure, plan_shape(p, structure, decode_engine(p, opt.tuning.decode)));
  // 3. Select: the engine and one KernelSpec per fused entry point.
  mod.selection = select_kernels(p, structure, mod.plan, opt);
  if (opt.pipeline && p.head_dim > kPipelineMaxHeadDim)
    throw Error(p.file, "head_dim",
                "the pipeline keeps a query row in shared memory: head_dim at most " + std::to_string(kPipelineMaxHeadDim) +
                    ", got " + std::to_string(p.head_dim));
  const Selection& sel = mod.selection;
  mod.engine = engine_name(sel.engine.kind);
  mod.tensor_cores = sel.engine.tensor_cores;
  // 4. Data: the device table (plan tables, pipeline offsets), workspace and score sizes.
  mod.nnz = mod.plan.nnz;
  mod.table = mod.plan.table;
  const int64_t offsets_word = append_row_offsets(p, acsr, opt, mod);
  mod.scores_floats_per_bh = opt.pipeline ? mod.plan.nnz : 0;
  mod.workspace_floats_per_bh = workspace_floats(p, mod.plan, opt);
  mod.pattern_hash = pattern_hash(p, acsr);
  // 5. Emit: header and device code, the plan's items, each fused entry point, the pipeline.
  emit::Context c = emit::make_context(p, acsr, structure, mod.plan, sel);
  c.lse = opt.save_lse;
  std::ostringstream s;
  emit::header(s, c, mod.pattern_hash, mod.max_row_runs);
  emit::items(s, c);
  for (const KernelSpec& k : sel.fused) {
    emit_fused(s, c, k);
    mod.fused.push_back(launch_of(k));
  }
  if (opt.pipeline) mod.pipeline = emit::pipeline(s, c, mod.table, offsets_word);
  if (sel.tma) mod.tensor_maps = emit::tensor_maps(p, sel.map_period, sel.map_width);
  mod.source = s.str();
  return mod;
}

}  // namespace splat
