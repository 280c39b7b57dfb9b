#include "libsplat/compile/emit.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/device_code.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/compile/resources.h"

namespace fs = std::filesystem;

namespace splat {
namespace {

// All files or none: each goes to a temporary name first, and only when every one is written are
// they renamed into place.
void write_all(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(dir);
  std::vector<std::pair<fs::path, fs::path>> done;
  try {
    for (const auto& [name, data] : files) {
      fs::path tmp = dir / ("." + name + ".tmp"), dst = dir / name;
      done.push_back({tmp, dst});
      std::ofstream f(tmp, std::ios::binary);
      f.write(data.data(), static_cast<std::streamsize>(data.size()));
      f.close();
      if (!f) throw std::runtime_error("cannot write " + tmp.string());
    }
  } catch (...) {
    std::error_code ec;
    for (auto& [tmp, dst] : done) fs::remove(tmp, ec);
    throw;
  }
  for (auto& [tmp, dst] : done) fs::rename(tmp, dst);
}

// Each kernel of the manifest gets what ptxas made of it and the occupancy of its launch; the
// report's lines, one per kernel.
std::string add_resources(nlohmann::json& m, const GeneratedModule& mod, const std::vector<KernelResources>& res,
                          const std::string& arch) {
  std::ostringstream text;
  for (const char* kind : {"fused", "pipeline"}) {
    const std::vector<KernelDesc>& ks = std::string(kind) == "fused" ? mod.fused : mod.pipeline;
    for (size_t i = 0; i < ks.size(); ++i) {
      const KernelDesc& k = ks[i];
      const auto r = std::find_if(res.begin(), res.end(), [&](const KernelResources& x) { return x.name == k.name; });
      if (r == res.end()) throw std::runtime_error("ptxas reported nothing for " + k.name);
      const int64_t shared = r->shared_static_bytes + k.smem_dynamic;
      const std::optional<Occupancy> occ = occupancy(arch, k.block, r->registers, shared);
      nlohmann::json& e = m["kernels"][kind][i];
      e["registers"] = r->registers;
      e["spill_stores_bytes"] = r->spill_stores_bytes;
      e["spill_loads_bytes"] = r->spill_loads_bytes;
      e["local_bytes"] = r->local_bytes;
      e["shared_memory_static_bytes"] = r->shared_static_bytes;
      e["max_blocks_per_sm"] = occ ? nlohmann::json(occ->max_blocks_per_sm) : nlohmann::json(nullptr);
      e["occupancy"] = occ ? nlohmann::json(occ->occupancy) : nlohmann::json(nullptr);
      e["occupancy_limit"] = occ ? nlohmann::json(occ->limit) : nlohmann::json(nullptr);
      text << k.name << ": " << r->registers << " registers, spills " << r->spill_stores_bytes << " B stored / "
           << r->spill_loads_bytes << " B loaded, " << r->local_bytes << " B local, " << r->shared_static_bytes
           << " B static + " << k.smem_dynamic << " B dynamic shared memory, block " << k.block;
      if (occ)
        text << ": " << occ->max_blocks_per_sm << (occ->max_blocks_per_sm == 1 ? " block" : " blocks") << " per SM ("
             << static_cast<int>(occ->occupancy * 100 + 0.5) << "% occupancy, bound by " << occ->limit << ")";
      else
        text << " (occupancy: " << arch << "'s SM limits are not known to splatc)";
      text << "\n";
    }
  }
  return text.str();
}

// One module's files (its manifest not among them), manifest and reports.
struct ModuleOutput {
  std::vector<std::pair<std::string, std::string>> files;
  nlohmann::json manifest;
  std::string resources, selection;
  ResolvedTuning tuning;
};

ModuleOutput emit_module(const Problem& p, const EmitOptions& o, bool with_manifest_file) {
  Acsr acsr = analyze(p);
  CodegenOptions co;
  co.fused = o.fused;
  co.pipeline = o.pipeline;
  co.arch = o.arch;
  co.save_lse = o.save_lse;
  const ResolvedTuning tuning = resolve_tuning(p, o.arch, o.tuning, o.cache);
  co.tuning = tuning.tuning;
  GeneratedModule mod = generate(p, acsr, co);
  // The .cu holds the device headers' texts in place of its #include lines (one self-contained file
  // for nvcc), and it is that text which is compiled here: what is written is known to build.
  const std::string source = o.target == "cuda" ? inline_device_headers(mod.source) : mod.source;
  CompileResult ptx = nvrtc_compile(source, p.name + ".cu", o.arch, CompileTarget::Ptx, o.nvrtc_cache);
  if (!ptx.log.empty()) spdlog::warn("NVRTC: {}", ptx.log);
  // The CUBIN for the arch, with ptxas's report of each entry point (registers, spills, ...).
  const CompileResult cubin = nvrtc_compile(source, p.name + ".cu", o.arch, CompileTarget::Cubin, o.nvrtc_cache, true);

  ModuleOutput out;
  std::vector<std::pair<std::string, std::string>>& files = out.files;
  if (o.target == "cuda") files.push_back({p.name + ".cu", source});
  if (o.target == "ptx") files.push_back({p.name + ".ptx", ptx.image});
  if (o.target == "cubin") files.push_back({p.name + ".cubin", cubin.image});
  if (!mod.table.empty())
    files.push_back({p.name + ".table.bin",
                     std::string(reinterpret_cast<const char*>(mod.table.data()), mod.table.size() * sizeof(int32_t))});
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.first);
  if (with_manifest_file) names.push_back("manifest.json");
  nlohmann::json& m = out.manifest;
  m = manifest(p, mod, o.target, o.arch, names);
  m["table_file"] = mod.table.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.name + ".table.bin");
  m["nvrtc"] = nvrtc_version();
  const std::string key = tuning_key(p, o.arch);
  m["tuning"] = {{"values", format_tuning(tuning.tuning)}, {"source", tuning.source}, {"cache_key", key}};
  out.resources = add_resources(m, mod, parse_ptxas_report(cubin.log), o.arch);
  out.tuning = tuning;
  out.selection = "tuning: " +
                  (tuning.tuning == KernelTuning{} ? std::string("the defaults") : format_tuning(tuning.tuning)) + " (" +
                  tuning.source + "; cache key " + key + ")\n" + explain(mod.selection);
  return out;
}

