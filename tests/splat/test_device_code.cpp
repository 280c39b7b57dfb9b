// The device headers as embedded in libsplat (libsplat/device/embedded.h) and the module text built
// from them (libsplat/codegen/device_code.h). No NVRTC here: tests/device compiles them.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "libsplat/codegen/device_code.h"
#include "libsplat/device/embedded.h"

namespace fs = std::filesystem;
using namespace splat;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("every libsplat/device/*.cuh is embedded byte for byte as splat/<file>, and nothing else") {
  std::map<std::string, std::string> on_disk;
  for (const auto& e : fs::directory_iterator(fs::path(TRSPLAT_SOURCE_DIR) / "libsplat/device"))
    if (e.path().extension() == ".cuh") on_disk["splat/" + e.path().filename().string()] = read_file(e.path());
  REQUIRE(!on_disk.empty());
  std::map<std::string, std::string> embedded;
  std::string previous;
  for (const EmbeddedFile& f : device_files()) {
    CHECK(std::string(f.name) > previous);  // sorted, no name twice
    previous = f.name;
    embedded[f.name] = f.text;
  }
  CHECK(embedded.size() == on_disk.size());
  for (const auto& [name, text] : on_disk) {
    CAPTURE(name);
    REQUIRE(embedded.count(name) == 1);
    CHECK(embedded[name] == text);
  }
}

TEST_CASE("the module's #include lines reach every embedded header") {
  const std::string inc = device_includes();
  std::istringstream lines(inc);
  std::string line;
  while (std::getline(lines, line)) {
    CAPTURE(line);
    CHECK(line.rfind("#include \"splat/", 0) == 0);
  }
  const std::string all = inline_device_headers(inc);
  for (const EmbeddedFile& f : device_files()) {
    CAPTURE(f.name);
    CHECK(count(all, std::string("// ---- ") + f.name + " (") == 1);
  }
}

TEST_CASE("inline_device_headers: each header once in place of its #include, other lines kept") {
  const std::string src =
      "#define SPLAT_HD 64\n#include <cuda_fp16.h>\n#include \"splat/engine_wgmma.cuh\"\n"
      "  #include \"splat/common.cuh\"  \nint after;\n";
  const std::string out = inline_device_headers(src);
  CHECK(out.rfind("#define SPLAT_HD 64\n#include <cuda_fp16.h>\n", 0) == 0);
  CHECK(out.ends_with("int after;\n"));
  CHECK(out.find("#include \"splat/") == std::string::npos);
  CHECK(out.find("#pragma once") == std::string::npos);
  // engine_wgmma includes engine_mma, which includes common and plan: each once, dependencies first.
  for (const char* h : {"common.cuh", "plan.cuh", "engine_mma.cuh", "engine_wgmma.cuh"}) {
    CAPTURE(h);
    CHECK(count(out, std::string("// ---- splat/") + h + " (") == 1);
  }
  CHECK(out.find("struct bf16_t") < out.find("struct WalkD"));
  CHECK(out.find("struct WalkD") < out.find("struct MmaEngine {"));
  CHECK(out.find("struct MmaEngine {") < out.find("struct WgmmaEngine"));
  CHECK(count(out, "struct MmaEngine {") == 1);
  CHECK(out.find("// ---- splat/fused_driver.cuh") == std::string::npos);  // only what is included
  CHECK_THROWS_AS(inline_device_headers("#include \"splat/no-such.cuh\"\n"), std::logic_error);
}
