// splat::emit: the files of `splatc emit`, written all or none.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "libsplat/compile/emit.h"
#include "libsplat/compile/nvrtc.h"
#include "libsplat/pattern/pattern.h"

TEST_SUITE_BEGIN("nvrtc");

namespace fs = std::filesystem;

namespace {

splat::Problem small_window() {
  return splat::parse_problem_text(
      R"({"name": "w", "seq_len": 256, "head_dim": 64, "dtype": "bf16",
          "pattern": {"window": {"left": 16, "right": 16}}})",
      "w");
}

fs::path scratch(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("splat_emit_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

}  // namespace

TEST_CASE("emit: ptx and manifest are written, and the manifest names every file") {
  fs::path dir = scratch("ptx");
  splat::EmitOptions o;
  o.target = "ptx";
  o.arch = "sm_90";
  const splat::EmitResult r = splat::emit(small_window(), o, dir.string());
  const std::vector<std::string>& written = r.files;
  // The selection, explained: the engine the target gets and the fused entry point.
  CHECK(r.selection.find("engine: mma.sync") != std::string::npos);
  CHECK(r.selection.find("splat_fused_p0: ") != std::string::npos);
  REQUIRE(written.size() >= 2);
  CHECK(fs::path(written.front()).filename() == "w.ptx");
  CHECK(fs::path(written.back()).filename() == "manifest.json");
  std::ifstream ptx(written.front());
  std::string head((std::istreambuf_iterator<char>(ptx)), {});
  CHECK(head.find(".target sm_90") != std::string::npos);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  for (const std::string& w : written) {
    CAPTURE(w);
    CHECK(fs::exists(w));
    bool listed = false;
    for (const auto& f : m["files"]) listed = listed || f.get<std::string>() == fs::path(w).filename().string();
    CHECK(listed);
  }
  for (const auto& e : fs::directory_iterator(dir))  // no temporary left behind
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  fs::remove_all(dir);
}

TEST_CASE("emit: bad options write nothing") {
  fs::path dir = scratch("bad");
  splat::EmitOptions o;
  o.target = "sass";
  CHECK_THROWS_AS(splat::emit(small_window(), o, dir.string()), splat::Error);
  o.target = "cuda";
  o.arch = "compute_90";
  CHECK_THROWS_AS(splat::emit(small_window(), o, dir.string()), splat::Error);
  CHECK_FALSE(fs::exists(dir));
}

TEST_SUITE_END();
