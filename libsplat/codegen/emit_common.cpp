#include <cstdio>

#include "libsplat/codegen/emit.h"

namespace splat::emit {
namespace {

const char* elt_type(DType t) {
  switch (t) {
    case DType::FP32:
    case DType::TF32: return "float";
    case DType::FP16: return "f16_t";
    case DType::BF16: return "bf16_t";
  }
  return "float";
}

const char* flag(bool b) { return b ? "true" : "false"; }

}  // namespace

Context make_context(const Problem& p, const Acsr& acsr, const Structure& st, const Plan& plan, const Selection& sel) {
  return Context{p, acsr, st, plan, sel, elt_type(p.dtype), p.scale * 1.4426950408889634};
}

std::string f32_literal(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9ef", x);
  return buf;
}

void head_defines(std::ostream& s, const Problem& p) {
  if (p.varlen || !p.group_heads.empty())
    s << "#define SPLAT_HEADS " << p.heads << "\n#define SPLAT_KV_HEADS " << p.kv_heads << "\n";
  if (!p.group_heads.empty()) {
    s << "#define SPLAT_HEAD_GROUP " << p.group_heads.size() << "  // the query heads of this module's grid.y\n#define SPLAT_HEAD_IDS ";
    for (size_t k = 0; k < p.group_heads.size(); ++k) s << (k ? ", " : "") << p.group_heads[k];
    s << "\n";
  }
}

std::string engine_type(const Context& c, const EngineConfig& e) {
  const std::string& T = c.elt;
  const std::string dims = "SPLAT_HD, SPLAT_SEQ, SPLAT_KV, ";
  switch (e.kind) {
    case EngineKind::Wgmma:
      // <T, HD, SEQ, KV, STAGES, CHK, QS[, TMA]>
      return "WgmmaEngine<" + T + ", " + dims + std::to_string(e.stages) + ", " + std::to_string(e.sum_checks) + ", " +
             flag(e.q_shared) + (e.tma ? ", true>" : ">");
    case EngineKind::MmaTf32: return "MmaTf32Engine<" + dims + std::to_string(e.stages) + ">";
    case EngineKind::MmaTf32x3: return "MmaTf32x3Engine<" + dims + std::to_string(e.stages) + ">";
    case EngineKind::Mma:
      // <T, HD, SEQ, KV, MW, STAGES, BC>
      return "MmaEngine<" + T + ", " + dims + std::to_string(e.warp_rows / 16) + ", " + std::to_string(e.stages) + ", " +
             std::to_string(e.key_tile) + ">";
    case EngineKind::Decode:
    case EngineKind::CudaCores: break;
  }
  return "";
}

std::string engine_comment(const EngineConfig& e, bool deferred_pv) {
  if (e.kind == EngineKind::Wgmma)
    return "1 warpgroup(s) of 4 warps x 16 rows, " + std::to_string(e.stages) + (e.tma ? " stages" : " cp.async stages") +
           " (128-byte swizzle), 64-key softmax steps, lazy O rescale" +
           (e.sum_checks ? ", checked row sums instead of row maxima" : "") + (e.q_shared ? ", Q in shared memory" : "") +
           ", no barrier before stage refills" +
           (e.tma ? ", K/V stages loaded by TMA" : ", copies waited for before the next load") +
           (deferred_pv ? ", each P.V waited for with the next tile's S" : "");
  return std::to_string(e.warp_rows) + " rows per warp, " + std::to_string(e.stages) + " cp.async stages, " +
         std::to_string(e.key_tile) + "-key softmax steps";
}

std::string entry(const Context& c, const std::string& name, int block, int min_blocks) {
  return "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) +
         (min_blocks > 0 ? ", " + std::to_string(min_blocks) : std::string()) + ") " + name +
         "(const void* q, const void* k, const void* v, void* o, float* ws, float* scores, const int* table, const void* tmaps" +
         (c.p.varlen ? ", const int* cu_seqlens" : "") + (c.lse ? ", float* lse" : "") + ") {\n";
}

std::string tensor_args(const Context& c) {
  const std::string& T = c.elt;
  return "static_cast<const " + T + "*>(q), static_cast<const " + T + "*>(k), static_cast<const " + T +
         "*>(v), static_cast<" + T + "*>(o)";
}

}  // namespace splat::emit