// The backward module's files (NAME.bwd.*), its manifest section (with each kernel's resources)
// and the resources' report lines.
ModuleOutput emit_backward(const Problem& p, const EmitOptions& o) {
  check_backward(p);
  const BackwardModule mod = generate_backward(p, analyze(p), o.backward_tuning, o.arch);
  const std::string name = p.name + ".bwd";
  const std::string source = o.target == "cuda" ? inline_device_headers(mod.source) : mod.source;
  const CompileResult ptx = nvrtc_compile(source, name + ".cu", o.arch, CompileTarget::Ptx, o.nvrtc_cache);
  if (!ptx.log.empty()) spdlog::warn("NVRTC: {}", ptx.log);
  const CompileResult cubin = nvrtc_compile(source, name + ".cu", o.arch, CompileTarget::Cubin, o.nvrtc_cache, true);
  ModuleOutput out;
  if (o.target == "cuda") out.files.push_back({name + ".cu", source});
  if (o.target == "ptx") out.files.push_back({name + ".ptx", ptx.image});
  if (o.target == "cubin") out.files.push_back({name + ".cubin", cubin.image});
  if (!mod.table.empty())
    out.files.push_back({name + ".table.bin",
                         std::string(reinterpret_cast<const char*>(mod.table.data()), mod.table.size() * sizeof(int32_t))});
  std::vector<std::string> names;
  for (const auto& f : out.files) names.push_back(f.first);
  nlohmann::json& m = out.manifest;
  m = backward_manifest(mod, names);
  out.selection = explain_backward(mod);
  m["table_file"] = mod.table.empty() ? nlohmann::json(nullptr) : nlohmann::json(name + ".table.bin");
  const std::vector<KernelResources> res = parse_ptxas_report(cubin.log);
  std::ostringstream text;
  for (size_t i = 0; i < mod.kernels.size(); ++i) {
    const KernelDesc& k = mod.kernels[i];
    const auto r = std::find_if(res.begin(), res.end(), [&](const KernelResources& x) { return x.name == k.name; });
    if (r == res.end()) throw std::runtime_error("ptxas reported nothing for " + k.name);
    const std::optional<Occupancy> occ = occupancy(o.arch, k.block, r->registers, r->shared_static_bytes + k.smem_dynamic);
    nlohmann::json& e = m["kernels"][i];
    e["registers"] = r->registers;
    e["spill_stores_bytes"] = r->spill_stores_bytes;
    e["local_bytes"] = r->local_bytes;
    e["max_blocks_per_sm"] = occ ? nlohmann::json(occ->max_blocks_per_sm) : nlohmann::json(nullptr);
    text << k.name << ": " << r->registers << " registers, spills " << r->spill_stores_bytes << " B, " << r->local_bytes
         << " B local, " << k.smem_dynamic << " B dynamic shared memory";
    if (occ) text << ", " << occ->max_blocks_per_sm << " blocks per SM";
    text << "\n";
  }
  out.resources = text.str();
  return out;
}

