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

TEST_CASE("emit: per-head patterns, a module per head group and one manifest") {
  fs::path dir = scratch("heads");
  splat::EmitOptions o;
  o.target = "ptx";
  o.arch = "sm_90a";
  const splat::Problem p = splat::parse_problem_text(
      R"({"name": "hw", "seq_len": 300, "head_dim": 64, "heads": 4, "dtype": "bf16", "head_patterns": [
          {"window": {"left": 16, "right": 16}}, {"window": {"left": 64, "right": 0}}]})",
      "hw");
  const splat::EmitResult r = splat::emit(p, o, dir.string());
  std::vector<std::string> names;
  for (const std::string& f : r.files) names.push_back(fs::path(f).filename().string());
  // Each group's PTX and table (the pipeline's row offsets), then the one manifest.
  CHECK(names == std::vector<std::string>{"hw.h0.ptx", "hw.h0.table.bin", "hw.h1.ptx", "hw.h1.table.bin", "manifest.json"});
  CHECK(r.resources.find("head group 1 (heads 2 3):\nsplat_fused_p0: ") != std::string::npos);
  CHECK(r.selection.find("head group 0 (heads 0 1):\ntuning: ") != std::string::npos);
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  CHECK(m["name"] == "hw");
  CHECK(m["files"] == nlohmann::json(names));
  CHECK(m["problem"]["head_groups"] == 2);
  CHECK_FALSE(m.contains("kernels"));  // a loader that reads one module's kernels fails, not runs half
  REQUIRE(m["head_groups"].size() == 2);
  for (int g = 0; g < 2; ++g) {
    const nlohmann::json& x = m["head_groups"][g];
    CHECK(x["name"] == "hw.h" + std::to_string(g));
    const std::string stem = "hw.h" + std::to_string(g);
    CHECK(x["files"] == nlohmann::json({stem + ".ptx", stem + ".table.bin"}));
    CHECK(x["table_file"] == stem + ".table.bin");
    CHECK(x["problem"]["group_heads"] == nlohmann::json({2 * g, 2 * g + 1}));
    CHECK(x["kernels"]["fused"][0]["grid"][1] == "batch*group_heads");
    CHECK(x["kernels"]["fused"][0]["registers"].get<int>() > 0);
    CHECK(x["tuning"]["cache_key"].get<std::string>().size() == 64);
  }
  CHECK(m["head_groups"][0]["tuning"]["cache_key"] != m["head_groups"][1]["tuning"]["cache_key"]);
  fs::remove_all(dir);
}

TEST_CASE("emit: --target cubin, and every kernel's registers, spills and occupancy from ptxas") {
  fs::path dir = scratch("cubin");
  splat::EmitOptions o;
  o.target = "cubin";
  o.arch = "sm_90a";
  const splat::EmitResult r = splat::emit(small_window(), o, dir.string());
  REQUIRE(!r.files.empty());
  CHECK(fs::path(r.files.front()).filename() == "w.cubin");
  std::ifstream cubin(r.files.front(), std::ios::binary);
  std::string elf((std::istreambuf_iterator<char>(cubin)), {});
  REQUIRE(elf.size() > 1000);
  CHECK(elf.substr(0, 4) == "\x7f" "ELF");
  const nlohmann::json m = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
  CHECK(m["target"] == "cubin");
  int kernels = 0;
  for (const char* kind : {"fused", "pipeline"})
    for (const auto& k : m["kernels"][kind]) {
      CAPTURE(k.dump());
      ++kernels;
      CHECK(k["registers"].get<int>() > 0);
      CHECK(k["registers"].get<int>() <= 255);
      CHECK(k["spill_stores_bytes"].get<int64_t>() >= 0);
      CHECK(k["local_bytes"].get<int64_t>() >= k["spill_stores_bytes"].get<int64_t>() / 64);
      CHECK(k["max_blocks_per_sm"].get<int>() >= 1);
      CHECK(k["occupancy"].get<double>() > 0);
      CHECK(k["occupancy"].get<double>() <= 1);
      // The text report has a line per kernel, in the manifest's order.
      CHECK(r.resources.find(k["name"].get<std::string>() + ": " + std::to_string(k["registers"].get<int>()) + " registers") !=
            std::string::npos);
    }
  CHECK(kernels == 4);  // the window's band kernel and the pipeline's three
  // The wgmma band kernel of a 256-row window: 4 warps, one block per SM at most by its registers.
  CHECK(m["kernels"]["fused"][0]["occupancy_limit"] == "registers");
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
