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
#include "libsplat/codegen/backward.h"
#include "libsplat/codegen/codegen.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/runtime/bench_backward.h"
#include "libsplat/runtime/bench_common.h"
#include "libsplat/runtime/kernel.h"
#include "libsplat/runtime/runtime.h"

namespace splat {
namespace {

using namespace bench_detail;

// Host float64 reference over the pattern's own mask (kept()), independent of the analysis: the
// rows of the heads the problem serves, written into ref ([batch, heads, seq_len, head_dim]).
void host_reference(const Problem& p, const std::vector<double>& q, const std::vector<double>& k,
                    const std::vector<double>& v, Reference& ref) {
  std::vector<double>& o = ref.o;
  const int64_t L = p.seq_len, KV = p.kv_len, D = p.head_dim, G = p.heads / p.kv_heads;
  std::vector<std::vector<int64_t>> keys(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i)
    for (int64_t j = 0; j < KV; ++j)
      if (kept(p, i, j)) keys[static_cast<size_t>(i)].push_back(j);
  std::vector<int64_t> bhs;  // batch * heads + h of the served heads
  for (int64_t bb = 0; bb < p.batch; ++bb)
    for (int64_t h : served_head_list(p)) bhs.push_back(bb * p.heads + h);
  std::vector<double> s;
  for (int64_t b : bhs)
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
      ref.lse[static_cast<size_t>(b * L + i)] = mx + std::log(l);
    }
}

// The same for a packed variable-length batch: sequence b (tokens cu[b] ..) keeps the pattern's (i, j)
// with i, j < its length; q, o [total, heads, d], k, v [total, kv_heads, d].
void host_reference_varlen(const Problem& p, const std::vector<int32_t>& cu, const std::vector<double>& q,
                           const std::vector<double>& k, const std::vector<double>& v, Reference& ref) {
  std::vector<double>& o = ref.o;
  const int64_t H = p.heads, KVH = p.kv_heads, D = p.head_dim, G = p.heads / p.kv_heads;
  std::vector<double> s;
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    const int64_t start = cu[b], len = cu[b + 1] - cu[b];
    for (int64_t h : served_head_list(p))
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
        ref.lse[static_cast<size_t>((start + i) * H + h)] = mx + std::log(l);
      }
  }
}


// One module of a problem: the problem itself, or one head group of it (per-head patterns).
struct PartFacts {
  const Problem* problem;
  const Acsr* acsr;
  const GeneratedModule* gen;
};

// One module: the problem's, or a head group's (per-head patterns).
struct PreparedPart {
  Problem problem;
  Acsr acsr;
  std::shared_ptr<GeneratedModule> gen;
  std::future<CompileResult> cubin;
  ResolvedTuning tuning;
};

struct Prepared {
  Problem problem;
  std::vector<PreparedPart> parts;
  std::string support_key;
  // --pass backward|both: the backward module of each part (head group) and its compile, or why the
  // problem has none.
  std::vector<std::shared_ptr<const BackwardModule>> bwd;
  std::vector<std::future<CompileResult>> bwd_cubin;
  std::string bwd_error;
  std::vector<PartFacts> facts() const {
    std::vector<PartFacts> f;
    for (const PreparedPart& x : parts) f.push_back({&x.problem, &x.acsr, x.gen.get()});
    return f;
  }
};

