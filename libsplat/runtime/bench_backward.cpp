// splatc bench --pass backward|both: the backward kernels against float64 gradients, timed.
#include "libsplat/runtime/bench_backward.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>

#include "libsplat/runtime/bench_common.h"

namespace splat {
namespace {

using namespace bench_detail;

// The float64 gradients (reference.cuh: reference_backward_rows, reference_backward_cols) from the
// inputs and the float64 forward's log-sum-exp; a packed batch's sequence by sequence (in.cu).
struct Gradients {
  std::vector<double> dq, dk, dv;
};
// group_heads: the query heads whose dK/dV contributions count (a head group's); empty: all.
Gradients reference_gradients(const Problem& p, const BackwardModule& m, const Acsr& acsr, const Inputs& in,
                              const DeviceBuffer& dout, const Reference& ref, const Support& sup,
                              const std::vector<int64_t>& group_heads = {}) {
  const DeviceRuns rows(acsr), cols(m.plans.columns);
  DeviceBuffer dlse(ref.lse.size() * sizeof(double)), delta(ref.lse.size() * sizeof(double));
  dlse.upload(ref.lse.data(), dlse.size());
  DeviceBuffer dq(static_cast<size_t>(in.nq) * sizeof(double)), dk(static_cast<size_t>(in.nk) * sizeof(double)),
      dv(static_cast<size_t>(in.nk) * sizeof(double));
  const void *qp = in.q.get(), *kp = in.k.get(), *vp = in.v.get(), *dop = dout.get();
  const double* lp = static_cast<const double*>(dlse.get());
  double *deltap = static_cast<double*>(delta.get()), *dqp = static_cast<double*>(dq.get());
  double *dkp = static_cast<double*>(dk.get()), *dvp = static_cast<double*>(dv.get());
  const void *rp = rows.ptr.get(), *rr = rows.runs.get(), *cp = cols.ptr.get(), *cr = cols.runs.get();
  long long seq = p.seq_len, kvl = p.kv_len, group = p.heads / p.kv_heads, heads = p.heads;
  double scale = p.scale;
  const void* cup = in.cu.get();  // null unless varlen
  const int64_t units = p.varlen ? in.shape.sequences() : p.batch;  // batch entries or sequences
  void* rargs[] = {&qp, &kp, &vp, &dop, &lp, &rp, &rr, &seq, &kvl, &scale, &group, &cup, &heads, &deltap, &dqp};
  launch_kernel(sup.ref_bwd_rows, p.seq_len, units * p.heads, 128, 0, rargs, nullptr);
  const double* dcp = deltap;
  std::vector<int32_t> on(static_cast<size_t>(p.heads), group_heads.empty() ? 1 : 0);
  for (int64_t h : group_heads) on[static_cast<size_t>(h)] = 1;
  DeviceBuffer don(on.size() * sizeof(int32_t));
  don.upload(on.data(), don.size());
  const void* onp = group_heads.empty() ? nullptr : don.get();
  void* cargs[] = {&qp, &kp, &vp, &dop, &lp, &dcp, &cp, &cr, &seq, &kvl, &scale, &group, &cup, &heads, &onp, &dkp, &dvp};
  launch_kernel(sup.ref_bwd_cols, p.kv_len, units * p.kv_heads, 128, 0, cargs, nullptr);
  cuda_check(cudaDeviceSynchronize(), "backward reference kernels");
  Gradients g{std::vector<double>(static_cast<size_t>(in.nq)), std::vector<double>(static_cast<size_t>(in.nk)),
              std::vector<double>(static_cast<size_t>(in.nk))};
  dq.download(g.dq.data(), dq.size());
  dk.download(g.dk.data(), dk.size());
  dv.download(g.dv.data(), dv.size());
  return g;
}

// The float64 gradients of every part: a head group's reference runs over all heads with the group's
// pattern; its heads' dQ rows are kept, and dK and dV are the sums over the groups of their heads'
// contributions (a K/V head's query heads may lie in several groups).
Gradients all_reference_gradients(const BackwardRun& b, const DeviceBuffer& dout) {
  const Problem& p = b.problem;
  if (b.parts.size() == 1)
    return reference_gradients(p, *b.parts[0].module, *b.parts[0].acsr, b.inputs, dout, b.reference, b.support);
  Gradients all{std::vector<double>(static_cast<size_t>(b.inputs.nq)), std::vector<double>(static_cast<size_t>(b.inputs.nk)),
                std::vector<double>(static_cast<size_t>(b.inputs.nk))};
  // Consecutive elements of one head: a head's rows ([batch, heads, rows, d]), or one row (a packed
  // batch's [tokens, heads, d]).
  const int64_t qrun = p.varlen ? p.head_dim : p.seq_len * p.head_dim;
  for (const BackwardPart& part : b.parts) {
    const std::vector<int64_t>& heads = part.problem->group_heads;
    const Gradients g = reference_gradients(p, *part.module, *part.acsr, b.inputs, dout, b.reference, b.support, heads);
    std::vector<char> served(static_cast<size_t>(p.heads));
    for (int64_t h : heads) served[static_cast<size_t>(h)] = 1;
    for (int64_t at = 0; at * qrun < b.inputs.nq; ++at)
      if (served[static_cast<size_t>(at % p.heads)])
        std::copy_n(g.dq.begin() + at * qrun, qrun, all.dq.begin() + at * qrun);
    for (size_t e = 0; e < all.dk.size(); ++e) {
      all.dk[e] += g.dk[e];
      all.dv[e] += g.dv[e];
    }
  }
  return all;
}

// max|got - want| / max|want| (NaN when got has one).
double rel_error(const std::vector<double>& got, const std::vector<double>& want, double& max_abs) {
  double worst = 0, top = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double d = std::fabs(got[e] - want[e]);
    if (!(d == d)) return max_abs = NAN;
    worst = std::max(worst, d);
    top = std::max(top, std::fabs(want[e]));
  }
  max_abs = worst;
  return top > 0 ? worst / top : worst;
}

// The gradient buffers of one backward run.
struct Grads {
  DeviceBuffer dq, dk, dv;
  Grads(const Inputs& in, size_t esz)
      : dq(static_cast<size_t>(in.nq) * esz), dk(static_cast<size_t>(in.nk) * esz), dv(static_cast<size_t>(in.nk) * esz) {}
  void poison() const {
    for (const DeviceBuffer* b : {&dq, &dk, &dv}) cuda_check(cudaMemsetAsync(b->get(), 0xff, b->size(), nullptr), "poison");
  }
  std::vector<double> all(const Support& sup, const Inputs& in) const {
    std::vector<double> a = download_doubles(sup, dq, in.nq), k = download_doubles(sup, dk, in.nk),
                        v = download_doubles(sup, dv, in.nk);
    a.insert(a.end(), k.begin(), k.end());
    a.insert(a.end(), v.begin(), v.end());
    return a;
  }
};

// Useful rates and shares of the floors: flops_mul and bytes_mul times the forward's (the backward:
// 10*B*H*nnz*d, 2.5x; Q, O, dO, dQ and K, V, dK, dV rows, 2x).
void rates(const ProblemResult& r, double flops_mul, double bytes_mul, KernelResult& kr) {
  const double sec = kr.ms_median * 1e-3;
  if (sec <= 0) return;
  kr.tflops = flops_mul * r.flops / sec / 1e12;
  kr.gbps = bytes_mul * r.bytes / sec / 1e9;
  kr.pct_memory_floor = bytes_mul * r.floor_memory_us * 1e-6 / sec * 100;
  kr.pct_compute_floor = flops_mul * r.floor_compute_us * 1e-6 / sec * 100;
}

// The modules' resolved tuning (--tune-backward's form): "tuning K=V,...", or each head group's
// ("tuning h0: ...; h1: ...") where the groups' differ.
std::string tuning_note(const std::vector<BackwardPart>& parts) {
  std::vector<std::string> t;
  for (const BackwardPart& part : parts) t.push_back(format_backward_tuning(part.module->tuning));
  if (std::all_of(t.begin(), t.end(), [&](const std::string& x) { return x == t.front(); })) return "tuning " + t.front();
  std::string out = "tuning ";
  for (size_t g = 0; g < t.size(); ++g) out += (g ? "; h" : "h") + std::to_string(g) + ": " + t[g];
  return out;
}

}  // namespace

