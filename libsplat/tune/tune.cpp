#include "libsplat/tune/tune.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <deque>
#include <future>
#include <sstream>

#include "libsplat/analysis/analysis.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/runtime/runtime.h"
#include "trsplat/version.h"

namespace splat {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

std::string label(const KernelTuning& t) { return t == KernelTuning{} ? "default" : format_tuning(t); }

void record(CandidateResult& c, const KernelResult& k) {
  c.kernel = k;
  if (!k.ran) {
    c.status = "not run: " + k.note;
  } else if (!k.pass) {
    char b[96];
    std::snprintf(b, sizeof b, "FAIL: rel err %.2e > %.0e", k.rel_err, k.tolerance);
    c.status = k.note.empty() ? std::string(b) : "FAIL: " + k.note;
  } else {
    c.status = "pass";
    c.us = k.ms_median * 1e3;
  }
}

// Candidates generated and compiled on other threads, up to `ahead` at once, in order.
class CompileQueue {
 public:
  CompileQueue(const CandidateRunner& runner, const Problem& p, const Acsr& acsr, const std::vector<KernelTuning>& tunings,
               int ahead)
      : runner_(runner), p_(p), acsr_(acsr), tunings_(tunings), ahead_(std::max(1, ahead)) {}
  // The next candidate's module (in order); throws what generating or compiling it threw. At most
  // `ahead` (and at least 1) compile at once, counting this one.
  CompiledFused next(int ahead) {
    ahead = std::clamp(ahead, 1, ahead_);
    while ((pending_.empty() || static_cast<int>(pending_.size()) < ahead) && started_ < tunings_.size()) {
      const KernelTuning t = tunings_[started_++];
      pending_.push_back(std::async(std::launch::async, [this, t] { return runner_.compile(p_, acsr_, t); }));
    }
    std::future<CompiledFused> f = std::move(pending_.front());
    pending_.pop_front();
    return f.get();
  }
  ~CompileQueue() {
    for (auto& f : pending_)
      if (f.valid()) f.wait();
  }

 private:
  const CandidateRunner& runner_;
  const Problem& p_;
  const Acsr& acsr_;
  const std::vector<KernelTuning>& tunings_;
  int ahead_;
  size_t started_ = 0;
  std::deque<std::future<CompiledFused>> pending_;
};

// Times the defaults and the best candidate again, alternately: each gets the best of these medians
// (the sweep's one timing no longer counts, so a lucky first timing cannot win alone).
void confirm(CandidateRunner& fb, const CompiledFused& def, const CompiledFused& best, CandidateResult& d, CandidateResult& b,
             int rounds) {
  double du = 0, bu = 0;
  for (int i = 0; i < rounds; ++i) {
    KernelResult kd = fb.run(def), kb = fb.run(best);
    if (!kd.pass) return record(d, kd);
    if (!kb.pass) return record(b, kb);
    du = i == 0 ? kd.ms_median * 1e3 : std::min(du, kd.ms_median * 1e3);
    bu = i == 0 ? kb.ms_median * 1e3 : std::min(bu, kb.ms_median * 1e3);
  }
  if (rounds > 0) d.us = du, b.us = bu;
}

// Picks the winner among the timed candidates and fills the entry to record.
void decide(TuneResult& r, CandidateRunner& fb, const CompiledFused& def, const CompiledFused* best, size_t best_i,
            const TuneOptions& o, const std::string& device) {
  CandidateResult& d = r.candidates[0];
  r.winner = {};
  r.default_us = r.winner_us = d.us;
  if (best && r.candidates[best_i].us < d.us * (1 - o.margin)) {
    CandidateResult& b = r.candidates[best_i];
    confirm(fb, def, *best, d, b, o.confirm_rounds);
    for (const CandidateResult* c : {&d, &b})
      if (c->kernel.ran && !c->kernel.pass) ++r.check_failures;
    r.default_us = d.us;
    if (b.status == "pass" && d.status == "pass" && b.us < d.us * (1 - o.margin)) {
      r.winner = b.tuning;
      r.winner_us = b.us;
      r.decision = "beats the defaults by more than " + std::to_string(static_cast<int>(o.margin * 100 + 0.5)) +
                   "% (confirmed by " + std::to_string(o.confirm_rounds) + " more timings of each, alternately)";
    } else {
      r.winner_us = r.default_us;
      r.decision = label(b.tuning) + " did not stay ahead when timed again: the defaults";
    }
  } else {
    r.decision = best ? "no candidate beats the defaults by more than " +
                            std::to_string(static_cast<int>(o.margin * 100 + 0.5)) + "%: the defaults"
                      : "no other candidate ran and passed: the defaults";
  }
  if (d.status != "pass") {
    r.default_ok = false;
    r.decision = "the defaults failed when timed again: nothing recorded";
    return;
  }
  TuningEntry e;
  e.tuning = format_tuning(r.winner);
  e.time_us = r.winner_us;
  e.default_us = r.default_us;
  e.date = utc_now();
  e.problem = r.name;
  e.dtype = r.dtype;
  e.head_dim = r.head_dim;
  e.arch = r.arch;
  e.version = TRSPLAT_VERSION;
  e.device = device;
  r.entry = e;
}

// The GPU: FusedBench.
class GpuRunner : public CandidateRunner {
 public:
  explicit GpuRunner(const BenchOptions& opt) : fb_(opt) {}
  std::string arch() const override { return fb_.arch(); }
  std::string device() const override { return fb_.device_description(); }
  std::string set_problem(const Problem& p, const Acsr& acsr) override { return fb_.set_problem(p, acsr); }
  CompiledFused compile(const Problem& p, const Acsr& acsr, const KernelTuning& t) const override {
    return compile_fused(p, acsr, t, fb_.arch(), fb_.target());
  }
  KernelResult run(const CompiledFused& c) override { return fb_.run(c); }