// The backward modules of a prepared problem (one per head group), compiled in the background (or
// why there are none).
void prepare_backward(Prepared& x, const BackwardTuning& tuning, const std::string& arch, CompileTarget target) {
  try {
    check_backward(x.problem);
    for (const PreparedPart& part : x.parts)
      x.bwd.push_back(std::make_shared<const BackwardModule>(generate_backward(part.problem, part.acsr, tuning, arch)));
  } catch (const Error& e) {
    x.bwd.clear();
    x.bwd_error = e.message();
    return;
  }
  for (const auto& m : x.bwd) {
    std::string src = m->source, name = m->name + ".bwd.cu";
    x.bwd_cubin.push_back(std::async(std::launch::async, [src, name, arch, target] { return nvrtc_compile(src, name, arch, target); }));
  }
}

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
    for (Problem& part : head_group_problems(p)) {
      PreparedPart y;
      y.problem = std::move(part);
      y.acsr = analyze(y.problem);
      CodegenOptions co;
      co.fused = opt.fused;
      co.pipeline = opt.pipeline;
      y.tuning = resolve_tuning(y.problem, arch, opt.tuning, opt.cache);
      if (opt.fused && y.tuning.source != "default")
        spdlog::info("{}: fused kernel tuning {} ({})", y.problem.name, format_tuning(y.tuning.tuning), y.tuning.source);
      co.tuning = y.tuning.tuning;
      co.test = opt.test;
      co.arch = arch;
      co.save_lse = opt.save_lse || opt.backward;
      y.gen = std::make_shared<GeneratedModule>(generate(y.problem, y.acsr, co));
      std::string src = y.gen->source, name = y.problem.name + ".cu";
      y.cubin = std::async(std::launch::async, [src, name, arch, target] {
        return nvrtc_compile(src, name, arch, target);
      });
      x.parts.push_back(std::move(y));
    }
    if (opt.backward) prepare_backward(x, opt.backward_tuning, arch, target);
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

// Keys below len that some row below len keeps, over several ACSRs (the head groups that share a
// K/V head; a key no row keeps is never read): marks every run's columns, stopping once every key
// is marked.
int64_t keys_read(const std::vector<const Acsr*>& acsrs, int64_t rows, int64_t cols) {
  std::vector<char> seen(static_cast<size_t>(cols), 0);
  int64_t n = 0;
  for (const Acsr* acsr : acsrs)
    for (int64_t i = 0; i < std::min(rows, acsr->seq_len) && n < cols; ++i)
      for (const Run& r : acsr->row(i))
        for (int64_t c = 0; c < r.count && r.start + c * r.stride < cols && n < cols; ++c) {
          char& s = seen[static_cast<size_t>(r.start + c * r.stride)];
          n += s == 0;
          s = 1;
        }
  return n;
}

// Kept (i, j) with i, j < len (one head of a sequence of length len of a packed batch).
int64_t kept_below(const Acsr& acsr, int64_t len) {
  int64_t n = 0;
  for (int64_t i = 0; i < std::min(len, acsr.seq_len); ++i)
    for (const Run& r : acsr.row(i))
      n += r.start >= len ? 0 : r.stride <= 0 ? r.count : std::min(r.count, (len - r.start + r.stride - 1) / r.stride);
  return n;
}

// Totals over the served heads of one batch entry (a plain batch) or of every sequence (a packed
// batch): kept (i, j), the K/V rows read once per K/V head (the union over the head groups that
// read it), Q/O rows, and the cells sum(length^2) (or seq_len * kv_len).
struct Counts {
  double kept = 0, kv_rows = 0, q_rows = 0, cells = 0;
  int64_t heads = 0, tokens = 0;
};
Counts counts(const Problem& p, const std::vector<PartFacts>& parts, const std::vector<int32_t>& cu) {
  std::vector<int64_t> lengths;  // a plain batch: one entry of seq_len rows, kv_len keys
  if (p.varlen)
    for (size_t b = 0; b + 1 < cu.size(); ++b) lengths.push_back(cu[b + 1] - cu[b]);
  else
    lengths.push_back(p.seq_len);
  // The parts that read each K/V head.
  std::map<std::vector<size_t>, int64_t> kv_readers;  // set of parts -> K/V heads it reads
  std::vector<std::vector<size_t>> readers(static_cast<size_t>(p.kv_heads));
  Counts n;
  for (size_t g = 0; g < parts.size(); ++g)
    for (int64_t h : served_head_list(*parts[g].problem)) {
      ++n.heads;
      std::vector<size_t>& r = readers[static_cast<size_t>(h / (p.heads / p.kv_heads))];
      if (r.empty() || r.back() != g) r.push_back(g);
    }
  for (const std::vector<size_t>& r : readers)
    if (!r.empty()) ++kv_readers[r];
  std::map<int64_t, double> kept_of_length;  // all served heads, one sequence
  for (int64_t len : lengths) {
    const int64_t keys = p.varlen ? len : p.kv_len;
    n.tokens += len;
    n.cells += double(len) * double(keys);
    auto [it, fresh] = kept_of_length.try_emplace(len, 0.0);
    if (fresh)
      for (const PartFacts& x : parts)
        it->second += double(served_heads(*x.problem)) *
                      double(p.varlen ? kept_below(*x.acsr, len) : x.gen ? x.gen->nnz : x.acsr->nnz());
    n.kept += it->second;
    n.q_rows += double(n.heads) * double(len);
    for (const auto& [r, count] : kv_readers) {
      std::vector<const Acsr*> acsrs;
      for (size_t g : r) acsrs.push_back(parts[g].acsr);
      n.kv_rows += double(count) * double(keys_read(acsrs, len, keys));
    }
  }
  return n;
}