// The manifest of a problem with per-head patterns: the problem and the parameters, then each head
// group's module manifest (problem.group_heads its heads) under head_groups.
nlohmann::json group_manifest(const Problem& p, std::vector<nlohmann::json> groups,
                              const std::vector<std::string>& files) {
  nlohmann::json m = groups.front();
  for (const char* k : {"kernels", "pattern_hash", "workspace_floats_per_bh", "scores_floats_per_bh", "table_words",
                        "table_file", "tensor_maps", "tensor_cores", "engine", "tile", "tuning", "backward"})
    m.erase(k);
  m["name"] = p.name;
  m["files"] = files;
  m["problem"].erase("group_heads");
  m["problem"].erase("nnz");
  m["problem"]["head_groups"] = groups.size();
  m["layout"] = std::string(p.varlen ? "packed variable-length batch: q, o: [total_tokens, heads, head_dim]; k, v: "
                                       "[total_tokens, kv_heads, head_dim]"
                                     : "q, o: [batch, heads, seq_len, head_dim]; k, v: [batch, kv_heads, kv_len, head_dim]") +
                "; row-major; query head h reads K/V head h / (heads / kv_heads); per-head patterns: each entry of "
                "head_groups is a module of its own serving the query heads of its problem.group_heads (its layout says "
                "how)";
  m["launch_order"] = "every head group's module in turn, each as its own launch_order says, with its own ws, scores, "
                      "table and tensor maps; the groups write disjoint heads of o and may run in any order or "
                      "concurrently; a group's backward section (--pass backward|both) likewise, after its forward, "
                      "writing that group's heads of dq, dk and dv";
  m["head_groups"] = std::move(groups);
  return m;
}

// "head group G (heads a b c):\n" before a group's report lines.
std::string group_title(const std::vector<Problem>& parts, size_t g) {
  std::string heads;
  for (int64_t h : parts[g].group_heads) heads += (heads.empty() ? "" : " ") + std::to_string(h);
  return "head group " + std::to_string(g) + " (heads " + heads + "):\n";
}

