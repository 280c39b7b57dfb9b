#pragma once
// What ptxas made of each entry point (registers, spills, stack, static shared memory; read from
// the log of an NVRTC CUBIN compile with resource_info) and the occupancy that follows for a launch
// on an architecture. No GPU needed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace splat {

struct KernelResources {
  std::string name;              // entry point
  int registers = 0;             // per thread
  int64_t spill_stores_bytes = 0, spill_loads_bytes = 0;
  int64_t local_bytes = 0;       // stack frame per thread (local memory: spills and local arrays)
  int64_t shared_static_bytes = 0;
};

// The entry points ptxas reported in a log (nvrtc_compile(..., CompileTarget::Cubin, ..., true)),
// in the log's order. Throws std::runtime_error when the log has no report of an entry point.
std::vector<KernelResources> parse_ptxas_report(const std::string& log);

struct Occupancy {
  int max_blocks_per_sm = 0;  // resident blocks of this launch per SM (0: it does not fit)
  double occupancy = 0;       // resident warps / the SM's maximum
  std::string limit;          // what bounds max_blocks_per_sm: "registers", "shared memory", "threads", "blocks"
};

// The occupancy of a launch of `block` threads with `registers` per thread and `shared_bytes` of
// shared memory per block (static + dynamic) on arch ("sm_90a", ...): the CUDA occupancy rules
// (registers allocated per warp in units of 256, 1 KB of shared memory reserved per block). Empty
// for an architecture whose SM limits splatc does not know.
std::optional<Occupancy> occupancy(const std::string& arch, int block, int registers, int64_t shared_bytes);

}  // namespace splat