// The result's problem facts and floors (no GPU work): p and its modules (p itself, or its head
// groups).
ProblemResult problem_result(const Problem& p, const std::vector<PartFacts>& parts, const Ceilings& ceilings) {
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
  r.head_groups = p.head_groups.empty() ? 0 : static_cast<int>(parts.size());
  const std::vector<int32_t> cu = p.varlen ? launch_shape(p).cu : std::vector<int32_t>{};
  const Counts n = counts(p, parts, cu);
  const double batch = p.varlen ? 1.0 : double(p.batch), D = double(p.head_dim);
  if (p.varlen) {
    r.batch = static_cast<int64_t>(p.varlen->lengths.size());
    r.total_tokens = n.tokens;
  }
  // Per head: the mean over the served heads (one pattern: its nnz).
  r.nnz = static_cast<int64_t>(std::llround(n.kept / double(std::max<int64_t>(n.heads, 1))));
  r.density = n.kept / double(std::max<int64_t>(n.heads, 1)) / std::max(n.cells, 1.0);
  r.flops = 4.0 * batch * n.kept * D;
  // Q read and O written once; the K and V rows of every kept key read once per K/V head.
  r.bytes = 2.0 * batch * (n.q_rows + n.kv_rows) * D * double(dtype_bytes(p.dtype));
  r.floor_memory_us = r.bytes / ceilings.bandwidth * 1e6;
  r.floor_compute_us = r.flops / compute_rate(ceilings, p.dtype) * 1e6;
  double slots = 0, kept = 0;
  for (const PartFacts& x : parts) {
    if (!x.gen) continue;
    const double h = double(served_heads(*x.problem));
    r.pattern_hash += (r.pattern_hash.empty() ? "" : "+") + x.gen->pattern_hash;
    r.passes = std::max(r.passes, static_cast<int>(x.gen->plan.passes.size()));
    slots += h * double(x.gen->plan.key_slots);
    kept += h * double(x.gen->plan.nnz);
  }
  r.tile_fill = slots > 0 ? kept / slots : 1.0;
  r.tensor_cores = parts.front().gen && parts.front().gen->tensor_cores;
  r.engine = parts.front().gen ? parts.front().gen->engine : "";
  return r;
}

