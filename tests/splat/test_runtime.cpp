// Runtime pieces that need no GPU: the tensor-map encoder's argument checks (they run before the
// driver is looked up, so a bad description is reported as such, not as a driver error code).
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <sstream>

#include "libsplat/report/bench_report.h"
#include "libsplat/runtime/runtime.h"

TEST_SUITE_BEGIN("unit");

using namespace splat;

namespace {
std::string encode_error(const void* base, const std::vector<uint64_t>& dims, const std::vector<uint64_t>& strides,
                         const std::vector<uint32_t>& box) {
  alignas(64) unsigned char map[128];
  try {
    encode_tensor_map(map, base, dims, strides, box);
  } catch (const CudaError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("tensor maps: descriptions are checked before the driver is asked") {
  alignas(16) static unsigned char buf[64];
  const void* p = buf;
  CHECK(encode_error(p, {64}, {}, {64}).find("rank 1") != std::string::npos);
  CHECK(encode_error(p, {64, 8}, {128, 256}, {64, 8}).find("rank 2 with 2 strides") != std::string::npos);
  CHECK(encode_error(p, {64, 8}, {128}, {64}).find("box of rank 1") != std::string::npos);
  CHECK(encode_error(buf + 8, {64, 8}, {128}, {64, 8}).find("16-byte aligned") != std::string::npos);
  CHECK(encode_error(p, {64, 0}, {128}, {64, 8}).find("dim 1") != std::string::npos);
  CHECK(encode_error(p, {64, 8}, {128}, {64, 0}).find("box 1") != std::string::npos);
  CHECK(encode_error(p, {64, 8}, {128}, {64, 512}).find("box 1") != std::string::npos);
  CHECK(encode_error(p, {64, 8}, {120}, {64, 8}).find("multiple of 16") != std::string::npos);
  CHECK(encode_error(p, {128, 8}, {256}, {128, 8}).find("128-byte swizzle") != std::string::npos);
  // A valid description gets past the checks: encoded where a driver is present, else the
  // driver lookup's own error.
  const std::string e = encode_error(p, {64, 8, 4}, {128, 1024}, {64, 1, 4});
  CHECK((e.empty() || e.find("cuTensorMapEncodeTiled") != std::string::npos));
}

TEST_CASE("load_target: a CUBIN for the device's own target, PTX for an older one, refused otherwise") {
  splat::DeviceInfo h200;
  h200.name = "H200";
  h200.cc_major = 9;
  h200.cc_minor = 0;
  CHECK(splat::load_target(h200, "sm_90a") == splat::CompileTarget::Cubin);
  CHECK(splat::load_target(h200, "sm_90") == splat::CompileTarget::Cubin);
  CHECK(splat::load_target(h200, "sm_80") == splat::CompileTarget::Ptx);  // an sm_80 CUBIN does not load on sm_90
  CHECK_THROWS_AS(splat::load_target(h200, "sm_100"), splat::ArchMismatch);
  splat::DeviceInfo a100 = h200;
  a100.cc_major = 8;
  CHECK(splat::load_target(a100, "sm_80") == splat::CompileTarget::Cubin);
  CHECK_THROWS_AS(splat::load_target(a100, "sm_90a"), splat::ArchMismatch);
  CHECK_THROWS_AS(splat::load_target(a100, "sm_90"), splat::ArchMismatch);
  splat::DeviceInfo rtx = h200;
  rtx.cc_major = 8;
  rtx.cc_minor = 6;
  CHECK(splat::load_target(rtx, "sm_80") == splat::CompileTarget::Ptx);
}

// The reports of `splatc bench` (no GPU: results made here): JSON with its schema version, CSV with
// its header, one line per problem and kernel, RFC 4180 quoting.
TEST_CASE("bench reports: JSON schema version, CSV lines and quoting") {
  ProblemResult r;
  r.name = "gqa, \"quoted\"";
  r.file = "p.json";
  r.dtype = "bf16";
  r.seq_len = 16384;
  r.kv_len = 16384;
  r.head_dim = 64;
  r.heads = 32;
  r.kv_heads = 8;
  r.batch = 1;
  r.nnz = 8339200;
  r.floor_memory_us = 99.6;
  r.engine = "wgmma";
  KernelResult k;
  k.kind = "fused";
  k.ran = true;
  k.ms_median = 0.1735;
  k.repeats = 30;
  k.rel_err = 4.7e-3;
  k.pass = true;
  r.kernels.push_back(k);
  KernelResult skipped;
  skipped.kind = "pipeline";
  skipped.note = "not asked for";
  r.kernels.push_back(skipped);
  const nlohmann::json j = bench_json({r}, "H200");
  CHECK(j["schema_version"] == kBenchSchemaVersion);
  CHECK(j["problems"][0]["kv_heads"] == 8);
  CHECK(j["problems"][0]["kernels"].size() == 2);

  std::istringstream csv(bench_csv({r}, "H200"));
  std::string header, line1, line2, extra;
  REQUIRE(std::getline(csv, header));
  REQUIRE(std::getline(csv, line1));
  REQUIRE(std::getline(csv, line2));
  CHECK_FALSE(std::getline(csv, extra));
  CHECK(header.rfind("device,name,file,dtype,seq_len,kv_len,q_offset,head_dim,heads,kv_heads,", 0) == 0);
  const auto columns = [](const std::string& h) { return std::count(h.begin(), h.end(), ',') + 1; };
  CHECK(columns(header) == 31);
  // The name holds a comma and quotes: quoted, quotes doubled (two more commas inside the quotes).
  CHECK(line1.rfind("H200,\"gqa, \"\"quoted\"\"\",p.json,bf16,16384,16384,0,64,32,8,1,8339200,wgmma,,fused,1,173.5,", 0) == 0);
  CHECK(columns(line1) == 32);
  CHECK(line2.find(",pipeline,0,") != std::string::npos);
  CHECK(line2.substr(line2.size() - 14) == ",not asked for");
}

TEST_SUITE_END();
