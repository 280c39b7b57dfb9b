#include "libsplat/runtime/runtime.h"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <string>
#include <utility>

namespace splat {

CompileTarget load_target(const DeviceInfo& dev, const std::string& arch) {
  const int cc = parse_arch(arch), device_cc = dev.cc_major * 10 + dev.cc_minor;
  const bool specific = arch.back() == 'a';
  if (cc > device_cc || (specific && cc != device_cc))
    throw ArchMismatch("kernels for " + arch + " cannot run on " + dev.name + " (" + dev.arch() + ")");
  return cc == device_cc ? CompileTarget::Cubin : CompileTarget::Ptx;
}

void cuda_check(int err, const char* what) {
  if (err != cudaSuccess) {
    auto e = static_cast<cudaError_t>(err);
    throw CudaError(std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
  }
}

DeviceInfo device_info() {
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    std::string why = err != cudaSuccess ? std::string(cudaGetErrorString(err)) : "no CUDA device found";
    cudaGetLastError();
    throw NoGpuError("no usable GPU: " + why + " (emit and analyze work without one)");
  }
  DeviceInfo d;
  cudaDeviceProp prop{};
  cuda_check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cuda_check(cudaSetDevice(0), "cudaSetDevice");
  d.name = prop.name;
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sms = prop.multiProcessorCount;
  d.memory = prop.totalGlobalMem;
  d.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  cudaDriverGetVersion(&d.driver_version);
  cudaRuntimeGetVersion(&d.runtime_version);
  if (d.cc_major < 8) throw NoGpuError("GPU " + d.name + " is " + d.arch() + "; splatc kernels need sm_80 or newer");
  return d;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : n_(bytes) {
  if (bytes) cuda_check(cudaMalloc(&p_, bytes), "cudaMalloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);
}
DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = std::exchange(o.p_, nullptr);
    n_ = std::exchange(o.n_, 0);
  }
  return *this;
}
void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  cuda_check(cudaMemcpy(static_cast<char*>(p_) + offset, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}
void DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  cuda_check(cudaMemcpy(dst, static_cast<const char*>(p_) + offset, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

Module::Module(const std::string& image) {
  cudaLibrary_t lib = nullptr;
  cuda_check(cudaLibraryLoadData(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), "cudaLibraryLoadData");
  lib_ = lib;
}
Module::~Module() {
  if (lib_) cudaLibraryUnload(static_cast<cudaLibrary_t>(lib_));
}
const void* Module::kernel(const std::string& name, size_t dynamic_smem) const {
  cudaKernel_t k = nullptr;
  cuda_check(cudaLibraryGetKernel(&k, static_cast<cudaLibrary_t>(lib_), name.c_str()),
             ("cudaLibraryGetKernel " + name).c_str());
  if (dynamic_smem > 48 * 1024)
    cuda_check(cudaFuncSetAttribute(reinterpret_cast<const void*>(k), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(dynamic_smem)),
               "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
  return reinterpret_cast<const void*>(k);
}

void encode_tensor_map(void* out, const void* base, const std::vector<uint64_t>& dims,
                       const std::vector<uint64_t>& strides, const std::vector<uint32_t>& box) {
  // The driver's own checks only return an error code: say what is wrong first.
  const size_t rank = dims.size();
  if (rank < 2 || rank > 5 || strides.size() != rank - 1 || box.size() != rank)
    throw CudaError("tensor map: rank " + std::to_string(rank) + " with " + std::to_string(strides.size()) +
                    " strides and a box of rank " + std::to_string(box.size()) + " (rank 2..5, rank - 1 strides)");
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) throw CudaError("tensor map: global address not 16-byte aligned");
  for (size_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (uint64_t{1} << 32)) throw CudaError("tensor map: dim " + std::to_string(i) + " out of 1..2^32");
    if (box[i] == 0 || box[i] > 256) throw CudaError("tensor map: box " + std::to_string(i) + " out of 1..256");
  }
  for (uint64_t st : strides)
    if (st % 16 != 0 || st >= (uint64_t{1} << 40)) throw CudaError("tensor map: stride not a multiple of 16 below 2^40");
  if (box[0] * 2 > 128) throw CudaError("tensor map: a 128-byte swizzle needs the inner box within 128 bytes");
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q{};
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q);
    if (err != cudaSuccess || q != cudaDriverEntryPointSuccess || !fn)
      throw CudaError("cuTensorMapEncodeTiled is not available from the driver (TMA kernels need CUDA 12+ drivers)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  std::vector<cuuint32_t> elem(rank, 1);
  CUresult r = encode(static_cast<CUtensorMap*>(out), CU_TENSOR_MAP_DATA_TYPE_UINT16, static_cast<cuuint32_t>(rank),
                      const_cast<void*>(base), dims.data(), strides.data(), box.data(), elem.data(),
                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) throw CudaError("cuTensorMapEncodeTiled failed (error " + std::to_string(static_cast<int>(r)) + ")");
}

void launch_kernel(const void* kernel, int64_t grid_x, int64_t grid_y, int block, size_t smem, void** args,
                   void* stream, bool programmatic) {
  if (grid_x <= 0 || grid_y <= 0) return;
  if (grid_x > 0x7fffffff || grid_y > 65535) throw CudaError("grid too large for one launch");
  dim3 grid(static_cast<unsigned>(grid_x), static_cast<unsigned>(grid_y)), blk(static_cast<unsigned>(block));
  if (!programmatic) {
    cuda_check(cudaLaunchKernel(kernel, grid, blk, args, smem, static_cast<cudaStream_t>(stream)), "cudaLaunchKernel");
    return;
  }
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = blk;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = static_cast<cudaStream_t>(stream);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cuda_check(cudaLaunchKernelExC(&cfg, kernel, args), "cudaLaunchKernelExC (programmatic)");
}

void launch_entries(const std::vector<EntryLaunch>& entries, int64_t grid_y, void** args, void* stream) {
  for (const EntryLaunch& e : entries) launch_kernel(e.fn, e.grid_x, grid_y, e.block, e.smem, args, stream, e.programmatic);
}

}  // namespace splat