// The float64 reference output of the heads p serves (a head group's, else all), written into ref
// (in.nq elements, zero where no row is written): host brute force over the pattern for small
// problems, else a plain masked GPU reference over the ACSR's rows. what: which one.
void reference(const Problem& p, const Acsr& acsr, const Inputs& in, const Support& sup, int64_t host_max_cells,
               std::string& what, Reference& ref) {
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
    if (p.varlen)
      host_reference_varlen(p, cu, q, k, v, ref);
    else
      host_reference(p, q, k, v, ref);
    return;
  }
  what = "gpu float64 (masked rows from the ACSR)";
  const DeviceRuns rows(acsr);
  DeviceBuffer dref(ref.o.size() * sizeof(double)), dlse(ref.lse.size() * sizeof(double));
  dref.upload(ref.o.data(), dref.size());  // the other heads' rows as they are
  dlse.upload(ref.lse.data(), dlse.size());
  std::vector<int32_t> ids(p.group_heads.begin(), p.group_heads.end());
  DeviceBuffer dids(std::max<size_t>(ids.size(), 1) * sizeof(int32_t));
  if (!ids.empty()) dids.upload(ids.data(), ids.size() * sizeof(int32_t));
  const void *qp = in.q.get(), *kp = in.k.get(), *vp = in.v.get(), *rp = rows.ptr.get(), *up = rows.runs.get();
  double *op = static_cast<double*>(dref.get()), *lp = static_cast<double*>(dlse.get());
  long long seq = p.seq_len, kvl = p.kv_len;
  double scale = p.scale;
  long long group = p.heads / p.kv_heads, heads = p.heads, group_heads = served_heads(p);
  const void* cup = in.cu.get();  // null unless varlen
  const void* idp = ids.empty() ? nullptr : dids.get();
  void* args[] = {&qp, &kp, &vp, &op, &rp, &up, &seq, &kvl, &scale, &group, &cup, &heads, &idp, &group_heads, &lp};
  const int64_t grid_y = in.shape.grid_bh / p.heads * group_heads;  // batch (or sequences) x the served heads
  launch_kernel(sup.reference, p.seq_len, grid_y, 128, 0, args, nullptr);
  cuda_check(cudaDeviceSynchronize(), "reference kernel");
  dref.download(ref.o.data(), dref.size());
  dlse.download(ref.lse.data(), dlse.size());
}

// Whether element e of q (and o) belongs to a head that p's kernels serve (a head group's, else all).
std::vector<char> served_elements(const Problem& p, int64_t n) {
  std::vector<char> head(static_cast<size_t>(p.heads), p.group_heads.empty() ? 1 : 0), mask(static_cast<size_t>(n));
  for (int64_t h : p.group_heads) head[static_cast<size_t>(h)] = 1;
  const int64_t per_head = p.varlen ? p.head_dim : p.seq_len * p.head_dim;  // consecutive elements of one head
  for (int64_t e = 0; e < n; ++e) mask[static_cast<size_t>(e)] = head[static_cast<size_t>(e / per_head % p.heads)];
  return mask;
}

// The kernel's log-sum-exp (lse, fp32) against the reference's over the rows of the heads p serves:
// kr.lse_err = max |lse - ref| / max(1, |ref|) over the rows with kept keys, which must be at most
// tol, and a row with none must be -inf. Returns "" or what failed.
std::string check_lse(const Problem& p, const DeviceBuffer& lse, const Reference& ref, double tol, KernelResult& kr) {
  std::vector<float> got(ref.lse.size());
  lse.download(got.data(), got.size() * sizeof(float));
  std::vector<char> head(static_cast<size_t>(p.heads), p.group_heads.empty() ? 1 : 0);
  for (int64_t h : p.group_heads) head[static_cast<size_t>(h)] = 1;
  const int64_t per_head = p.varlen ? 1 : p.seq_len;  // consecutive rows of one head
  double worst = 0;
  for (size_t r = 0; r < got.size(); ++r) {
    if (!head[static_cast<size_t>(static_cast<int64_t>(r) / per_head % p.heads)]) continue;
    const double want = ref.lse[r], g = got[r];
    if (std::isinf(want)) {
      if (!(std::isinf(g) && g < 0)) return "lse of row " + std::to_string(r) + " (no kept key) is " + std::to_string(g) + ", not -inf";
      continue;
    }
    if (!std::isfinite(g)) return "lse of row " + std::to_string(r) + " is " + std::to_string(g);
    worst = std::max(worst, std::fabs(g - want) / std::max(1.0, std::fabs(want)));
  }
  kr.lse_err = worst;
  return worst <= tol ? "" : "lse error above tolerance";
}

