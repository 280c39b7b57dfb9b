#include "libsplat/compile/emit.h"

#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/codegen/device_code.h"
#include "libsplat/compile/nvrtc.h"

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

}  // namespace

EmitResult emit(const Problem& p, const EmitOptions& o, const std::string& out_dir) {
  if (o.target != "cuda" && o.target != "ptx") throw Error("", "--target", "expected cuda or ptx, got " + o.target);
  try {
    parse_arch(o.arch);
  } catch (const std::invalid_argument& e) {
    throw Error("", "--arch", e.what());
  }
  Acsr acsr = analyze(p);
  CodegenOptions co;
  co.fused = o.fused;
  co.pipeline = o.pipeline;
  co.arch = o.arch;
  const ResolvedTuning tuning = resolve_tuning(p, o.arch, o.tuning, o.cache);
  co.tuning = tuning.tuning;
  GeneratedModule mod = generate(p, acsr, co);
  // The .cu holds the device headers' texts in place of its #include lines (one self-contained file
  // for nvcc), and it is that text which is compiled here: what is written is known to build.
  const std::string source = o.target == "cuda" ? inline_device_headers(mod.source) : mod.source;
  CompileResult ptx = nvrtc_compile(source, p.name + ".cu", o.arch, CompileTarget::Ptx, o.nvrtc_cache);
  if (!ptx.log.empty()) spdlog::warn("NVRTC: {}", ptx.log);

  std::vector<std::pair<std::string, std::string>> files;
  files.push_back(o.target == "cuda" ? std::pair{p.name + ".cu", source} : std::pair{p.name + ".ptx", ptx.image});
  if (!mod.table.empty())
    files.push_back({p.name + ".table.bin",
                     std::string(reinterpret_cast<const char*>(mod.table.data()), mod.table.size() * sizeof(int32_t))});
  std::vector<std::string> names;
  for (const auto& f : files) names.push_back(f.first);
  names.push_back("manifest.json");
  nlohmann::json m = manifest(p, mod, o.target, o.arch, names);
  m["table_file"] = mod.table.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.name + ".table.bin");
  m["nvrtc"] = nvrtc_version();
  const std::string key = tuning_key(p, o.arch);
  m["tuning"] = {{"values", format_tuning(tuning.tuning)}, {"source", tuning.source}, {"cache_key", key}};
  files.push_back({"manifest.json", m.dump(2) + "\n"});
  write_all(out_dir, files);

  EmitResult r;
  for (const auto& f : files) r.files.push_back((fs::path(out_dir) / f.first).string());
  r.tuning = tuning;
  r.selection = "tuning: " + (tuning.tuning == KernelTuning{} ? std::string("the defaults") : format_tuning(tuning.tuning)) +
                " (" + tuning.source + "; cache key " + key + ")\n" + explain(mod.selection);
  return r;
}

}  // namespace splat
