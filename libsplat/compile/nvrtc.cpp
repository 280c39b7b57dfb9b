#include "libsplat/compile/nvrtc.h"

#include <nvrtc.h>

#include <chrono>
#include <memory>
#include <regex>
#include <vector>

#include "libsplat/device/embedded.h"

namespace splat {
namespace {

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) throw CompileError(std::string(what) + ": " + nvrtcGetErrorString(r));
}

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

}  // namespace

int parse_arch(const std::string& arch) {
  static const std::regex re("sm_([0-9]{2,3})a?");
  std::smatch m;
  if (!std::regex_match(arch, m, re)) throw std::invalid_argument("bad architecture '" + arch + "' (expected sm_80, sm_90, ...)");
  int cc = std::stoi(m[1]);
  if (cc < 80) throw std::invalid_argument("architecture " + arch + " is not supported (sm_80 or newer: mma.sync, cp.async)");
  return cc;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

CompileResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                            CompileTarget target) {
  parse_arch(arch);
  auto t0 = std::chrono::steady_clock::now();
  Program prog;
  // Every device header, by the name the source includes it by (NVRTC cites that name and the line).
  std::vector<const char*> texts, names;
  for (const EmbeddedFile& f : device_files()) {
    texts.push_back(f.text);
    names.push_back(f.name);
  }
  check(nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), static_cast<int>(texts.size()), texts.data(),
                           names.data()),
        "nvrtcCreateProgram");
  // PTX for the virtual architecture (JIT-able by newer drivers), CUBIN for the real one.
  std::string arch_opt = "--gpu-architecture=" + (target == CompileTarget::Ptx ? "compute_" + arch.substr(3) : arch);
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--extra-device-vectorization"};
  nvrtcResult rc = nvrtcCompileProgram(prog.p, 3, opts);
  size_t log_size = 0;
  nvrtcGetProgramLogSize(prog.p, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nvrtcGetProgramLog(prog.p, log.data());
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (rc != NVRTC_SUCCESS)
    throw CompileError("NVRTC failed to compile " + name + " for " + arch + " (" + nvrtcGetErrorString(rc) + "):\n" + log);
  CompileResult out;
  out.log = log;
  size_t n = 0;
  if (target == CompileTarget::Ptx) {
    check(nvrtcGetPTXSize(prog.p, &n), "nvrtcGetPTXSize");
    out.image.resize(n);
    check(nvrtcGetPTX(prog.p, out.image.data()), "nvrtcGetPTX");
    while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
  } else {
    check(nvrtcGetCUBINSize(prog.p, &n), "nvrtcGetCUBINSize");
    out.image.resize(n);
    check(nvrtcGetCUBIN(prog.p, out.image.data()), "nvrtcGetCUBIN");
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace splat