// Runs one kernel kind once against the reference (the elements of the heads p serves; with
// opt.save_lse each row's log-sum-exp too), then times it: warm-up, then each run after an L2 flush
// and a poisoned output, between two events; the output must not change between runs. Throws
// CudaError.
void run_kernel(const Problem& p, const Kernel& kern, const Inputs& in, const Reference& reference,
                const Support& sup, const BenchOptions& opt, const DeviceBuffer& flush, const ProblemResult& r,
                KernelResult& kr) {
  const std::vector<double>& ref = reference.o;
  const std::vector<char> served = served_elements(p, in.nq);
  double ref_max = 0;
  for (size_t e = 0; e < ref.size(); ++e)
    if (served[e]) ref_max = std::max(ref_max, std::fabs(ref[e]));
  DeviceBuffer lse;
  if (opt.save_lse) lse = DeviceBuffer(reference.lse.size() * sizeof(float));
  auto poison = [&] {
    cuda_check(cudaMemsetAsync(in.o.get(), 0xff, in.o.size(), nullptr), "poison output");
    if (lse.get()) cuda_check(cudaMemsetAsync(lse.get(), 0xff, lse.size(), nullptr), "poison lse");
  };
  float* lp = static_cast<float*>(lse.get());
  auto launch = [&] {
    if (in.shape.cu.empty())
      kern.launch(in.q.get(), in.k.get(), in.v.get(), in.o.get(), nullptr, lp);
    else
      kern.launch_varlen(in.q.get(), in.k.get(), in.v.get(), in.o.get(), static_cast<const int*>(in.cu.get()),
                         in.shape.sequences(), nullptr, lp);
  };
  poison();
  launch();
  cuda_check(cudaGetLastError(), "kernel launch");
  cuda_check(cudaDeviceSynchronize(), "kernel run");
  std::vector<double> out = download_doubles(sup, in.o, in.nq);
  double max_abs = 0;
  bool nan = false;
  for (size_t e = 0; e < out.size(); ++e) {
    if (!served[e]) continue;
    double d = std::fabs(out[e] - ref[e]);
    if (!(d == d)) nan = true;
    else max_abs = std::max(max_abs, d);
  }
  kr.max_abs_err = nan ? NAN : max_abs;
  kr.rel_err = nan ? NAN : (ref_max > 0 ? max_abs / ref_max : max_abs);
  kr.pass = !nan && kr.rel_err <= kr.tolerance;
  if (nan) kr.note = "output has NaN (unwritten or invalid elements)";
  if (lp != nullptr) {
    const std::string bad = check_lse(p, lse, reference, kr.tolerance, kr);
    if (!bad.empty()) {
      kr.pass = false;
      kr.note += (kr.note.empty() ? "" : "; ") + bad;
    }
  }
  time_runs(opt, flush, poison, launch, kr);
  std::vector<double> again = download_doubles(sup, in.o, in.nq);
  kr.deterministic = std::memcmp(again.data(), out.data(), out.size() * sizeof(double)) == 0 || nan;
  if (!kr.deterministic) {
    kr.pass = false;
    kr.note = "the output changed between runs (race)";
  }
  double sec = kr.ms_median * 1e-3;
  if (sec > 0) {
    kr.tflops = r.flops / sec / 1e12;
    kr.gbps = r.bytes / sec / 1e9;
    kr.pct_memory_floor = r.floor_memory_us * 1e-6 / sec * 100;
    kr.pct_compute_floor = r.floor_compute_us * 1e-6 / sec * 100;
  }
}

