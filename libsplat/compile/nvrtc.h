#pragma once
// NVRTC: CUDA C++ -> PTX or CUBIN for a given architecture. Needs no GPU and no driver.
#include <stdexcept>
#include <string>
#include <vector>

namespace splat {

// Compilation failed; what() holds the NVRTC log (file:line: error ...).
class CompileError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class CompileTarget { Ptx, Cubin };

struct CompileResult {
  std::string image;  // PTX text or CUBIN bytes
  std::string log;    // NVRTC log (warnings)
  double seconds = 0;
  bool cached = false;  // read from the cache directory, not compiled
};

// arch: "sm_80", "sm_90", "sm_90a", ... (PTX is generated for the matching compute_XX).
// name: the program name used in diagnostics (e.g. "window-4k.cu"). The source may include the device
// headers as "splat/<file>.cuh" (libsplat/device/embedded.h).
// cache_dir: "" for none; else a directory (created when first written) of earlier results and
// their logs, each under a SHA-256 of the NVRTC version, program name, target, options, source and
// device headers, so that a compile of identical input is read back instead of run (processes may
// share it). resource_info (CUBIN only): ptxas's report of each entry point's registers, spills,
// stack and shared memory in the log (resources.h reads it).
CompileResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                            CompileTarget target, const std::string& cache_dir = "", bool resource_info = false);

// Checks an "sm_XY" string (throws std::invalid_argument otherwise); returns XY.
int parse_arch(const std::string& arch);
// The --arch values this NVRTC compiles and splatc supports (sm_80 and newer, sm_90a), in order.
std::vector<std::string> supported_archs();

std::string nvrtc_version();

}  // namespace splat
