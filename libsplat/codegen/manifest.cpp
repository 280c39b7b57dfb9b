#include <algorithm>

#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/emit.h"
#include "trsplat/version.h"

namespace splat {

const char* kernel_kind_name(KernelKind k) { return k == KernelKind::Fused ? "fused" : "pipeline"; }

const std::vector<ParamDesc>& kernel_params() {
  static const std::vector<ParamDesc> params = {
      {"q", "const void*", "queries [batch, heads, seq_len, head_dim], row-major, problem dtype"},
      {"k", "const void*", "keys [batch, kv_heads, kv_len, head_dim]"},
      {"v", "const void*", "values [batch, kv_heads, kv_len, head_dim]"},
      {"o", "void*", "output [batch, heads, seq_len, head_dim]; rows with no kept key are zero"},
      {"ws", "float*", "fused multi-pass workspace: batch*heads*workspace_floats_per_bh floats (null if 0)"},
      {"scores", "float*", "pipeline compressed scores/probabilities: batch*heads*nnz floats (null for fused)"},
      {"table", "const int*", "device table (table.bin, int32 words; null when table_words is 0)"},
      {"tmaps", "const void*",
       "tensor maps (CUtensorMap, 128 bytes each, 64-byte aligned) of k and v for the TMA loads of fused kernels "
       "(manifest tensor_maps; null when it is empty)"},
  };
  return params;
}

const ParamDesc& varlen_param() {
  static const ParamDesc param = {
      "cu_seqlens", "const int*",
      "packed variable-length batch: sequence starts [sequences + 1], int32, device memory; sequence b is tokens "
      "cu_seqlens[b] .. cu_seqlens[b+1] - 1, cu_seqlens[0] = 0, each length at most seq_len, the last entry at most "
      "max_total_tokens"};
  return param;
}

// K, V as rows (unit-step walks), as [rows / 2][2][head_dim] (stride-2 walks: a box is 64 rows of
// one parity) and, for a lattice pass or blocks of global keys (period > 0), as
// [rows / period][period][head_dim] with boxes of 64 / width blocks of width rows (lattice: 1).
// A packed batch (band_pass_varlen): K and V as [max_total_tokens][kv_heads][head_dim], boxes of 64
// tokens of one K/V head; the kernels read no token past the batch's last, so a map may also be
// encoded over the batch's own token count.
std::vector<TensorMapDesc> emit::tensor_maps(const Problem& p, int64_t period, int64_t width) {
  const uint64_t rows = static_cast<uint64_t>(p.batch * p.kv_heads * p.kv_len), hd = static_cast<uint64_t>(p.head_dim);
  const uint64_t pitch = hd * 2;  // bf16/fp16 rows
  std::vector<TensorMapDesc> maps;
  if (p.varlen) {
    for (const char* t : {"k", "v"}) {
      TensorMapDesc m;
      m.tensor = t;
      const uint64_t kvh = static_cast<uint64_t>(p.kv_heads), tokens = static_cast<uint64_t>(p.varlen->max_total_tokens);
      m.dims = {hd, kvh, tokens};
      m.strides = {pitch, kvh * pitch};
      m.box = {static_cast<uint32_t>(std::min<uint64_t>(hd, 64)), 1, 64};
      maps.push_back(m);
    }
    return maps;
  }
  std::vector<uint64_t> steps = {1, 2};
  if (period > 0) steps.push_back(static_cast<uint64_t>(period));
  for (uint64_t step : steps)
    for (const char* t : {"k", "v"}) {
      TensorMapDesc m;
      m.tensor = t;
      // Boxes of 64 head columns (128 bytes, the swizzle's width): head_dim 128 loads two per tile.
      const uint32_t bw = static_cast<uint32_t>(std::min<uint64_t>(hd, 64));
      if (step == 1) {
        m.dims = {hd, rows};
        m.strides = {pitch};
        m.box = {bw, 64};
      } else {
        const uint32_t w = step == 2 ? 1u : static_cast<uint32_t>(width);
        m.dims = {hd, step, rows / step};
        m.strides = {pitch, step * pitch};
        m.box = {bw, w, 64 / w};
      }
      maps.push_back(m);
    }
  return maps;
}

const ParamDesc& lse_param() {
  static const ParamDesc param = {
      "lse", "float*",
      "softmax statistics for a backward pass: each row's natural log-sum-exp of its scaled kept scores, fp32, "
      "laid out as q's rows without head_dim ([batch, heads, seq_len]; a packed batch: [total_tokens, heads]); -inf "
      "for a row with no kept key (its o row is zero); may be null"};
  return param;
}

namespace {

nlohmann::json tensor_maps_json(const Problem& p, const GeneratedModule& mod) {
  nlohmann::json a = nlohmann::json::array();
  for (const TensorMapDesc& m : mod.tensor_maps)
    a.push_back({{"tensor", m.tensor},
                 {"dims", m.dims},
                 {"strides_bytes", m.strides},
                 {"box", m.box},
                 {"element", dtype_name(p.dtype)},
                 {"swizzle", "128B"},
                 {"interleave", "none"},
                 {"oob_fill", "zero"}});
  return a;
}
}  // namespace

nlohmann::json manifest(const Problem& p, const GeneratedModule& mod, const std::string& target, const std::string& arch,
                        const std::vector<std::string>& files) {
  using nlohmann::json;
  auto kernels = [&](const std::vector<KernelDesc>& ks) {
    json a = json::array();
    for (const KernelDesc& k : ks)
      a.push_back({{"name", k.name},
                   {"role", k.role},
                   {"grid", {k.grid_x, mod.selection.grid_y, 1}},
                   {"block", {k.block, 1, 1}},
                   {"shared_memory_dynamic_bytes", k.smem_dynamic},
                   {"programmatic_launch", k.programmatic}});
    return a;
  };
  json params = json::array();
  for (size_t i = 0; i < kernel_params().size(); ++i) {
    const ParamDesc& d = kernel_params()[i];
    params.push_back({{"index", i}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  if (p.varlen) {
    const ParamDesc& d = varlen_param();
    params.push_back({{"index", params.size()}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  if (mod.save_lse) {
    const ParamDesc& d = lse_param();
    params.push_back({{"index", params.size()}, {"name", d.name}, {"type", d.type}, {"bytes", 8}, {"description", d.description}});
  }
  json problem = {{"seq_len", p.seq_len},
                  {"kv_len", p.kv_len},
                  {"head_dim", p.head_dim},
                  {"heads", p.heads},
                  {"kv_heads", p.kv_heads},
                  {"q_offset", p.q_offset},
                  {"batch", p.batch},
                  {"dtype", dtype_name(p.dtype)},
                  {"scale", p.scale},
                  {"causal", p.causal},
                  {"nnz", mod.nnz}};
  if (p.varlen) problem["varlen"] = {{"max_total_tokens", p.varlen->max_total_tokens}};
  if (!p.group_heads.empty()) problem["group_heads"] = p.group_heads;
  std::string layout =
      p.varlen ? "packed variable-length batch: q, o: [total_tokens, heads, head_dim]; k, v: [total_tokens, kv_heads, "
                 "head_dim]; row-major; sequence b is tokens cu_seqlens[b] .. cu_seqlens[b+1] - 1 and keeps the pattern's "
                 "rows and keys below its length; ws and scores count sequences*heads in place of batch*heads; query "
                 "head h reads K/V head h / (heads / kv_heads)"
               : "q, o: [batch, heads, seq_len, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim]; row-major; "
                 "query head h reads K/V head h / (heads / kv_heads)";
  if (!p.group_heads.empty())
    layout += std::string("; this module serves one head group (per-head patterns), the query heads problem.group_heads: "
                          "grid.y, ws and scores count ") + (p.varlen ? "sequences" : "batch") +
              "*group_heads in place of " + (p.varlen ? "sequences" : "batch") +
              "*heads, and block y serves query head group_heads[y % G] of " + (p.varlen ? "sequence" : "batch entry") +
              " y / G (G = len(group_heads))";
  return json{{"generator", std::string("splatc ") + TRSPLAT_VERSION},
              {"name", mod.name},
              {"pattern_hash", mod.pattern_hash},
              {"target", target},
              {"arch", arch},
              {"files", files},
              {"problem", problem},
              {"layout", layout},
              {"parameters", params},
              {"kernels", {{"fused", kernels(mod.fused)}, {"pipeline", kernels(mod.pipeline)}}},
              {"launch_order", "fused: every fused entry in order (passes hand state over through ws); an entry with "
                               "programmatic_launch may be launched with programmatic stream serialization "
                               "(cudaLaunchAttributeProgrammaticStreamSerialization) to start while the previous one "
                               "ends; pipeline: splat_sddmm, splat_softmax, splat_spmm"},
              {"workspace_floats_per_bh", mod.workspace_floats_per_bh},
              {"scores_floats_per_bh", mod.scores_floats_per_bh},
              {"table_words", mod.table.size()},
              {"tensor_maps", tensor_maps_json(p, mod)},
              {"tensor_cores", mod.tensor_cores},
              {"engine", mod.engine},
              {"tile", {{"rows", mod.plan.shape.br}, {"keys", mod.plan.shape.bc}, {"fill", mod.plan.tile_fill()}}}};
}

}  // namespace splat
