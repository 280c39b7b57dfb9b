#pragma once
// GPU runtime through the CUDA runtime API only (static cudart, which opens libcuda.so lazily):
// splatc starts and emits on machines without a driver; only running kernels needs a GPU.
// Modules are loaded from CUBIN/PTX images with cudaLibraryLoadData and launched with
// cudaLaunchKernel on the cudaKernel_t handles.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "libsplat/compile/nvrtc.h"

namespace splat {

// No usable GPU (no device, no driver, driver too old): splatc exits 3 with this message.
class NoGpuError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Kernels for the requested architecture cannot run on this device (a user error: exit 2).
class ArchMismatch : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A CUDA call failed.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sms = 0;
  size_t memory = 0;
  size_t l2_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  std::string arch() const { return "sm_" + std::to_string(cc_major * 10 + cc_minor); }
  // What kernels are compiled for: the arch-specific target on sm_90 (wgmma needs sm_90a, which
  // runs on exactly that chip), the plain one elsewhere.
  std::string target_arch() const { return cc_major == 9 && cc_minor == 0 ? "sm_90a" : arch(); }
};

// The current device (0); throws NoGpuError when none can be used.
DeviceInfo device_info();

// How kernels compiled for `arch` are loaded on `dev`: as a CUBIN when the device is that target,
// otherwise as PTX that the driver compiles for the device (sm_80 code on an sm_90 GPU: a CUBIN
// only runs on its own major architecture). Throws ArchMismatch when the device cannot run code
// for arch: a newer target, or an arch-specific one (sm_90a) on another chip.
CompileTarget load_target(const DeviceInfo& dev, const std::string& arch);

// Throws CudaError naming `what` when err (a cudaError_t) is not success.
void cuda_check(int err, const char* what);

// Device memory, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void download(void* dst, size_t bytes, size_t offset = 0) const;

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// A loaded module (cudaLibrary_t); kernels are looked up by their extern "C" name.
class Module {
 public:
  explicit Module(const std::string& image);  // CUBIN bytes or NUL-terminated PTX text
  ~Module();
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  // Opaque kernel handle (cudaKernel_t); raises the dynamic shared memory limit when needed.
  const void* kernel(const std::string& name, size_t dynamic_smem = 0) const;

 private:
  void* lib_ = nullptr;
};

// Encodes a TMA tensor map (CUtensorMap: 128 bytes written to out) over the 16-bit elements at base:
// dims innermost first, byte strides of dims 1.., box sizes; 128-byte swizzle, no interleave, zeros
// out of bounds. Uses the driver's cuTensorMapEncodeTiled, looked up at run time (static cudart
// links no driver symbol). Throws CudaError naming the problem for a description TMA cannot take
// (rank, alignment, dims, box, strides), checked before the driver is asked; and if the driver
// lacks the encoder or rejects the map.
void encode_tensor_map(void* out, const void* base, const std::vector<uint64_t>& dims,
                       const std::vector<uint64_t>& strides, const std::vector<uint32_t>& box);

// cudaLaunchKernel; stream is a cudaStream_t (nullptr: the default stream). programmatic: launched
// with programmatic stream serialization (KernelDesc::programmatic), so that it may start while the
// previous kernel in the stream ends.
void launch_kernel(const void* kernel, int64_t grid_x, int64_t grid_y, int block, size_t smem, void** args,
                   void* stream, bool programmatic = false);

// An entry point of a loaded module, ready to launch (grid.y comes with each launch).
struct EntryLaunch {
  const void* fn;
  int64_t grid_x;
  int block;
  size_t smem;
  bool programmatic;  // launch_kernel's programmatic
};
// Every entry in order on stream, each over grid (grid_x, grid_y) with the same arguments.
void launch_entries(const std::vector<EntryLaunch>& entries, int64_t grid_y, void** args, void* stream);

}  // namespace splat
