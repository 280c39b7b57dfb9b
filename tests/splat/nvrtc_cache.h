#pragma once
// The splat tests compile through one NVRTC result cache under the build tree (TRSPLAT_NVRTC_CACHE,
// tests/CMakeLists.txt), shared by the test processes of a run: a module that several tests compile
// identically is compiled once.
#include <string>

#include "libsplat/compile/nvrtc.h"

inline splat::CompileResult test_compile(const std::string& source, const std::string& name, const std::string& arch,
                                         splat::CompileTarget target) {
  return splat::nvrtc_compile(source, name, arch, target, TRSPLAT_NVRTC_CACHE);
}