std::vector<KernelResult> run_backward(const BackwardRun& b) {
  const Problem& p = b.problem;
  const Inputs& in = b.inputs;
  const Support& sup = b.support;
  const size_t esz = static_cast<size_t>(dtype_bytes(p.dtype));
  DeviceBuffer dout(static_cast<size_t>(in.nq) * esz), lse(static_cast<size_t>(in.nq / p.head_dim) * sizeof(float));
  {
    void* ptr = dout.get();
    long long n = in.nq;
    unsigned long long s = b.opt.seed * 3 + 7;
    void* args[] = {&ptr, &n, &s};
    launch1d(sup.fill, n, args);
  }
  float* lp = static_cast<float*>(lse.get());
  const int* cu = static_cast<const int*>(in.cu.get());  // null unless varlen
  auto forward = [&] {
    if (cu == nullptr)
      b.forward.launch(in.q.get(), in.k.get(), in.v.get(), in.o.get(), nullptr, lp);
    else
      b.forward.launch_varlen(in.q.get(), in.k.get(), in.v.get(), in.o.get(), cu, in.shape.sequences(), nullptr, lp);
  };
  forward();
  cuda_check(cudaDeviceSynchronize(), "forward run (O and the log-sum-exp)");
  const Gradients want = all_reference_gradients(b, dout);
  const Grads g(in, esz);
  auto launch = [&] {
    if (cu == nullptr)
      b.backward.launch(in.q.get(), in.k.get(), in.v.get(), in.o.get(), dout.get(), lp, g.dq.get(), g.dk.get(), g.dv.get());
    else
      b.backward.launch_varlen(in.q.get(), in.k.get(), in.v.get(), in.o.get(), dout.get(), lp, g.dq.get(), g.dk.get(),
                               g.dv.get(), cu, in.shape.sequences());
  };
  KernelResult kr;
  kr.kind = "backward";
  kr.tolerance = b.tolerance;
  g.poison();
  launch();
  cuda_check(cudaGetLastError(), "backward launch");
  cuda_check(cudaDeviceSynchronize(), "backward run");
  const std::vector<double> got = g.all(sup, in);
  const auto part = [&](size_t at, size_t n) { return std::vector<double>(got.begin() + at, got.begin() + at + n); };
  double a[3];
  const double eq = rel_error(part(0, want.dq.size()), want.dq, a[0]);
  const double ek = rel_error(part(want.dq.size(), want.dk.size()), want.dk, a[1]);
  const double ev = rel_error(part(want.dq.size() + want.dk.size(), want.dv.size()), want.dv, a[2]);
  const bool nan = !(eq == eq) || !(ek == ek) || !(ev == ev);
  kr.rel_err = nan ? NAN : std::max({eq, ek, ev});
  kr.max_abs_err = nan ? NAN : std::max({a[0], a[1], a[2]});
  kr.pass = !nan && kr.rel_err <= kr.tolerance;
  char note[160];
  std::snprintf(note, sizeof note, "rel_err dQ %.2e, dK %.2e, dV %.2e", eq, ek, ev);
  kr.note = note;
  if (nan) kr.note += "; a gradient has NaN (unwritten or invalid elements)";
  time_runs(b.opt, b.flush, [&] { g.poison(); }, launch, kr);
  kr.deterministic = nan || std::memcmp(g.all(sup, in).data(), got.data(), got.size() * sizeof(double)) == 0;
  const bool fast = b.parts.front().module->mode == "fast";  // dQ by atomics: its bits may vary
  if (!kr.deterministic && !fast) {
    kr.pass = false;
    kr.note += "; the gradients changed between runs";
  }
  if (fast) kr.note += std::string("; fast mode (dQ by atomics): ") + (kr.deterministic ? "the same bits in this run" : "bits vary run to run");
  kr.note += "; " + tuning_note(b.parts);
  rates(b.result, 2.5, 2.0, kr);
  std::vector<KernelResult> out{kr};
  if (b.both) {  // the training step's attention: forward (with the log-sum-exp), then backward
    KernelResult both = kr;
    both.kind = "fwd+bwd";
    both.note = "forward with the log-sum-exp, then backward; checked as the two above";
    time_runs(b.opt, b.flush, [&] { g.poison(); }, [&] {
      forward();
      launch();
    }, both);
    rates(b.result, 3.5, 3.0, both);
    out.push_back(both);
  }
  return out;
}

}  // namespace splat
