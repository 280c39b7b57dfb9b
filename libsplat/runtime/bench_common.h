#pragma once
// What splatc bench's forward (bench.cpp) and backward (bench_backward.cpp) runs share: the support
// module (seeded inputs, float64 conversion and references), the inputs, the float64 reference's
// storage, timing events. Internal to libsplat/runtime.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "libsplat/analysis/acsr.h"
#include "libsplat/pattern/pattern.h"
#include "libsplat/report/bench_report.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/runtime/runtime.h"

namespace splat::bench_detail {

inline const char* elt(DType t) {
  switch (t) {
    case DType::FP16: return "f16_t";
    case DType::BF16: return "bf16_t";
    default: return "float";
  }
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

inline double tolerance(DType t) { return t == DType::FP32 ? 1e-5 : 2e-2; }

inline double compute_rate(const Ceilings& c, DType t) {
  switch (t) {
    case DType::FP32: return c.fp32;
    case DType::TF32: return c.tf32;
    case DType::FP16: return c.fp16;
    case DType::BF16: return c.bf16;
  }
  return c.fp32;
}

struct Event {
  cudaEvent_t e = nullptr;
  Event() { cuda_check(cudaEventCreate(&e), "cudaEventCreate"); }
  ~Event() { cudaEventDestroy(e); }
};

struct Support {
  std::shared_ptr<Module> mod;
  const void *fill, *to_double, *reference;
  const void *ref_bwd_rows, *ref_bwd_cols;  // the backward's float64 reference (reference.cuh)
};

inline Support load_support(const std::string& image) {
  Support s;
  s.mod = std::make_shared<Module>(image);
  s.fill = s.mod->kernel("splat_fill");
  s.to_double = s.mod->kernel("splat_to_double");
  s.reference = s.mod->kernel("splat_reference");
  s.ref_bwd_rows = s.mod->kernel("splat_reference_bwd_rows");
  s.ref_bwd_cols = s.mod->kernel("splat_reference_bwd_cols");
  return s;
}

inline void launch1d(const void* fn, int64_t n, void** args) {
  int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535 * 16);
  launch_kernel(fn, std::max<int64_t>(blocks, 1), 1, 256, 0, args, nullptr);
}

// The query heads a problem's kernels serve: its head group's, else all.
inline std::vector<int64_t> served_head_list(const Problem& p) {
  if (!p.group_heads.empty()) return p.group_heads;
  std::vector<int64_t> h(static_cast<size_t>(p.heads));
  for (int64_t x = 0; x < p.heads; ++x) h[static_cast<size_t>(x)] = x;
  return h;
}

// The float64 reference: O, and each row's log-sum-exp (Q's rows without head_dim; -inf for a row
// with no kept key). Rows of heads a head group does not serve are left as they are.
struct Reference {
  std::vector<double> o, lse;
  Reference(int64_t nq, int64_t head_dim)
      : o(static_cast<size_t>(nq), 0.0), lse(static_cast<size_t>(nq / head_dim), -INFINITY) {}
};


// What a launch covers: the problem's batch, or the packed variable-length batch of its lengths.
struct LaunchShape {
  int64_t nq = 0, nk = 0;   // elements of q (and o), of k (and v)
  int64_t grid_bh = 0;      // grid.y: batch*heads, or sequences*heads
  std::vector<int32_t> cu;  // varlen: sequence starts, sequences + 1 entries (empty otherwise)
  int64_t sequences() const { return cu.empty() ? 0 : static_cast<int64_t>(cu.size()) - 1; }
};

inline LaunchShape launch_shape(const Problem& p) {
  LaunchShape s;
  if (!p.varlen) {
    s.nq = p.batch * p.heads * p.seq_len * p.head_dim;
    s.nk = p.batch * p.kv_heads * p.kv_len * p.head_dim;
    s.grid_bh = p.batch * p.heads;
    return s;
  }
  if (p.varlen->lengths.empty())
    throw Error(p.file, "varlen.lengths", "bench runs a packed batch of given lengths: add \"lengths\" to \"varlen\"");
  s.cu.push_back(0);
  for (int64_t n : p.varlen->lengths) s.cu.push_back(static_cast<int32_t>(s.cu.back() + n));
  const int64_t total = s.cu.back();
  s.nq = total * p.heads * p.head_dim;
  s.nk = total * p.kv_heads * p.head_dim;
  s.grid_bh = s.sequences() * p.heads;
  return s;
}

// n elements of the problem's dtype at b, as float64 on the host.
inline std::vector<double> download_doubles(const Support& sup, const DeviceBuffer& b, int64_t n) {
  DeviceBuffer d(static_cast<size_t>(n) * sizeof(double));
  const void* in = b.get();
  double* out = static_cast<double*>(d.get());
  long long nn = n;
  void* args[] = {&in, &out, &nn};
  launch1d(sup.to_double, n, args);
  std::vector<double> h(static_cast<size_t>(n));
  d.download(h.data(), h.size() * sizeof(double));
  return h;
}

// Seeded random Q, K, V and the output buffer, in the problem's dtype; a packed batch's cu_seqlens.
struct Inputs {
  LaunchShape shape;
  int64_t nq = 0, nk = 0;  // elements of q (and o), of k (and v)
  DeviceBuffer q, k, v, o, cu;
  Inputs(const Problem& p, const Support& sup, uint64_t seed) : shape(launch_shape(p)), nq(shape.nq), nk(shape.nk) {
    const size_t esz = static_cast<size_t>(dtype_bytes(p.dtype));
    if (!shape.cu.empty()) {
      cu = DeviceBuffer(shape.cu.size() * sizeof(int32_t));
      cu.upload(shape.cu.data(), cu.size());
    }
    q = DeviceBuffer(static_cast<size_t>(nq) * esz);
    k = DeviceBuffer(static_cast<size_t>(nk) * esz);
    v = DeviceBuffer(static_cast<size_t>(nk) * esz);
    o = DeviceBuffer(static_cast<size_t>(nq) * esz);
    void* ptr;
    long long n;
    unsigned long long s;
    void* args[] = {&ptr, &n, &s};
    ptr = q.get(), n = nq, s = seed * 3 + 0;
    launch1d(sup.fill, n, args);
    ptr = k.get(), n = nk, s = seed * 3 + 1;
    launch1d(sup.fill, n, args);
    ptr = v.get(), n = nk, s = seed * 3 + 2;
    launch1d(sup.fill, n, args);
    cuda_check(cudaDeviceSynchronize(), "input generation");
  }
};

// Times f: warm-up, then each run after an L2 flush (a write of flush) and poison(), between two
// events; sets kr's ran, repeats and median / min / max.
template <class F, class P>
inline void time_runs(const BenchOptions& opt, const DeviceBuffer& flush, P poison, F f, KernelResult& kr) {
  for (int w = 0; w < opt.warmup; ++w) f();
  Event e0, e1;
  std::vector<double> ms;
  for (int it = 0; it < opt.repeat; ++it) {
    cuda_check(cudaMemsetAsync(flush.get(), it & 0xff, flush.size(), nullptr), "L2 flush");
    poison();
    cuda_check(cudaEventRecord(e0.e, nullptr), "cudaEventRecord");
    f();
    cuda_check(cudaEventRecord(e1.e, nullptr), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(e1.e), "timed run");
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, e0.e, e1.e), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  kr.ran = true;
  kr.repeats = opt.repeat;
  kr.ms_median = median(ms);
  kr.ms_min = ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
  kr.ms_max = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
}

// An ACSR's rows as the reference kernels read them: row_ptr (int64, rows + 1) and runs {start, stride, count}.
struct DeviceRuns {
  DeviceBuffer ptr, runs;
  explicit DeviceRuns(const Acsr& a) {
    std::vector<long long> rp(static_cast<size_t>(a.seq_len) + 1, 0);
    std::vector<int32_t> rs;
    for (int64_t i = 0; i < a.seq_len; ++i) {
      for (const Run& r : a.row(i)) {
        rs.push_back(static_cast<int32_t>(r.start));
        rs.push_back(static_cast<int32_t>(r.stride));
        rs.push_back(static_cast<int32_t>(r.count));
      }
      rp[static_cast<size_t>(i) + 1] = static_cast<long long>(rs.size() / 3);
    }
    if (rs.empty()) rs.assign(3, 0);
    ptr = DeviceBuffer(rp.size() * sizeof(long long));
    ptr.upload(rp.data(), ptr.size());
    runs = DeviceBuffer(rs.size() * sizeof(int32_t));
    runs.upload(rs.data(), runs.size());
  }
};

}  // namespace splat::bench_detail