 private:
  FusedBench fb_;
};

}  // namespace

TuneResult tune_problem(CandidateRunner& fb, const Problem& p, const TuneOptions& o, double budget) {
  const Clock::time_point t0 = Clock::now();
  TuneResult r;
  r.name = p.name;
  r.file = p.file;
  r.dtype = dtype_name(p.dtype);
  r.head_dim = p.head_dim;
  r.arch = fb.arch();
  r.key = tuning_key(p, r.arch);
  const Acsr acsr = analyze(p);
  const CandidateSet cs = tuning_candidates(p, acsr, r.arch);
  r.engine = engine_name(cs.engine);
  r.kernels = cs.kernels;
  for (const KernelTuning& t : cs.tunings) r.candidates.push_back({t, "skipped: budget", {}, 0});
  r.reference = fb.set_problem(p, acsr);
  CompiledFused def, best;
  size_t best_i = 0;
  {
    CompileQueue queue(fb, p, acsr, cs.tunings, o.compile_ahead);
    double compile_s = 0, run_s = 0;  // so far, over i candidates
    for (size_t i = 0; i < cs.tunings.size(); ++i) {
      if (i > 0 && since(t0) > budget) break;
      CandidateResult& c = r.candidates[i];
      CompiledFused m;
      // Compiles ahead only for the candidates the budget is likely to reach (compiles started are
      // waited for at the end): a candidate takes about its compile time shared by the parallel
      // compiles, plus its run.
      const double per = i > 0 ? (compile_s / std::max(1, o.compile_ahead) + run_s) / static_cast<double>(i) : 0;
      const int reach = per > 0 ? static_cast<int>((budget - since(t0)) / per) : o.compile_ahead;
      try {
        m = queue.next(reach);
      } catch (const std::exception& e) {
        c.status = std::string("not run: ") + e.what();
        if (i == 0) break;
        continue;
      }
      compile_s += m.compile_seconds;
      const Clock::time_point run0 = Clock::now();
      record(c, fb.run(m));
      run_s += since(run0);
      spdlog::info("{} {}: {} ({:.1f} us)", p.name, label(c.tuning), c.status, c.us);
      if (c.kernel.ran && !c.kernel.pass) ++r.check_failures;
      if (i == 0) {
        if (c.status != "pass") break;  // nothing to compare with
        def = std::move(m);
      } else if (c.status == "pass" && (best_i == 0 || c.us < r.candidates[best_i].us)) {
        best_i = i;
        best = std::move(m);
      }
    }
  }
  r.default_ok = r.candidates[0].status == "pass";
  if (!r.default_ok)
    for (CandidateResult& c : r.candidates)
      if (c.status == "skipped: budget") c.status = "skipped: the defaults did not pass";
  if (r.default_ok)
    decide(r, fb, def, best_i ? &best : nullptr, best_i, o, fb.device());
  else
    r.decision = "the defaults did not pass: nothing recorded";
  r.seconds = since(t0);
  return r;
}

