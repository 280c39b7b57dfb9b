#include "libsplat/compile/nvrtc.h"

#include <nvrtc.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <regex>
#include <string_view>
#include <vector>

#include "libsplat/compile/sha256.h"
#include "libsplat/device/embedded.h"

namespace fs = std::filesystem;

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

std::vector<std::string> supported_archs() {
  int n = 0;
  std::vector<std::string> out;
  if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return out;
  std::vector<int> ccs(static_cast<size_t>(n));
  if (nvrtcGetSupportedArchs(ccs.data()) != NVRTC_SUCCESS) return out;
  for (int cc : ccs) {
    if (cc < 80) continue;  // mma.sync and cp.async need sm_80
    out.push_back("sm_" + std::to_string(cc));
    if (cc == 90) out.push_back("sm_90a");  // the wgmma kernels
  }
  return out;
}

int parse_arch(const std::string& arch) {
  static const std::regex re("sm_([0-9]{2,3})a?");
  std::smatch m;
  const std::vector<std::string> ok = supported_archs();
  std::string list;
  for (const auto& a : ok) list += (list.empty() ? "" : ", ") + a;
  if (!std::regex_match(arch, m, re))
    throw std::invalid_argument("bad architecture '" + arch + "' (supported: " + list + ")");
  int cc = std::stoi(m[1]);
  if (cc < 80) throw std::invalid_argument("architecture " + arch + " is not supported (sm_80 or newer: mma.sync, cp.async)");
  if (!ok.empty() && std::find(ok.begin(), ok.end(), arch) == ok.end())
    throw std::invalid_argument("architecture " + arch + " is not supported by this NVRTC (" + nvrtc_version() +
                                "; supported: " + list + ")");
  return cc;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return "unknown";
  return std::to_string(major) + "." + std::to_string(minor);
}

namespace {

// Options of every compile: PTX for the virtual architecture (JIT-able by newer drivers), CUBIN for
// the real one.
std::vector<std::string> compile_options(const std::string& arch, CompileTarget target, bool resource_info) {
  std::vector<std::string> o = {"--gpu-architecture=" + (target == CompileTarget::Ptx ? "compute_" + arch.substr(3) : arch),
                                "--std=c++17", "--extra-device-vectorization"};
  if (resource_info && target == CompileTarget::Cubin) {
    o.push_back("--ptxas-options=-v");
    // NVRTC 12.9 and later keep a cache of their own: on a hit ptxas does not run and the log has no
    // report (seen on the H200 as "no ptxas resource report" when a module was compiled twice).
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) == NVRTC_SUCCESS && (major > 12 || (major == 12 && minor >= 9)))
      o.push_back("--no-cache");
  }
  // For compute-sanitizer and ncu reports that name the device header and line (docs/testing.md).
  if (const char* v = std::getenv("SPLATC_LINEINFO"); v != nullptr && std::string(v) == "1")
    o.push_back("--generate-line-info");
  return o;
}

CompileResult run_nvrtc(const std::string& source, const std::string& name, const std::string& arch,
                        CompileTarget target, const std::vector<std::string>& options) {
  Program prog;
  // Every device header, by the name the source includes it by (NVRTC cites that name and the line).
  std::vector<const char*> texts, names, opts;
  for (const EmbeddedFile& f : device_files()) {
    texts.push_back(f.text);
    names.push_back(f.name);
  }
  for (const std::string& o : options) opts.push_back(o.c_str());
  check(nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), static_cast<int>(texts.size()), texts.data(),
                           names.data()),
        "nvrtcCreateProgram");
  nvrtcResult rc = nvrtcCompileProgram(prog.p, static_cast<int>(opts.size()), opts.data());
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
  return out;
}

// The cache file of a compile: named by a SHA-256 over everything NVRTC's output and log depend on
// (each field length-prefixed): the NVRTC version, program name (the log cites it), target, options,
// source and every device header. The file holds the log's length (8 bytes, little-endian), the log
// and the image.
fs::path cache_file(const std::string& dir, const std::string& name, const std::string& source, CompileTarget target,
                    const std::vector<std::string>& options) {
  Sha256 h;
  auto field = [&h](std::string_view s) { h.add(std::to_string(s.size())).add(":").add(s); };
  field("splat nvrtc cache 2");
  field(nvrtc_version());
  field(name);
  field(target == CompileTarget::Ptx ? "ptx" : "cubin");
  for (const std::string& o : options) field(o);
  field(source);
  for (const EmbeddedFile& f : device_files()) {
    field(f.name);
    field(f.text);
  }
  return fs::path(dir) / (h.hex() + (target == CompileTarget::Ptx ? ".ptx" : ".cubin"));
}

bool read_cached(const fs::path& file, CompileResult& out) {
  std::ifstream f(file, std::ios::binary);
  if (!f) return false;
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad() || data.size() < 8) return false;
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = n << 8 | static_cast<unsigned char>(data[static_cast<size_t>(b)]);
  if (n > data.size() - 8 || data.size() - 8 - n == 0) return false;  // not a cache file of this format
  out.log = data.substr(8, n);
  out.image = data.substr(8 + n);
  return true;
}

// Written under a name of its own, then renamed into place: readers (other processes sharing the
// directory) see the whole file or none. A cache that cannot be written only costs time.
void store_cached(const fs::path& file, const CompileResult& r) {
  static std::atomic<unsigned> serial{0};
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.parent_path() / ("." + file.filename().string() + "." + std::to_string(std::random_device{}()) +
                                             "." + std::to_string(serial++) + ".tmp");
  {
    std::ofstream f(tmp, std::ios::binary);
    char len[8];
    for (int b = 0; b < 8; ++b) len[b] = static_cast<char>(static_cast<uint64_t>(r.log.size()) >> (8 * b) & 0xff);
    f.write(len, 8);
    f.write(r.log.data(), static_cast<std::streamsize>(r.log.size()));
    f.write(r.image.data(), static_cast<std::streamsize>(r.image.size()));
    if (!f) {
      static std::once_flag warned;
      std::call_once(warned, [&] { spdlog::warn("NVRTC cache: cannot write {}", tmp.string()); });
      fs::remove(tmp, ec);
      return;
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) fs::remove(tmp, ec);
}

}  // namespace

CompileResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                            CompileTarget target, const std::string& cache_dir, bool resource_info) {
  parse_arch(arch);
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> options = compile_options(arch, target, resource_info);
  const fs::path file = cache_dir.empty() ? fs::path() : cache_file(cache_dir, name, source, target, options);
  CompileResult out;
  if (!file.empty() && read_cached(file, out)) {
    out.cached = true;
  } else {
    out = run_nvrtc(source, name, arch, target, options);
    if (!file.empty()) store_cached(file, out);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace splat
