#include "libsplat/runtime/bench.h"

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/runtime/kernel.h"
#include "libsplat/runtime/runtime.h"

namespace splat {
namespace {

const char* elt(DType t) {
  switch (t) {
    case DType::FP16: return "f16_t";
    case DType::BF16: return "bf16_t";
    default: return "float";
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

double tolerance(DType t) { return t == DType::FP32 ? 1e-5 : 2e-2; }

double compute_rate(const Ceilings& c, DType t) {
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
};

Support load_support(const std::string& image) {
  Support s;
  s.mod = std::make_shared<Module>(image);
  s.fill = s.mod->kernel("splat_fill");
  s.to_double = s.mod->kernel("splat_to_double");
  s.reference = s.mod->kernel("splat_reference");
  return s;
}

void launch1d(const void* fn, int64_t n, void** args) {
  int64_t blocks = std::min<int64_t>((n + 255) / 256, 65535 * 16);
  launch_kernel(fn, std::max<int64_t>(blocks, 1), 1, 256, 0, args, nullptr);
}

// Host float64 reference over the pattern's own mask (kept()), independent of the analysis.
std::vector<double> host_reference(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                                   const std::vector<double>& v) {
  const int64_t L = p.seq_len, KV = p.kv_len, D = p.head_dim, BH = p.batch * p.heads, G = p.heads / p.kv_heads;
  std::vector<std::vector<int64_t>> keys(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < KV; ++j)
      if (kept(p, i, j)) keys[static_cast<size_t>(i)].push_back(j);
  std::vector<double> o(static_cast<size_t>(BH * L * D), 0.0), s;
  for (int64_t b = 0; b < BH; ++b)
    for (int64_t i = 0; i < L; ++i) {
      const auto& ks = keys[static_cast<size_t>(i)];
      if (ks.empty()) continue;
      s.assign(ks.size(), 0.0);
      double mx = -INFINITY;
      for (size_t c = 0; c < ks.size(); ++c) {
        double dot = 0;
        for (int64_t x = 0; x < D; ++x)
          dot += q[static_cast<size_t>((b * L + i) * D + x)] * k[static_cast<size_t>((b / G * KV + ks[c]) * D + x)];
        s[c] = dot * p.scale;
        mx = std::max(mx, s[c]);
      }
      double l = 0;
      double* out = &o[static_cast<size_t>((b * L + i) * D)];
      for (size_t c = 0; c < ks.size(); ++c) {
        double e = std::exp(s[c] - mx);
        l += e;
        for (int64_t x = 0; x < D; ++x) out[x] += e * v[static_cast<size_t>((b / G * KV + ks[c]) * D + x)];
      }
      for (int64_t x = 0; x < D; ++x) out[x] /= l;
    }
  return o;
}

// The same for a packed variable-length batch: sequence b (tokens cu[b] ..) keeps the pattern's (i, j)
// with i, j < its length; q, o [total, heads, d], k, v [total, kv_heads, d].
std::vector<double> host_reference_varlen(const Problem& p, const std::vector<int32_t>& cu, const std::vector<double>& q,
                                          const std::vector<double>& k, const std::vector<double>& v) {
  const int64_t H = p.heads, KVH = p.kv_heads, D = p.head_dim, G = p.heads / p.kv_heads;
  std::vector<double> o(q.size(), 0.0), s;
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    const int64_t start = cu[b], len = cu[b + 1] - cu[b];
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < len; ++i) {
        const double* qr = &q[static_cast<size_t>(((start + i) * H + h) * D)];
        auto krow = [&](int64_t j) { return static_cast<size_t>(((start + j) * KVH + h / G) * D); };
        std::vector<int64_t> ks;
        for (int64_t j = 0; j < len; ++j)
          if (kept(p, i, j)) ks.push_back(j);
        if (ks.empty()) continue;
        s.assign(ks.size(), 0.0);
        double mx = -INFINITY, l = 0;
        for (size_t c = 0; c < ks.size(); ++c) {
          double dot = 0;
          for (int64_t x = 0; x < D; ++x) dot += qr[x] * k[krow(ks[c]) + static_cast<size_t>(x)];
          s[c] = dot * p.scale;
          mx = std::max(mx, s[c]);
        }
        double* out = &o[static_cast<size_t>(((start + i) * H + h) * D)];
        for (size_t c = 0; c < ks.size(); ++c) {
          const double e = std::exp(s[c] - mx);
          l += e;
          for (int64_t x = 0; x < D; ++x) out[x] += e * v[krow(ks[c]) + static_cast<size_t>(x)];
        }
        for (int64_t x = 0; x < D; ++x) out[x] /= l;
      }
  }
  return o;
}

// What a launch covers: the problem's batch, or the packed variable-length batch of its lengths.
struct LaunchShape {
  int64_t nq = 0, nk = 0;   // elements of q (and o), of k (and v)
  int64_t grid_bh = 0;      // grid.y: batch*heads, or sequences*heads
  std::vector<int32_t> cu;  // varlen: sequence starts, sequences + 1 entries (empty otherwise)
  int64_t sequences() const { return cu.empty() ? 0 : static_cast<int64_t>(cu.size()) - 1; }
};

LaunchShape launch_shape(const Problem& p) {
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

struct Prepared {
  Problem problem;
  Acsr acsr;
  std::shared_ptr<GeneratedModule> gen;
  std::future<CompileResult> cubin;
  std::string support_key;
  ResolvedTuning tuning;
};

// Analyses and generates on this thread, compiles every module in parallel (NVRTC is the slow part):
// one per problem, and one support module per (dtype, head_dim).
// The attention kernels are compiled for `arch` (loaded as `target`), the support kernels for the
// device itself (`native`).
std::vector<Prepared> prepare(const std::vector<Problem>& problems, const BenchOptions& opt, const std::string& arch,
                              CompileTarget target, const std::string& native,
                              std::map<std::string, std::future<CompileResult>>& support_cubins) {
  std::vector<Prepared> prep;
  for (const Problem& p : problems) {
    Prepared x;
    x.problem = p;
    x.acsr = analyze(p);
    CodegenOptions co;
    co.fused = opt.fused;
    co.pipeline = opt.pipeline;
    x.tuning = resolve_tuning(p, arch, opt.tuning, opt.cache);
    if (opt.fused && x.tuning.source != "default")
      spdlog::info("{}: fused kernel tuning {} ({})", p.name, format_tuning(x.tuning.tuning), x.tuning.source);
    co.tuning = x.tuning.tuning;
    co.test = opt.test;
    co.arch = arch;
    x.gen = std::make_shared<GeneratedModule>(generate(p, x.acsr, co));
    std::string src = x.gen->source, name = p.name + ".cu";
    x.cubin = std::async(std::launch::async, [src, name, arch, target] {
      return nvrtc_compile(src, name, arch, target);
    });
    x.support_key = std::string(dtype_name(p.dtype)) + "/" + std::to_string(p.head_dim);
    if (!support_cubins.count(x.support_key)) {
      std::string ssrc = support_source(p.dtype, p.head_dim);
      support_cubins[x.support_key] = std::async(std::launch::async, [ssrc, native] {
        return nvrtc_compile(ssrc, "splat_support.cu", native, CompileTarget::Cubin);
      });
    }
    prep.push_back(std::move(x));
  }
  return prep;
}

// Keys that some row keeps (a key no row keeps is never read): marks every run's columns, stopping
// once every key is marked.
int64_t keys_read(const Acsr& acsr) {
  std::vector<char> seen(static_cast<size_t>(acsr.kv_len), 0);
  int64_t n = 0;
  for (int64_t i = 0; i < acsr.seq_len && n < acsr.kv_len; ++i)
    for (const Run& r : acsr.row(i))
      for (int64_t c = 0; c < r.count && n < acsr.kv_len; ++c) {
        char& s = seen[static_cast<size_t>(r.start + c * r.stride)];
        n += s == 0;
        s = 1;
      }
  return n;
}

// A packed variable-length batch's totals: kept (i, j) of every sequence (the pattern's rows and keys
// below its length), the keys some row of its sequence keeps, tokens, and the sum of length^2.
struct VarlenCounts {
  int64_t nnz = 0, keys_read = 0, tokens = 0, square_cells = 0;
};
VarlenCounts varlen_counts(const Acsr& acsr, const std::vector<int32_t>& cu) {
  VarlenCounts n;
  std::map<int64_t, std::pair<int64_t, int64_t>> by_length;  // length -> (nnz, keys read) of one sequence
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    const int64_t len = cu[b + 1] - cu[b];
    n.tokens += len;
    n.square_cells += len * len;
    auto [it, fresh] = by_length.try_emplace(len, 0, 0);
    if (fresh) {
      std::vector<char> seen(static_cast<size_t>(len), 0);
      for (int64_t i = 0; i < len; ++i)
        for (const Run& r : acsr.row(i))
          for (int64_t c = 0; c < r.count && r.start + c * r.stride < len; ++c) {
            ++it->second.first;
            char& s = seen[static_cast<size_t>(r.start + c * r.stride)];
            it->second.second += s == 0;
            s = 1;
          }
    }
    n.nnz += it->second.first;
    n.keys_read += it->second.second;
  }
  return n;
}

// The result's problem facts and floors (no GPU work).
ProblemResult problem_result(const Problem& p, const Acsr& acsr, const GeneratedModule& gen, const Ceilings& ceilings) {
  ProblemResult r;
  r.name = p.name;
  r.file = p.file;
  r.dtype = dtype_name(p.dtype);
  r.seq_len = p.seq_len;
  r.kv_len = p.kv_len;
  r.head_dim = p.head_dim;
  r.heads = p.heads;
  r.kv_heads = p.kv_heads;
  r.q_offset = p.q_offset;
  r.batch = p.batch;
  r.nnz = gen.nnz;
  r.density = double(gen.nnz) / double(p.seq_len) / double(p.kv_len);
  const int64_t BH = p.batch * p.heads, D = p.head_dim;
  const size_t esz = static_cast<size_t>(dtype_bytes(p.dtype));
  if (p.varlen) {  // every sequence's kept pairs and read keys, per head
    const VarlenCounts n = varlen_counts(acsr, launch_shape(p).cu);
    r.batch = static_cast<int64_t>(p.varlen->lengths.size());
    r.total_tokens = n.tokens;
    r.nnz = n.nnz;
    r.density = double(n.nnz) / double(n.square_cells > 0 ? n.square_cells : 1);
    r.flops = 4.0 * double(p.heads) * double(n.nnz) * double(D);
    r.bytes = (2.0 * double(p.heads) * double(n.tokens) + 2.0 * double(p.kv_heads) * double(n.keys_read)) * double(D) *
              double(esz);
  } else {
    r.flops = 4.0 * double(BH) * double(gen.nnz) * double(D);
    // Q read and O written once; the K and V rows of every kept key read once per K/V head.
    r.bytes = (2.0 * double(BH) * double(p.seq_len) + 2.0 * double(p.batch * p.kv_heads) * double(keys_read(acsr))) *
              double(D) * double(esz);
  }
  r.floor_memory_us = r.bytes / ceilings.bandwidth * 1e6;
  r.floor_compute_us = r.flops / compute_rate(ceilings, p.dtype) * 1e6;
  r.pattern_hash = gen.pattern_hash;
  r.passes = static_cast<int>(gen.plan.passes.size());
  r.tile_fill = gen.plan.tile_fill();
  r.tensor_cores = gen.tensor_cores;
  r.engine = gen.engine;
  return r;
}

// n elements of the problem's dtype at b, as float64 on the host.
std::vector<double> download_doubles(const Support& sup, const DeviceBuffer& b, int64_t n) {
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

// The float64 reference output: host brute force over the pattern for small problems, else a plain
// masked GPU reference over the ACSR's rows. what: which one.
std::vector<double> reference(const Problem& p, const Acsr& acsr, const Inputs& in, const Support& sup,
                              int64_t host_max_cells, std::string& what) {
  std::vector<double> ref(static_cast<size_t>(in.nq));
  const std::vector<int32_t>& cu = in.shape.cu;
  int64_t cells = p.seq_len * p.kv_len;
  if (p.varlen) {
    cells = 0;
    for (size_t b = 0; b + 1 < cu.size(); ++b) cells += int64_t{cu[b + 1] - cu[b]} * (cu[b + 1] - cu[b]);
  }
  if (cells <= host_max_cells) {
    what = "host float64 (brute force over the pattern)";
    std::vector<double> q = download_doubles(sup, in.q, in.nq), k = download_doubles(sup, in.k, in.nk),
                        v = download_doubles(sup, in.v, in.nk);
    return p.varlen ? host_reference_varlen(p, cu, q, k, v) : host_reference(p, q, k, v);
  }
  what = "gpu float64 (masked rows from the ACSR)";
  std::vector<long long> row_ptr(static_cast<size_t>(p.seq_len) + 1, 0);
  std::vector<int32_t> runs;
  for (int64_t i = 0; i < p.seq_len; ++i) {
    for (const Run& run : acsr.row(i)) {
      runs.push_back(static_cast<int32_t>(run.start));
      runs.push_back(static_cast<int32_t>(run.stride));
      runs.push_back(static_cast<int32_t>(run.count));
    }
    row_ptr[static_cast<size_t>(i) + 1] = static_cast<long long>(runs.size() / 3);
  }
  if (runs.empty()) runs.assign(3, 0);
  DeviceBuffer drp(row_ptr.size() * sizeof(long long)), druns(runs.size() * sizeof(int32_t)),
      dref(static_cast<size_t>(in.nq) * sizeof(double));
  drp.upload(row_ptr.data(), drp.size());
  druns.upload(runs.data(), druns.size());
  const void *qp = in.q.get(), *kp = in.k.get(), *vp = in.v.get(), *rp = drp.get(), *up = druns.get();
  double* op = static_cast<double*>(dref.get());
  long long seq = p.seq_len, kvl = p.kv_len;
  double scale = p.scale;
  long long group = p.heads / p.kv_heads, heads = p.heads;
  const void* cup = in.cu.get();  // null unless varlen
  void* args[] = {&qp, &kp, &vp, &op, &rp, &up, &seq, &kvl, &scale, &group, &cup, &heads};
  launch_kernel(sup.reference, p.seq_len, in.shape.grid_bh, 128, 0, args, nullptr);
  cuda_check(cudaDeviceSynchronize(), "reference kernel");
  dref.download(ref.data(), ref.size() * sizeof(double));
  return ref;
}

// Runs one kernel kind once against the reference, then times it: warm-up, then each run after an L2
// flush and a poisoned output, between two events; the output must not change between runs. Throws
// CudaError.
void run_kernel(const Kernel& kern, const Inputs& in, const std::vector<double>& ref, const Support& sup,
                const BenchOptions& opt, const DeviceBuffer& flush, const ProblemResult& r, KernelResult& kr) {
  double ref_max = 0;
  for (double x : ref) ref_max = std::max(ref_max, std::fabs(x));
  auto poison = [&] { cuda_check(cudaMemsetAsync(in.o.get(), 0xff, in.o.size(), nullptr), "poison output"); };
  auto launch = [&] {
    if (in.shape.cu.empty())
      kern.launch(in.q.get(), in.k.get(), in.v.get(), in.o.get());
    else
      kern.launch_varlen(in.q.get(), in.k.get(), in.v.get(), in.o.get(), static_cast<const int*>(in.cu.get()),
                         in.shape.sequences());
  };
  poison();
  launch();
  cuda_check(cudaGetLastError(), "kernel launch");
  cuda_check(cudaDeviceSynchronize(), "kernel run");
  std::vector<double> out = download_doubles(sup, in.o, in.nq);
  double max_abs = 0;
  bool nan = false;
  for (size_t e = 0; e < out.size(); ++e) {
    double d = std::fabs(out[e] - ref[e]);
    if (!(d == d)) nan = true;
    else max_abs = std::max(max_abs, d);
  }
  kr.max_abs_err = nan ? NAN : max_abs;
  kr.rel_err = nan ? NAN : (ref_max > 0 ? max_abs / ref_max : max_abs);
  kr.pass = !nan && kr.rel_err <= kr.tolerance;
  if (nan) kr.note = "output has NaN (unwritten or invalid elements)";
  for (int w = 0; w < opt.warmup; ++w) launch();
  Event e0, e1;
  std::vector<double> ms;
  for (int it = 0; it < opt.repeat; ++it) {
    cuda_check(cudaMemsetAsync(flush.get(), it & 0xff, flush.size(), nullptr), "L2 flush");
    poison();
    cuda_check(cudaEventRecord(e0.e, nullptr), "cudaEventRecord");
    launch();
    cuda_check(cudaEventRecord(e1.e, nullptr), "cudaEventRecord");
    cuda_check(cudaEventSynchronize(e1.e), "timed run");
    float t = 0;
    cuda_check(cudaEventElapsedTime(&t, e0.e, e1.e), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  std::vector<double> again = download_doubles(sup, in.o, in.nq);
  kr.deterministic = std::memcmp(again.data(), out.data(), out.size() * sizeof(double)) == 0 || nan;
  if (!kr.deterministic) {
    kr.pass = false;
    kr.note = "the output changed between runs (race)";
  }
  kr.ran = true;
  kr.repeats = opt.repeat;
  kr.ms_median = median(ms);
  kr.ms_min = ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end());
  kr.ms_max = ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end());
  double sec = kr.ms_median * 1e-3;
  if (sec > 0) {
    kr.tflops = r.flops / sec / 1e12;
    kr.gbps = r.bytes / sec / 1e9;
    kr.pct_memory_floor = r.floor_memory_us * 1e-6 / sec * 100;
    kr.pct_compute_floor = r.floor_compute_us * 1e-6 / sec * 100;
  }
}

std::string describe(const DeviceInfo& dev, const std::string& arch) {
  return dev.name + " (" + arch + ", " + std::to_string(dev.sms) + " SMs, " + std::to_string(dev.memory >> 20) +
         " MiB, driver " + std::to_string(dev.driver_version) + ", runtime " + std::to_string(dev.runtime_version) +
         ", NVRTC " + nvrtc_version() + ")";
}

}  // namespace

std::string support_source(DType t, int64_t hd) {
  std::string s = "#define SPLAT_HD " + std::to_string(hd) + "\n";
  s += "#include \"splat/reference.cuh\"\n";
  s += "typedef " + std::string(elt(t)) + " T;\n";
  s += "extern \"C\" __global__ void splat_fill(void* out, long long n, unsigned long long seed) {\n"
       "  reference_fill<T>(out, n, seed);\n}\n";
  s += "extern \"C\" __global__ void splat_to_double(const void* in, double* out, long long n) {\n"
       "  reference_to_double<T>(in, out, n);\n}\n";
  s += "extern \"C\" __global__ void __launch_bounds__(128) splat_reference(const void* q, const void* k,\n"
       "    const void* v, double* out, const long long* row_ptr, const int* runs, long long seq, long long kvl,\n"
       "    double scale, long long group, const int* cu_seqlens, long long heads) {\n"
       "  reference_attention<T>(q, k, v, out, row_ptr, runs, seq, kvl, scale, group, cu_seqlens, heads);\n}\n";
  return s;
}


std::vector<ProblemResult> bench(const std::vector<Problem>& problems, const BenchOptions& opt,
                                 std::string& device_description,
                                 const std::function<void(const ProblemResult&)>& progress) {
  DeviceInfo dev = device_info();
  const std::string arch = opt.arch.empty() ? dev.target_arch() : opt.arch;
  const CompileTarget target = load_target(dev, arch);
  device_description = describe(dev, arch);
  std::map<std::string, std::future<CompileResult>> support_cubins;
  std::vector<Prepared> prep = prepare(problems, opt, arch, target, dev.target_arch(), support_cubins);
  std::map<std::string, Support> supports;
  for (auto& [key, fut] : support_cubins) supports[key] = load_support(fut.get().image);
  // L2 flush buffer: written before every timed run so that each run starts from HBM.
  DeviceBuffer flush(std::max<size_t>(size_t{256} << 20, 4 * dev.l2_bytes));

  std::vector<ProblemResult> results;
  for (Prepared& x : prep) {
    const Problem& p = x.problem;
    ProblemResult r = problem_result(p, x.acsr, *x.gen, opt.ceilings);
    // A module without fused kernels (no engine for the head_dim) has no tuning to report.
    r.tuning = x.gen->fused.empty() ? "" : format_tuning(x.tuning.tuning);
    r.tuning_source = x.gen->fused.empty() ? "" : x.tuning.source;
    CompileResult cr = x.cubin.get();
    r.compile_seconds = cr.seconds;
    auto mod = std::make_shared<Module>(cr.image);
    const Support& sup = supports.at(x.support_key);
    const Inputs in(p, sup, opt.seed);
    const std::vector<double> ref = reference(p, x.acsr, in, sup, opt.host_reference_max_cells, r.reference);
    auto gen_ptr = std::shared_ptr<const GeneratedModule>(x.gen);
    for (KernelKind kind : {KernelKind::Fused, KernelKind::Pipeline}) {
      if ((kind == KernelKind::Fused && !opt.fused) || (kind == KernelKind::Pipeline && !opt.pipeline)) continue;
      if (kind == KernelKind::Pipeline && x.gen->pipeline.empty()) continue;  // a packed batch: fused kernels only
      if (kind == KernelKind::Fused && x.gen->fused.empty()) {  // generate() fell back to the pipeline
        spdlog::warn("{}: no fused kernel: {}; the pipeline runs", p.name, x.gen->selection.engine.reason);
        continue;
      }
      KernelResult kr;
      kr.kind = kernel_kind_name(kind);
      kr.tolerance = tolerance(p.dtype);
      try {
        run_kernel(Kernel(gen_ptr, mod, kind, p.batch * p.heads), in, ref, sup, opt, flush, r, kr);
      } catch (const CudaError& e) {
        kr.ran = false;
        kr.pass = false;
        kr.note = e.what();
        cudaGetLastError();
        // A sticky error (illegal address) poisons the context: nothing after it can run.
        if (cudaDeviceSynchronize() != cudaSuccess) {
          r.kernels.push_back(kr);
          results.push_back(r);
          if (progress) progress(r);
          throw;
        }
      }
      r.kernels.push_back(kr);
    }
    results.push_back(r);
    if (progress) progress(r);
  }
  return results;
}

}  // namespace splat

namespace splat {

CompiledFused compile_fused(const Problem& p, const Acsr& acsr, const KernelTuning& tuning, const std::string& arch,
                            CompileTarget target) {
  CodegenOptions co;
  co.pipeline = false;
  co.arch = arch;
  co.tuning = tuning;
  CompiledFused c;
  c.gen = std::make_shared<const GeneratedModule>(generate(p, acsr, co));
  CompileResult r = nvrtc_compile(c.gen->source, p.name + ".cu", arch, target);
  c.image = std::move(r.image);
  c.compile_seconds = r.seconds;
  return c;
}

struct FusedBench::State {
  BenchOptions opt;
  DeviceInfo dev;
  std::string arch, device;
  CompileTarget target = CompileTarget::Cubin;  // how variants for arch load on the device (load_target)
  std::map<std::string, Support> supports;  // by dtype/head_dim
  std::unique_ptr<DeviceBuffer> flush;
  // The current problem.
  std::optional<Problem> problem;
  const Support* support = nullptr;
  std::unique_ptr<Inputs> inputs;
  std::vector<double> ref;
  ProblemResult facts;
};

FusedBench::FusedBench(const BenchOptions& opt) : s_(std::make_unique<State>()) {
  s_->opt = opt;
  s_->dev = device_info();
  s_->arch = opt.arch.empty() ? s_->dev.target_arch() : opt.arch;
  s_->target = load_target(s_->dev, s_->arch);
  s_->device = describe(s_->dev, s_->arch);
  s_->flush = std::make_unique<DeviceBuffer>(std::max<size_t>(size_t{256} << 20, 4 * s_->dev.l2_bytes));
}

FusedBench::~FusedBench() = default;
const std::string& FusedBench::device_description() const { return s_->device; }
const std::string& FusedBench::arch() const { return s_->arch; }
CompileTarget FusedBench::target() const { return s_->target; }

std::string FusedBench::set_problem(const Problem& p, const Acsr& acsr) {
  State& s = *s_;
  s.inputs.reset();
  const std::string key = std::string(dtype_name(p.dtype)) + "/" + std::to_string(p.head_dim);
  if (!s.supports.count(key))
    s.supports[key] = load_support(nvrtc_compile(support_source(p.dtype, p.head_dim), "splat_support.cu",
                                                 s.dev.target_arch(), CompileTarget::Cubin).image);
  s.support = &s.supports.at(key);
  s.problem = p;
  s.inputs = std::make_unique<Inputs>(p, *s.support, s.opt.seed);
  std::string what;
  s.ref = reference(p, acsr, *s.inputs, *s.support, s.opt.host_reference_max_cells, what);
  GeneratedModule facts;
  facts.nnz = acsr.nnz();
  s.facts = problem_result(p, acsr, facts, s.opt.ceilings);
  return what;
}

KernelResult FusedBench::run(const CompiledFused& variant) {
  State& s = *s_;
  if (!s.problem) throw std::logic_error("FusedBench::run before set_problem");
  const Problem& p = *s.problem;
  KernelResult kr;
  kr.kind = kernel_kind_name(KernelKind::Fused);
  kr.tolerance = tolerance(p.dtype);
  try {
    auto mod = std::make_shared<Module>(variant.image);
    run_kernel(Kernel(variant.gen, mod, KernelKind::Fused, p.batch * p.heads), *s.inputs, s.ref, *s.support, s.opt,
               *s.flush, s.facts, kr);
  } catch (const CudaError& e) {
    kr.ran = false;
    kr.pass = false;
    kr.note = e.what();
    cudaGetLastError();
    if (cudaDeviceSynchronize() != cudaSuccess) throw;  // a sticky error: the context is lost
  }
  return kr;
}

}  // namespace splat
