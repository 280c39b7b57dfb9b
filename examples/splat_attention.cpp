// Sparse attention from a host program with the libsplat API: one call from a pattern file to a
// loaded kernel, then launches on device buffers. Usage: example_splat_attention PATTERN.json
// Exits 3 when no GPU is usable (the pattern is still analysed and the kernel generated).
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include "libsplat/analysis/analysis.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/runtime/kernel.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PATTERN.json\n", argv[0]);
    return 2;
  }
  try {
    splat::Problem p = splat::load_problem(argv[1]);
    splat::Acsr acsr = splat::analyze(p);
    std::printf("%s: %lld kept keys per head (density %.4f)\n", p.name.c_str(), static_cast<long long>(acsr.nnz()),
                double(acsr.nnz()) / double(p.seq_len) / double(p.kv_len));
    if (p.dtype != splat::DType::FP32) {
      std::fprintf(stderr, "this example feeds fp32 data; use an fp32 pattern\n");
      return 2;
    }
    // Generates CUDA for the pattern, compiles it with NVRTC for this GPU and loads it.
    splat::BuildOptions opt;
    opt.kind = splat::KernelKind::Fused;  // or Pipeline (the three SPLAT kernels)
    splat::Kernel kernel = splat::build_kernel(p, acsr, opt);

    const size_t nq = size_t(p.batch * p.heads * p.seq_len * p.head_dim);
    const size_t nk = size_t(p.batch * p.heads * p.kv_len * p.head_dim);
    std::vector<float> hq(nq), hk(nk), hv(nk), ho(nq);
    std::mt19937 rng(1);
    std::normal_distribution<float> n;
    for (auto* v : {&hq, &hk, &hv})
      for (float& x : *v) x = n(rng);
    splat::DeviceBuffer q(nq * 4), k(nk * 4), v(nk * 4), o(nq * 4);
    q.upload(hq.data(), nq * 4);
    k.upload(hk.data(), nk * 4);
    v.upload(hv.data(), nk * 4);
    kernel.launch(q.get(), k.get(), v.get(), o.get());  // default stream
    o.download(ho.data(), nq * 4);                      // synchronises
    std::printf("o[0][0][0][0..3] = %.5f %.5f %.5f %.5f\n", ho[0], ho[1], ho[2], ho[3]);
    return 0;
  } catch (const splat::NoGpuError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