std::vector<TuneResult> tune(const std::vector<Problem>& given, const TuneOptions& opt, std::string& device_description,
                             const std::function<void(const TuneResult&)>& done) {
  // Per-head patterns: each head group is a module of its own, tuned (and cached) on its own.
  std::vector<Problem> problems;
  for (const Problem& p : given)
    for (Problem& g : head_group_problems(p)) problems.push_back(std::move(g));
  BenchOptions bo;
  bo.fused = true;
  bo.pipeline = false;
  bo.arch = opt.arch;
  bo.repeat = opt.repeat;
  bo.warmup = opt.warmup;
  bo.seed = opt.seed;
  GpuRunner fb(bo);
  device_description = fb.device();
  const Clock::time_point t0 = Clock::now();
  std::vector<TuneResult> out;
  for (size_t i = 0; i < problems.size(); ++i) {
    // An equal share of what is left: time a problem did not use goes to the ones after it.
    const double left = std::max(0.0, opt.budget_seconds - since(t0));
    out.push_back(tune_problem(fb, problems[i], opt, left / static_cast<double>(problems.size() - i)));
    if (done) done(out.back());
  }
  return out;
}

std::string format_tune_result(const TuneResult& r) {
  std::ostringstream o;
  char line[512];
  size_t run = 0, skipped = 0;
  for (const CandidateResult& c : r.candidates) (c.status == "skipped: budget" ? skipped : run)++;
  std::snprintf(line, sizeof line, "%s (%s, head_dim %lld, %s, %s: %s): %zu candidates, %zu run, %zu skipped (budget), %.1f s\n",
                r.name.c_str(), r.dtype.c_str(), static_cast<long long>(r.head_dim), r.arch.c_str(), r.engine.c_str(),
                r.kernels.c_str(), r.candidates.size(), run, skipped, r.seconds);
  o << line;
  std::snprintf(line, sizeof line, "  %-28s %10s %10s  %s\n", "candidate", "median_us", "vs default", "status");
  o << line;
  const double d = r.candidates.empty() ? 0 : r.candidates[0].us;
  for (const CandidateResult& c : r.candidates) {
    if (c.status == "skipped: budget") continue;
    std::string t = "-", v = "-";
    if (c.us > 0) {
      std::snprintf(line, sizeof line, "%.1f", c.us);
      t = line;
      if (d > 0) {
        std::snprintf(line, sizeof line, "%.3f", c.us / d);
        v = line;
      }
    }
    std::snprintf(line, sizeof line, "  %-28s %10s %10s  %s\n", label(c.tuning).c_str(), t.c_str(), v.c_str(), c.status.c_str());
    o << line;
  }
  if (skipped) o << "  (" << skipped << " more candidates not run: the budget was spent)\n";
  if (r.default_ok) {
    std::snprintf(line, sizeof line, "  winner: %s, %.1f us against the defaults' %.1f us (%.3f): %s\n",
                  r.winner == KernelTuning{} ? "the defaults" : format_tuning(r.winner).c_str(), r.winner_us, r.default_us,
                  r.default_us > 0 ? r.winner_us / r.default_us : 1.0, r.decision.c_str());
    o << line;
  } else {
    o << "  no winner: " << r.decision << "\n";
  }
  return o.str();
}

}  // namespace splat
