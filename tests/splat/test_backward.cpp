// The backward pass's code generation (codegen/backward.h): what it refuses, its plans, and NVRTC
// compiling every backward module of patterns/ and tests/gpu.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>

#include "libsplat/analysis/analysis.h"
#include "libsplat/codegen/backward.h"
#include "libsplat/compile/resources.h"
#include "libsplat/pattern/pattern.h"
#include "nvrtc_cache.h"

using namespace splat;
namespace fs = std::filesystem;

namespace {

std::vector<fs::path> json_files(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// The problems the backward kernels take (bf16/fp16, head_dim % 8 == 0 and <= 128, one pattern, no
// packed batch).
bool backward_takes(const Problem& p) {
  return (p.dtype == DType::BF16 || p.dtype == DType::FP16) && p.head_dim % 8 == 0 && p.head_dim <= 128 &&
         p.head_groups.empty() && !p.varlen;
}

}  // namespace

TEST_CASE("every backward module of patterns/ and tests/gpu compiles for sm_80 and sm_90a" * doctest::test_suite("nvrtc")) {
  int n = 0;
  for (const char* dir : {"patterns", "tests/gpu"})
    for (const fs::path& f : json_files(fs::path(TRSPLAT_SOURCE_DIR) / dir)) {
      const Problem p = load_problem(f.string());
      if (!backward_takes(p)) continue;
      CAPTURE(p.name);
      const BackwardModule m = generate_backward(p, analyze(p));
      const bool small = p.seq_len <= 8192;
      const CompileResult r = test_compile(m.source, p.name + ".bwd.cu", small ? "sm_80" : "sm_90a",
                                           small ? CompileTarget::Cubin : CompileTarget::Ptx);
      CHECK(!r.image.empty());
      ++n;
    }
  CHECK(n > 20);
}

// ptxas on the backward kernels (sm_90a): every entry point the module lists, and at most 64 bytes of
// spills per thread (a guard against register blow-ups: the kernels run at 168-255 registers, and
// strided's, head_dim 128's and BigBird's spill 4-32 bytes; the variants that spill none, areg=0 or
// cw=32, measured no faster: docs/performance.md).
TEST_CASE("backward kernels: registers and spills (window, strided, bigbird, fixed; d 64 and 128)" * doctest::test_suite("nvrtc")) {
  for (const char* name : {"patterns/window-4k-bf16.json", "patterns/strided-4k-bf16.json", "patterns/bigbird-4k-fp16.json",
                           "tests/gpu/window-d128-ragged-bf16.json", "tests/gpu/fixed-causal-bf16.json"}) {
    const Problem p = load_problem((fs::path(TRSPLAT_SOURCE_DIR) / name).string());
    CAPTURE(p.name);
    const BackwardModule m = generate_backward(p, analyze(p));
    const CompileResult r = nvrtc_compile(m.source, p.name + ".bwd.cu", "sm_90a", CompileTarget::Cubin, TRSPLAT_NVRTC_CACHE, true);
    const std::vector<KernelResources> res = parse_ptxas_report(r.log);
    for (const KernelDesc& k : m.kernels) {
      CAPTURE(k.name);
      auto it = std::find_if(res.begin(), res.end(), [&](const KernelResources& x) { return x.name == k.name; });
      REQUIRE(it != res.end());
      MESSAGE(k.name << ": " << it->registers << " registers, spills " << it->spill_stores_bytes);
      CHECK(it->spill_stores_bytes <= 64);
    }
  }
}