// The fused kernels' tuning and where it came from (per-head patterns: each head group's, when they
// differ); none for a module without fused kernels (no engine for the head_dim).
void set_tuning(const Prepared& x, ProblemResult& r) {
  std::vector<std::string> tunings, sources;
  for (const PreparedPart& y : x.parts) {
    if (y.gen->fused.empty()) return;
    tunings.push_back(format_tuning(y.tuning.tuning));
    sources.push_back(y.tuning.source);
  }
  const bool same = std::all_of(tunings.begin(), tunings.end(), [&](const std::string& t) { return t == tunings[0]; }) &&
                    std::all_of(sources.begin(), sources.end(), [&](const std::string& t) { return t == sources[0]; });
  for (size_t g = 0; g < tunings.size() && !same; ++g) {
    const std::string sep = g ? "; " : "", label = "h" + std::to_string(g) + ": ";
    r.tuning += sep + label + (tunings[g].empty() ? "defaults" : tunings[g]);
    r.tuning_source += sep + label + sources[g];
  }
  if (same) {
    r.tuning = tunings[0];
    r.tuning_source = sources[0];
  }
}

// --pass backward|both: the backward's results appended to r, or why it has none. Throws CudaError.
void backward_results(Prepared& x, const std::vector<std::shared_ptr<Module>>& mods, const Inputs& in, const Reference& ref,
                      const Support& sup, const BenchOptions& opt, const DeviceBuffer& flush, ProblemResult& r) {
  const Problem& p = x.problem;
  if (x.bwd.empty()) {  // as a forward without a fused engine: a warning, no result
    spdlog::warn("{}: no backward kernels: {}", p.name, x.bwd_error);
    return;
  }
  std::vector<Kernel> fwds;
  std::vector<BackwardKernel> bwds;
  std::vector<BackwardPart> parts;
  for (size_t g = 0; g < x.parts.size(); ++g) {
    const CompileResult cr = x.bwd_cubin[g].get();  // CompileError: bench records it for the problem
    r.compile_seconds += cr.seconds;
    const Problem& gp = x.parts[g].problem;
    const int64_t bh = gp.batch * served_heads(gp);
    fwds.emplace_back(x.parts[g].gen, mods[g], KernelKind::Fused, bh);
    bwds.emplace_back(x.bwd[g], std::make_shared<Module>(cr.image), bh);
    parts.push_back({&gp, &x.parts[g].acsr, x.bwd[g].get()});
  }
  const Kernel fwd = fwds.size() == 1 ? fwds.front() : Kernel::of_head_groups(std::move(fwds));
  const BackwardKernel bwd = bwds.size() == 1 ? bwds.front() : BackwardKernel::of_head_groups(std::move(bwds));
  const BackwardRun run{p, parts, fwd, bwd, in, ref, sup, opt, flush, r, tolerance(p.dtype), opt.forward};
  for (KernelResult& k : run_backward(run)) r.kernels.push_back(std::move(k));
}

