// The device headers as embedded in libsplat (libsplat/device/embedded.h) and the module text built
// from them (libsplat/codegen/device_code.h); the hash of the NVRTC cache. No NVRTC here: tests/device
// compiles them.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "libsplat/codegen/device_code.h"
#include "libsplat/compile/sha256.h"
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

TEST_SUITE_BEGIN("unit");

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

TEST_CASE("the module's #include lines, the backward's and the bench's reference kernels reach every embedded header") {
  // backward_tf32.cuh and backward_wgmma.cuh include backward.cuh: the backward modules reach all three.
  const std::string inc = device_includes();
  std::istringstream lines(inc);
  std::string line;
  while (std::getline(lines, line)) {
    CAPTURE(line);
    CHECK(line.rfind("#include \"splat/", 0) == 0);
  }
  const std::string all = inline_device_headers(inc + "#include \"splat/backward_tf32.cuh\"\n#include \"splat/backward_wgmma.cuh\"\n#include \"splat/reference.cuh\"\n");
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
  // engine_wgmma includes engine_mma, which includes common, plan and online_softmax: each once,
  // dependencies first.
  for (const char* h : {"common.cuh", "plan.cuh", "online_softmax.cuh", "engine_mma.cuh", "engine_wgmma.cuh"}) {
    CAPTURE(h);
    CHECK(count(out, std::string("// ---- splat/") + h + " (") == 1);
  }
  CHECK(out.find("struct bf16_t") < out.find("struct WalkD"));
  CHECK(out.find("struct WalkD") < out.find("struct MmaEngine :"));
  CHECK(out.find("struct OnlineSoftmax") < out.find("struct MmaEngine :"));
  CHECK(out.find("struct MmaEngine :") < out.find("struct WgmmaEngine"));
  CHECK(count(out, "struct MmaEngine :") == 1);
  CHECK(out.find("// ---- splat/fused_driver.cuh") == std::string::npos);  // only what is included
  CHECK_THROWS_AS(inline_device_headers("#include \"splat/no-such.cuh\"\n"), std::logic_error);
}

TEST_CASE("SHA-256 of the FIPS 180-4 examples, split anywhere") {
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  CHECK(Sha256().hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256().add("abc").hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  for (size_t cut = 0; cut <= two_blocks.size(); cut += 7)
    CHECK(Sha256().add(two_blocks.substr(0, cut)).add(two_blocks.substr(cut)).hex() ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256().add(std::string(1000000, 'a')).hex() ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_SUITE_END();
