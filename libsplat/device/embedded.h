#pragma once
// The CUDA headers of this folder, embedded into libsplat at build time (cmake/embed_files.cmake):
// each by the name the emitted modules include it by ("splat/common.cuh" is common.cuh here), the
// name under which NVRTC receives it and cites it in diagnostics.
#include <span>

namespace splat {

struct EmbeddedFile {
  const char* name;  // "splat/<file>.cuh"
  const char* text;  // the file, byte for byte
};

// Every libsplat/device/*.cuh, sorted by name.
std::span<const EmbeddedFile> device_files();

}  // namespace splat