// --pass backward|both: the backward module, after the forward's (both: it saves the log-sum-exp);
// one manifest.json, the forward's with a "backward" section (backward only: the problem's facts).
// Per-head patterns: each head group's manifest under head_groups has its own "backward" section.
EmitResult emit_with_backward(const Problem& p, const EmitOptions& o, const std::string& out_dir) {
  check_backward(p);  // first: a problem it does not take fails before any work
  const std::vector<Problem> parts = head_group_problems(p);
  std::vector<ModuleOutput> bwd, fwd;
  for (const Problem& part : parts) bwd.push_back(emit_backward(part, o));
  EmitOptions fo = o;
  fo.save_lse = true;
  // --pass backward: the forward module gives the manifest its problem, layout and parameters only
  // (its files are not written), so a pattern the pipeline does not take (over 32 runs per row) is no error.
  if (o.pass == "backward") fo.pipeline = false;
  for (const Problem& part : parts) fwd.push_back(emit_module(part, fo, p.head_groups.empty()));
  std::vector<std::pair<std::string, std::string>> files;
  std::vector<nlohmann::json> groups;
  EmitResult r;
  for (size_t g = 0; g < parts.size(); ++g) {
    if (o.pass == "both") files.insert(files.end(), fwd[g].files.begin(), fwd[g].files.end());
    files.insert(files.end(), bwd[g].files.begin(), bwd[g].files.end());
    nlohmann::json written = nlohmann::json::array();  // this module's files (a head group's manifest lists them)
    if (o.pass == "both")
      for (const auto& f : fwd[g].files) written.push_back(f.first);
    for (const auto& f : bwd[g].files) written.push_back(f.first);
    nlohmann::json m = std::move(fwd[g].manifest);
    if (o.pass == "backward")
      for (const char* k : {"kernels", "workspace_floats_per_bh", "scores_floats_per_bh", "table_words", "table_file",
                            "tensor_maps", "tensor_cores", "engine", "tile", "tuning", "launch_order"})
        m.erase(k);
    m["files"] = std::move(written);
    m["backward"] = std::move(bwd[g].manifest);
    groups.push_back(std::move(m));
    const std::string title = p.head_groups.empty() ? std::string() : group_title(parts, g);
    r.resources += title + (o.pass == "both" ? fwd[g].resources : std::string()) + bwd[g].resources;
    r.selection += title + (o.pass == "both" ? fwd[g].selection : std::string()) + bwd[g].selection;
  }
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.first);
  names.push_back("manifest.json");
  nlohmann::json m = p.head_groups.empty() ? std::move(groups.front()) : group_manifest(p, std::move(groups), names);
  m["files"] = names;
  m["pass"] = o.pass;
  files.push_back({"manifest.json", m.dump(2) + "\n"});
  write_all(out_dir, files);
  for (const auto& f : files) r.files.push_back((fs::path(out_dir) / f.first).string());
  r.tuning = fwd.front().tuning;
  return r;
}

}  // namespace

EmitResult emit(const Problem& p, const EmitOptions& o, const std::string& out_dir) {
  if (o.target != "cuda" && o.target != "ptx" && o.target != "cubin")
    throw Error("", "--target", "expected cuda, ptx or cubin, got " + o.target);
  try {
    parse_arch(o.arch);
  } catch (const std::invalid_argument& e) {
    throw Error("", "--arch", e.what());
  }
  if (o.pass != "forward" && o.pass != "backward" && o.pass != "both")
    throw Error("", "--pass", "expected forward, backward or both, got " + o.pass);
  if (o.pass != "forward") return emit_with_backward(p, o, out_dir);
  const std::vector<Problem> parts = head_group_problems(p);
  std::vector<ModuleOutput> outs;
  for (const Problem& part : parts) outs.push_back(emit_module(part, o, p.head_groups.empty()));
  std::vector<std::pair<std::string, std::string>> files;
  for (ModuleOutput& x : outs)
    for (auto& f : x.files) files.push_back(std::move(f));
  EmitResult r;
  if (p.head_groups.empty()) {
    files.push_back({"manifest.json", outs.front().manifest.dump(2) + "\n"});
    r.resources = outs.front().resources;
    r.selection = outs.front().selection;
  } else {
    std::vector<std::string> names;
    for (const auto& f : files) names.push_back(f.first);
    names.push_back("manifest.json");
    std::vector<nlohmann::json> groups;
    for (size_t g = 0; g < outs.size(); ++g) {
      groups.push_back(std::move(outs[g].manifest));
      r.resources += group_title(parts, g) + outs[g].resources;
      r.selection += group_title(parts, g) + outs[g].selection;
    }
    files.push_back({"manifest.json", group_manifest(p, std::move(groups), names).dump(2) + "\n"});
  }
  write_all(out_dir, files);
  for (const auto& f : files) r.files.push_back((fs::path(out_dir) / f.first).string());
  r.tuning = outs.front().tuning;
  return r;
}

}  // namespace splat
