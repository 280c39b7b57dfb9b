// Runtime pieces that need no GPU: the tensor-map encoder's argument checks (they run before the
// driver is looked up, so a bad description is reported as such, not as a driver error code).
#include <doctest/doctest.h>

#include <string>
#include <vector>

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

TEST_SUITE_END();
