#pragma once
// Timing reports of `splatc bench`: per problem and kernel kind, the time (median/min/max of N
// CUDA-event timings after warm-up, L2 flushed before each run), useful TFLOP/s (4*B*H*nnz*d),
// GB/s of the minimal traffic (Q read and O written once, the K and V rows of kept keys read once
// per K/V head), the share of the memory and
// compute floors, and the error against a float64 reference.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace splat {

// Ceilings used for floors: measured on an H200 (docs/performance.md; h200 peer timings).
struct Ceilings {
  double bandwidth = 4.23e12;  // bytes/s, device-to-device copy (read + write)
  double bf16 = 686e12, fp16 = 686e12, tf32 = 355e12, fp32 = 51e12;  // FLOP/s, matrix products
};

struct KernelResult {
  std::string kind;            // "fused" or "pipeline"
  bool ran = false;
  std::string note;            // why it did not run, or what went wrong
  double ms_median = 0, ms_min = 0, ms_max = 0;
  int repeats = 0;
  double tflops = 0;           // useful FLOP / median time
  double gbps = 0;             // minimal bytes / median time
  double pct_memory_floor = 0, pct_compute_floor = 0;  // floor time / median time, in %
  double max_abs_err = 0, rel_err = 0;  // rel = max|o - ref| / max|ref|
  double tolerance = 0;
  double lse_err = -1;         // --lse: max |lse - ref| / max(1, |ref|) over the rows (<= tolerance); -1: not saved
  bool deterministic = true;   // the last timed run reproduced the checked output bit for bit
  bool pass = false;
};

struct ProblemResult {
  std::string name, file, dtype;
  int64_t seq_len = 0, kv_len = 0, head_dim = 0, heads = 0, batch = 0;
  int64_t kv_heads = 0, q_offset = 0;
  int64_t total_tokens = 0;    // a packed variable-length batch: its tokens (batch: its sequences); 0 otherwise
  int64_t nnz = 0;             // per head (per-head patterns: the mean over the heads)
  int head_groups = 0;         // per-head patterns: the head groups (a module each); 0 otherwise
  double density = 0;
  double flops = 0;            // useful FLOP, all heads
  double bytes = 0;            // minimal bytes: Q, O once; K, V rows of kept keys once per K/V head
  double floor_memory_us = 0, floor_compute_us = 0;
  std::string reference;       // "host float64" or "gpu float64"
  std::string pattern_hash;
  int passes = 0;
  double tile_fill = 0;
  bool tensor_cores = false;
  std::string engine;          // fused kernel's engine (GeneratedModule::engine)
  double compile_seconds = 0;
  std::string tuning;          // the fused kernel's tuning (format_tuning; "" the defaults)
  std::string tuning_source;   // "default", "--tune" or "cache FILE"
  std::vector<KernelResult> kernels;
  // Set when one of the problem's modules did not compile (NVRTC on splatc's generated code: an
  // internal error, not a failed check): its kernels did not run; bench goes on with the others.
  std::string internal_error;
  bool pass() const;
};

double floor_us(const ProblemResult& r);  // max(memory, compute)

std::string format_bench_table(const std::vector<ProblemResult>& results, const std::string& device);
// The JSON report (docs/cli.md, "bench --json"); its layout is versioned by schema_version.
inline constexpr int kBenchSchemaVersion = 1;
nlohmann::json bench_json(const std::vector<ProblemResult>& results, const std::string& device);
// CSV (RFC 4180: comma-separated, fields with a comma, quote or line break quoted, quotes doubled):
// a header line, then one line per problem and kernel kind (docs/cli.md, "bench --csv").
std::string bench_csv(const std::vector<ProblemResult>& results, const std::string& device);

}  // namespace splat