// A module of the problem did not compile: the error on the log, a failed kernel of that kind, and
// the problem's internal_error (its first line), so that splatc bench exits 3 after the others ran.
void record_compile_error(ProblemResult& r, const std::string& kind, const CompileError& e) {
  spdlog::error("{}: internal error: {}", r.name, e.what());
  const std::string what = e.what();
  r.internal_error = what.substr(0, what.find('\n'));
  KernelResult kr;
  kr.kind = kind;
  kr.note = "internal error: " + r.internal_error;
  r.kernels.push_back(kr);
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
       "    double scale, long long group, const int* cu_seqlens, long long heads, const int* head_ids,\n"
       "    long long group_heads, double* lse) {\n"
       "  reference_attention<T>(q, k, v, out, row_ptr, runs, seq, kvl, scale, group, cu_seqlens, heads, head_ids,\n"
       "                         group_heads, lse);\n}\n";
  s += "extern \"C\" __global__ void __launch_bounds__(128) splat_reference_bwd_rows(const void* q, const void* k,\n"
       "    const void* v, const void* dout, const double* lse, const long long* row_ptr, const int* runs, long long seq,\n"
       "    long long kvl, double scale, long long group, const int* cu_seqlens, long long heads, double* delta,\n"
       "    double* dq) {\n"
       "  reference_backward_rows<T>(q, k, v, dout, lse, row_ptr, runs, seq, kvl, scale, group, cu_seqlens, heads, delta,\n"
       "                             dq);\n}\n";
  s += "extern \"C\" __global__ void __launch_bounds__(128) splat_reference_bwd_cols(const void* q, const void* k,\n"
       "    const void* v, const void* dout, const double* lse, const double* delta, const long long* col_ptr,\n"
       "    const int* runs, long long seq, long long kvl, double scale, long long group, const int* cu_seqlens,\n"
       "    long long heads, const int* head_on, double* dk, double* dv) {\n"
       "  reference_backward_cols<T>(q, k, v, dout, lse, delta, col_ptr, runs, seq, kvl, scale, group, cu_seqlens, heads,\n"
       "                             head_on, dk, dv);\n}\n";
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
    ProblemResult r = problem_result(p, x.facts(), opt.ceilings);
    const GeneratedModule& gen0 = *x.parts.front().gen;  // the groups share the engine (same dtype, head_dim)
    // A module without fused kernels (no engine for the head_dim) has no tuning to report.
    set_tuning(x, r);
    std::vector<std::shared_ptr<Module>> mods;
    try {
      for (PreparedPart& y : x.parts) {
        CompileResult cr = y.cubin.get();
        r.compile_seconds += cr.seconds;
        mods.push_back(std::make_shared<Module>(cr.image));
      }
    } catch (const CompileError& e) {  // the problem's other compiles finish in their futures
      record_compile_error(r, "module", e);
      results.push_back(r);
      if (progress) progress(r);
      continue;
    }
    const Support& sup = supports.at(x.support_key);
    const Inputs in(p, sup, opt.seed);
    Reference ref(in.nq, p.head_dim);
    for (const PreparedPart& y : x.parts)
      reference(y.problem, y.acsr, in, sup, opt.host_reference_max_cells, r.reference, ref);
    for (KernelKind kind : {KernelKind::Fused, KernelKind::Pipeline}) {
      if (!opt.forward || (kind == KernelKind::Fused && !opt.fused) || (kind == KernelKind::Pipeline && !opt.pipeline)) continue;
      if (kind == KernelKind::Pipeline && gen0.pipeline.empty()) continue;  // a packed batch: fused kernels only
      if (kind == KernelKind::Fused && gen0.fused.empty()) {  // generate() fell back to the pipeline
        spdlog::warn("{}: no fused kernel: {}; the pipeline runs", p.name, gen0.selection.engine.reason);
        continue;
      }
      KernelResult kr;
      kr.kind = kernel_kind_name(kind);
      kr.tolerance = tolerance(p.dtype);
      try {
        std::vector<Kernel> groups;
        for (size_t g = 0; g < x.parts.size(); ++g)
          groups.emplace_back(x.parts[g].gen, mods[g], kind, x.parts[g].problem.batch * served_heads(x.parts[g].problem));
        const Kernel kern = groups.size() == 1 ? groups.front() : Kernel::of_head_groups(std::move(groups));
        run_kernel(p, kern, in, ref, sup, opt, flush, r, kr);
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
    if (opt.backward) {
      try {
        backward_results(x, mods, in, ref, sup, opt, flush, r);
      } catch (const CompileError& e) {
        record_compile_error(r, "backward", e);
      } catch (const CudaError& e) {
        KernelResult kr;
        kr.kind = "backward";
        kr.note = e.what();
        r.kernels.push_back(kr);
        cudaGetLastError();
        if (cudaDeviceSynchronize() != cudaSuccess) {  // a sticky error: the context is lost
          results.push_back(r);
          if (progress) progress(r);
          throw;
        }
      }
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
  std::optional<Reference> ref;
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
  s.ref.emplace(s.inputs->nq, p.head_dim);
  reference(p, acsr, *s.inputs, *s.support, s.opt.host_reference_max_cells, what, *s.ref);
  s.facts = problem_result(p, {{&p, &acsr, nullptr}}, s.opt.ceilings);
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
    run_kernel(p, Kernel(variant.gen, mod, KernelKind::Fused, p.batch * served_heads(p)), *s.inputs, *s.ref, *s.support,
               s.opt, *s.flush, s.facts, kr);
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
