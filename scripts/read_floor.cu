// The shortest time a kernel that reads N bytes once takes in `splatc bench`'s conditions: 256 MiB
// written before each run (L2 flushed, as bench does), CUDA events around one launch, median of 30
// after 3 warm-up runs. Compiled and run by scripts/bench-read-floor on a GPU machine.
//   read_floor [BYTES]   (default: the K and V rows of a one-token decode against 4096 + 16 kept
//                         keys per K/V head, 8 K/V heads, head_dim 64, bf16: 2 * 8 * 4112 * 128)
// Prints an empty kernel's time, the read at 1, 2, 4 and 8 blocks per SM (512 threads, 16-byte
// streaming loads), the read followed by an empty second kernel (a pass plus a combine), and the
// bandwidth floor BYTES / peak at the card's HBM peak (reported by the runtime: 2 * memory clock *
// bus width).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

__global__ void empty_kernel(float* out) {
  if (out == nullptr) out[threadIdx.x] = 0.f;  // never taken: keeps the launch from being elided
}

__global__ void read_kernel(const uint4* p, long long n16, float* out) {
  float s = 0.f;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n16; i += (long long)gridDim.x * blockDim.x) {
    const uint4 x = __ldcs(p + i);
    s += __int_as_float(x.x ^ x.y ^ x.z ^ x.w);
  }
  if (s == 12345.f) out[blockIdx.x] = s;  // a use of every load the compiler cannot rule out
}

static void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "read_floor: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  const long long bytes = argc > 1 ? std::atoll(argv[1]) : 2LL * 8 * 4112 * 128;
  if (bytes < 16 || bytes > (1LL << 32)) {
    std::fprintf(stderr, "read_floor: BYTES must be in [16, 2^32]\n");
    return 2;
  }
  const size_t flush_bytes = 256u << 20;
  void* flush = nullptr;
  char* buf = nullptr;
  float* out = nullptr;
  check(cudaMalloc(&flush, flush_bytes), "cudaMalloc");
  check(cudaMalloc(&buf, static_cast<size_t>(bytes)), "cudaMalloc");
  check(cudaMalloc(&out, 1 << 20), "cudaMalloc");
  check(cudaMemset(buf, 1, static_cast<size_t>(bytes)), "cudaMemset");
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  const auto time = [&](const char* what, auto launch) {
    std::vector<float> us;
    for (int r = 0; r < 33; ++r) {
      check(cudaMemsetAsync(flush, r, flush_bytes), "cudaMemsetAsync");
      check(cudaEventRecord(a), "cudaEventRecord");
      launch();
      check(cudaEventRecord(b), "cudaEventRecord");
      check(cudaEventSynchronize(b), "cudaEventSynchronize");
      float ms = 0.f;
      check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
      if (r >= 3) us.push_back(ms * 1000.f);
    }
    std::sort(us.begin(), us.end());
    std::printf("%-52s %8.2f us median %8.2f min\n", what, us[us.size() / 2], us.front());
  };
  int dev = 0, sms = 0, mem_khz = 0, bus_bits = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "attribute");
  check(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev), "attribute");
  check(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev), "attribute");
  cudaDeviceProp prop;
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const double peak = 2.0 * mem_khz * 1e3 * bus_bits / 8;  // bytes per second
  std::printf("%s, %d SMs; %lld bytes; L2 flushed (256 MiB written) before each run\n", prop.name, sms, bytes);
  const long long n16 = bytes / 16;
  time("empty kernel", [&] { empty_kernel<<<1, 32>>>(out); });
  for (int per_sm : {1, 2, 4, 8}) {
    char name[80];
    std::snprintf(name, sizeof name, "read once, %d block(s) of 512 per SM", per_sm);
    time(name, [&] { read_kernel<<<per_sm * sms, 512>>>(reinterpret_cast<const uint4*>(buf), n16, out); });
  }
  time("read once (8 per SM), then an empty kernel", [&] {
    read_kernel<<<8 * sms, 512>>>(reinterpret_cast<const uint4*>(buf), n16, out);
    empty_kernel<<<1, 32>>>(out);
  });
  check(cudaDeviceSynchronize(), "kernels");
  std::printf("bandwidth floor at the HBM peak (%.2f TB/s): %.2f us\n", peak / 1e12, bytes / peak * 1e6);
  return 0;
}
