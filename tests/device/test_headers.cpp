// The device headers (libsplat/device/*.cuh) under NVRTC: each compiles alone, diagnostics cite them
// by their include name and line, and the self-contained .cu of `emit --target cuda` compiles to the
// same PTX as the module with its #include lines.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "libsplat/compile/emit.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/runtime/bench.h"
#include "libsplat/device/embedded.h"
#include "libsplat/pattern/pattern.h"

namespace fs = std::filesystem;
using namespace splat;

namespace {

// What every emitted module defines before its #include lines (codegen's SPLAT_* prologue).
const std::string kPrologue = "#define SPLAT_SEQ 1024\n#define SPLAT_KV 1024\n#define SPLAT_HD 64\n";
// Defined where the plan has global keys in blocks (WgmmaEngine's #ifdef SPLAT_GLAT_C path).
const std::string kGlobalBlocks =
    "#define SPLAT_GLAT_TAB 0\n#define SPLAT_GLAT_P 256\n#define SPLAT_GLAT_C 8\n#define SPLAT_GLAT_T0 0\n"
    "#define SPLAT_GLAT_B0 0\n";

// The NVRTC log of a failed compile, or "" when it compiled.
std::string compile_error(const std::string& source, const std::string& arch) {
  try {
    nvrtc_compile(source, "alone.cu", arch, CompileTarget::Ptx);
    return "";
  } catch (const CompileError& e) {
    return e.what();
  }
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

TEST_SUITE_BEGIN("nvrtc");

TEST_CASE("every device header compiles alone with NVRTC, given only the module's prologue") {
  REQUIRE(!device_files().empty());
  for (const EmbeddedFile& f : device_files())
    for (const char* arch : {"sm_90a", "sm_80"}) {
      CAPTURE(f.name);
      CAPTURE(arch);
      CHECK(compile_error(kPrologue + "#include \"" + f.name + "\"\n", arch) == "");
    }
  CHECK(compile_error(kPrologue + kGlobalBlocks + "#include \"splat/engine_wgmma.cuh\"\n", "sm_90a") == "");
}

TEST_CASE("NVRTC cites a device header by its include name and its line in libsplat/device") {
  // gather_kv's static_assert (stage and tensor elements of one size), instantiated with float stages
  // and bf16 tensors.
  const std::string src = kPrologue + "#include \"splat/plan.cuh\"\n" +
                          "__global__ void k(float* s, const bf16_t* g, WalkD w) {\n"
                          "  gather_kv<64, 64, 64, 128, 72, 72>(s, s, g, g, w, 0, nullptr);\n}\n";
  const std::string log = compile_error(src, "sm_80");
  REQUIRE(log != "");
  const std::string text = read_file(fs::path(TRSPLAT_SOURCE_DIR) / "libsplat/device/plan.cuh");
  const size_t at = text.find("static_assert(sizeof(S) == sizeof(E)");
  REQUIRE(at != std::string::npos);
  const long line = 1 + std::count(text.begin(), text.begin() + static_cast<long>(at), '\n');
  CAPTURE(log);
  CHECK(log.find("splat/plan.cuh(" + std::to_string(line) + "): error") != std::string::npos);
}

TEST_CASE("emit --target cuda: the self-contained .cu compiles to the PTX of --target ptx") {
  const Problem p = parse_problem_text(
      R"({"name": "w", "seq_len": 512, "head_dim": 64, "dtype": "bf16", "pattern": {"window": {"left": 16, "right": 16}}})",
      "w");
  const fs::path dir = fs::temp_directory_path() / ("splat_device_emit_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  {
    const char* arch = "sm_80";
    EmitOptions o;
    o.arch = arch;
    o.target = "cuda";
    emit(p, o, (dir / "cuda").string());
    o.target = "ptx";
    emit(p, o, (dir / "ptx").string());
    const std::string cu = read_file(dir / "cuda" / (p.name + ".cu"));
    CHECK(cu.find("#include \"splat/") == std::string::npos);
    CHECK(cu.find("#pragma once") == std::string::npos);
    CHECK(cu.find("struct WgmmaEngine") != std::string::npos);
    const CompileResult again = nvrtc_compile(cu, p.name + ".cu", arch, CompileTarget::Ptx);
    CHECK(again.image == read_file(dir / "ptx" / (p.name + ".ptx")));
  }
  fs::remove_all(dir);
}

TEST_CASE("NVRTC result cache: identical input is read back with its log, any other input compiles") {
  const fs::path dir = fs::temp_directory_path() / ("splat_nvrtc_cache_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const std::string src = "#include \"splat/common.cuh\"\nextern \"C\" __global__ void k(float* x) { x[0] = fast_exp2(x[1]); }\n";
  const CompileResult first = nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Ptx, dir.string());
  CHECK(!first.cached);
  const CompileResult again = nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Ptx, dir.string());
  CHECK(again.cached);
  CHECK(again.image == first.image);
  CHECK(again.image == nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Ptx).image);
  // Another program name (logs cite it), architecture, target, option or source is another entry.
  CHECK(!nvrtc_compile(src, "b.cu", "sm_80", CompileTarget::Ptx, dir.string()).cached);
  CHECK(!nvrtc_compile(src, "a.cu", "sm_90", CompileTarget::Ptx, dir.string()).cached);
  const CompileResult cubin = nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Cubin, dir.string());
  CHECK(!cubin.cached);
  CHECK(nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Cubin, dir.string()).image == cubin.image);
  CHECK(!nvrtc_compile(src + "// changed\n", "a.cu", "sm_80", CompileTarget::Ptx, dir.string()).cached);
  // ptxas's resource report is a log: it comes back from the cache as it was written.
  const CompileResult info = nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Cubin, dir.string(), true);
  CHECK(!info.cached);
  CHECK(info.log.find("Compiling entry function 'k'") != std::string::npos);
  const CompileResult info2 = nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Cubin, dir.string(), true);
  CHECK(info2.cached);
  CHECK(info2.log == info.log);
  CHECK(info2.image == info.image);
  // A compile with warnings is stored with them and replays them.
  const std::string warns = "extern \"C\" __global__ void w() { int unused; }\n";
  const CompileResult w = nvrtc_compile(warns, "w.cu", "sm_80", CompileTarget::Ptx, dir.string());
  REQUIRE(w.log != "");
  const CompileResult w2 = nvrtc_compile(warns, "w.cu", "sm_80", CompileTarget::Ptx, dir.string());
  CHECK(w2.cached);
  CHECK(w2.log == w.log);
  // Failed compiles are errors every time.
  CHECK_THROWS_AS(nvrtc_compile("__global__ void f() { nope(); }", "f.cu", "sm_80", CompileTarget::Ptx, dir.string()),
                  CompileError);
  // A file of another format (or a truncated one) is not read back.
  size_t entries = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string()[0] == '.') continue;
    ++entries;
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "bad";
  }
  CHECK(entries == 7);  // a.cu and b.cu sm_80 ptx, sm_90 ptx, sm_80 cubin, changed source, resource cubin, w.cu
  CHECK(!nvrtc_compile(src, "a.cu", "sm_80", CompileTarget::Ptx, dir.string()).cached);
  fs::remove_all(dir);
}

TEST_CASE("bench's support module (reference.cuh instantiated) compiles for every dtype") {
  for (DType t : {DType::FP32, DType::TF32, DType::FP16, DType::BF16})
    for (int64_t hd : {16, 64, 256}) {
      CAPTURE(dtype_name(t));
      CAPTURE(hd);
      const std::string src = support_source(t, hd);
      CHECK(src.find("#include \"splat/reference.cuh\"") != std::string::npos);
      CHECK(compile_error(src, "sm_80") == "");
    }
}

TEST_SUITE_END();
