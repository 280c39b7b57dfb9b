#include "libsplat/report/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace splat {

bool ProblemResult::pass() const {
  // A kernel that was asked for but could not run counts as a failure.
  for (const KernelResult& k : kernels)
    if (!k.pass) return false;
  return true;
}

double floor_us(const ProblemResult& r) { return std::max(r.floor_memory_us, r.floor_compute_us); }

std::string format_bench_table(const std::vector<ProblemResult>& results, const std::string& device) {
  std::ostringstream o;
  char line[512];
  o << "device: " << device << "\n";
  std::snprintf(line, sizeof line, "%-20s %6s %5s %-8s %10s %10s %10s %8s %8s %6s %6s %9s %9s %s\n", "pattern", "L",
                "dtype", "kernel", "median_us", "min_us", "max_us", "TFLOP/s", "GB/s", "%mem", "%comp", "max_abs",
                "rel_err", "check");
  o << line;
  for (const ProblemResult& r : results) {
    for (const KernelResult& k : r.kernels) {
      if (!k.ran) {
        std::snprintf(line, sizeof line, "%-20s %6lld %5s %-8s %s\n", r.name.c_str(), static_cast<long long>(r.seq_len),
                      r.dtype.c_str(), k.kind.c_str(), ("not run: " + k.note).c_str());
        o << line;
        continue;
      }
      std::snprintf(line, sizeof line,
                    "%-20s %6lld %5s %-8s %10.1f %10.1f %10.1f %8.2f %8.1f %6.1f %6.1f %9.2e %9.2e %s%s\n",
                    r.name.c_str(), static_cast<long long>(r.seq_len), r.dtype.c_str(), k.kind.c_str(),
                    k.ms_median * 1e3, k.ms_min * 1e3, k.ms_max * 1e3, k.tflops, k.gbps, k.pct_memory_floor,
                    k.pct_compute_floor, k.max_abs_err, k.rel_err, k.pass ? "pass" : "FAIL",
                    k.deterministic ? "" : " (nondeterministic)");
      o << line;
    }
    if (!r.tuning_source.empty() && r.tuning_source != "default")
      o << "  " << r.name << " fused tuning: " << (r.tuning.empty() ? "the defaults" : r.tuning) << " (" << r.tuning_source
        << ")\n";
  }
  o << "floors: memory = Q, O and the K, V rows of kept keys moved once at 4.23 TB/s; compute = 4*B*H*nnz*d at 686 (bf16/fp16), 355 (tf32), "
       "51 (fp32) TFLOP/s (H200 ceilings); rel_err = max|o-ref|/max|ref| against float64\n";
  return o.str();
}

nlohmann::json bench_json(const std::vector<ProblemResult>& results, const std::string& device) {
  nlohmann::json out = {{"schema_version", kBenchSchemaVersion}, {"device", device}, {"problems", nlohmann::json::array()}};
  for (const ProblemResult& r : results) {
    nlohmann::json ks = nlohmann::json::array();
    for (const KernelResult& k : r.kernels) {
      ks.push_back({{"kind", k.kind},
                    {"ran", k.ran},
                    {"note", k.note},
                    {"time_ms", {{"median", k.ms_median}, {"min", k.ms_min}, {"max", k.ms_max}}},
                    {"repeats", k.repeats},
                    {"tflops", k.tflops},
                    {"gbps", k.gbps},
                    {"pct_memory_floor", k.pct_memory_floor},
                    {"pct_compute_floor", k.pct_compute_floor},
                    {"max_abs_err", k.max_abs_err},
                    {"rel_err", k.rel_err},
                    {"tolerance", k.tolerance},
                    {"deterministic", k.deterministic},
                    {"pass", k.pass}});
      if (k.lse_err >= 0) ks.back()["lse_err"] = k.lse_err;
    }
    out["problems"].push_back({{"name", r.name},
                               {"file", r.file},
                               {"dtype", r.dtype},
                               {"seq_len", r.seq_len},
                               {"kv_len", r.kv_len},
                               {"head_dim", r.head_dim},
                               {"heads", r.heads},
                               {"kv_heads", r.kv_heads},
                               {"q_offset", r.q_offset},
                               {"batch", r.batch},
                               {"nnz_per_head", r.nnz},
                               {"density", r.density},
                               {"useful_flop", r.flops},
                               {"min_bytes", r.bytes},
                               {"floor_memory_us", r.floor_memory_us},
                               {"floor_compute_us", r.floor_compute_us},
                               {"floor_us", floor_us(r)},
                               {"reference", r.reference},
                               {"pattern_hash", r.pattern_hash},
                               {"passes", r.passes},
                               {"tile_fill", r.tile_fill},
                               {"tensor_cores", r.tensor_cores},
                               {"engine", r.engine},
                               {"compile_seconds", r.compile_seconds},
                               {"tuning", {{"values", r.tuning}, {"source", r.tuning_source}}},
                               {"kernels", ks}});
    if (r.total_tokens > 0) out["problems"].back()["total_tokens"] = r.total_tokens;
    if (r.head_groups > 0) out["problems"].back()["head_groups"] = r.head_groups;
    if (!r.internal_error.empty()) out["problems"].back()["internal_error"] = r.internal_error;
  }
  return out;
}

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

}  // namespace

std::string bench_csv(const std::vector<ProblemResult>& results, const std::string& device) {
  std::ostringstream o;
  o << "device,name,file,dtype,seq_len,kv_len,q_offset,head_dim,heads,kv_heads,batch,nnz_per_head,engine,tuning,"
       "kernel,ran,median_us,min_us,max_us,repeats,tflops,gbps,floor_us,pct_memory_floor,pct_compute_floor,"
       "max_abs_err,rel_err,tolerance,deterministic,pass,note\n";
  for (const ProblemResult& r : results)
    for (const KernelResult& k : r.kernels) {
      const std::string cells[] = {
          device, r.name, r.file, r.dtype, std::to_string(r.seq_len), std::to_string(r.kv_len), std::to_string(r.q_offset),
          std::to_string(r.head_dim), std::to_string(r.heads), std::to_string(r.kv_heads), std::to_string(r.batch),
          std::to_string(r.nnz), r.engine, r.tuning, k.kind, k.ran ? "1" : "0", num(k.ms_median * 1e3),
          num(k.ms_min * 1e3), num(k.ms_max * 1e3), std::to_string(k.repeats), num(k.tflops), num(k.gbps), num(floor_us(r)),
          num(k.pct_memory_floor), num(k.pct_compute_floor), num(k.max_abs_err), num(k.rel_err), num(k.tolerance),
          k.deterministic ? "1" : "0", k.pass ? "1" : "0", k.note};
      bool first = true;
      for (const std::string& c : cells) {
        o << (first ? "" : ",") << csv_field(c);
        first = false;
      }
      o << "\n";
    }
  return o.str();
}

}  // namespace splat
