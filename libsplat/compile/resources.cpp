#include "libsplat/compile/resources.h"

#include <algorithm>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace splat {

std::vector<KernelResources> parse_ptxas_report(const std::string& log) {
  // ptxas -v, per function:
  //   ptxas info    : Compiling entry function 'NAME' for 'sm_90a'
  //   ptxas info    : Function properties for NAME
  //       72 bytes stack frame, 236 bytes spill stores, 348 bytes spill loads
  //   ptxas info    : Used 255 registers, used 1 barriers, 72 bytes cumulative stack size, 3072 bytes smem
  static const std::regex entry(R"(Compiling entry function '([^']+)')");
  static const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  static const std::regex used(R"(Used (\d+) registers)");
  static const std::regex smem(R"((\d+) bytes smem)");
  std::vector<KernelResources> out;
  bool open = false;  // the last entry's "Used" line not yet seen
  std::istringstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_search(line, m, entry)) {
      out.push_back({});
      out.back().name = m[1];
      open = true;
    } else if (open && std::regex_search(line, m, frame)) {
      out.back().local_bytes = std::stoll(m[1]);
      out.back().spill_stores_bytes = std::stoll(m[2]);
      out.back().spill_loads_bytes = std::stoll(m[3]);
    } else if (open && std::regex_search(line, m, used)) {
      out.back().registers = std::stoi(m[1]);
      if (std::regex_search(line, m, smem)) out.back().shared_static_bytes = std::stoll(m[1]);
      open = false;
    }
  }
  if (out.empty() || open) throw std::runtime_error("no ptxas resource report in the NVRTC log:\n" + log);
  return out;
}

namespace {

struct SmLimits {
  int cc;
  int threads, blocks;
  int64_t shared;  // bytes per SM a kernel's blocks may use (the largest carveout)
};

// The CUDA C++ Programming Guide's table of compute capabilities; 64 K 32-bit registers per SM and
// 255 per thread on all of them.
constexpr SmLimits kLimits[] = {
    {80, 2048, 32, 164 * 1024}, {86, 1536, 16, 100 * 1024}, {87, 2048, 16, 164 * 1024}, {89, 1536, 24, 100 * 1024},
    {90, 2048, 32, 228 * 1024}, {100, 2048, 32, 228 * 1024}, {103, 2048, 32, 228 * 1024},
};
constexpr int64_t kRegistersPerSm = 65536, kRegisterUnit = 256, kReservedShared = 1024;

}  // namespace

std::optional<Occupancy> occupancy(const std::string& arch, int block, int registers, int64_t shared_bytes) {
  static const std::regex re(R"(sm_(\d+)a?)");
  std::smatch m;
  if (!std::regex_match(arch, m, re)) return std::nullopt;
  const int cc = std::stoi(m[1]);
  const SmLimits* lim = nullptr;
  for (const SmLimits& l : kLimits)
    if (l.cc == cc) lim = &l;
  if (lim == nullptr || block < 1) return std::nullopt;
  const int64_t warps = (block + 31) / 32;
  const int64_t warp_regs = (static_cast<int64_t>(std::max(registers, 1)) * 32 + kRegisterUnit - 1) / kRegisterUnit * kRegisterUnit;
  struct Bound {
    int64_t blocks;
    const char* why;
  };
  const Bound bounds[] = {
      {lim->blocks, "blocks"},
      {lim->threads / (warps * 32), "threads"},
      {kRegistersPerSm / warp_regs / warps, "registers"},
      {lim->shared / (shared_bytes + kReservedShared), "shared memory"},
  };
  const Bound* least = &bounds[0];
  for (const Bound& b : bounds)
    if (b.blocks < least->blocks) least = &b;
  Occupancy o;
  o.max_blocks_per_sm = static_cast<int>(std::max<int64_t>(least->blocks, 0));
  o.occupancy = static_cast<double>(o.max_blocks_per_sm * warps) / (lim->threads / 32);
  o.limit = least->why;
  return o;
}

}  // namespace splat
