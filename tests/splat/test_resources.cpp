// The resource report: ptxas's log read per entry point, and occupancy by the CUDA rules.
#include <doctest/doctest.h>

#include <string>

#include "libsplat/compile/resources.h"

TEST_SUITE_BEGIN("unit");

using namespace splat;

TEST_CASE("parse_ptxas_report: each entry point's registers, spills, stack and static shared memory") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'splat_fused_p0' for 'sm_90a'\n"
      "ptxas info    : Function properties for splat_fused_p0\n"
      "    72 bytes stack frame, 236 bytes spill stores, 348 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 72 bytes cumulative stack size, 3072 bytes smem\n"
      "ptxas info    : Function properties for helper\n"
      "    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Compiling entry function 'splat_softmax' for 'sm_90a'\n"
      "ptxas info    : Function properties for splat_softmax\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 30 registers, used 1 barriers, 384 bytes cmem[0]\n";
  const std::vector<KernelResources> r = parse_ptxas_report(log);
  REQUIRE(r.size() == 2);
  CHECK(r[0].name == "splat_fused_p0");
  CHECK(r[0].registers == 255);
  CHECK(r[0].spill_stores_bytes == 236);
  CHECK(r[0].spill_loads_bytes == 348);
  CHECK(r[0].local_bytes == 72);
  CHECK(r[0].shared_static_bytes == 3072);
  CHECK(r[1].name == "splat_softmax");
  CHECK(r[1].registers == 30);
  CHECK(r[1].local_bytes == 0);
  CHECK(r[1].shared_static_bytes == 0);
  // No report (a compile without resource_info), or an entry cut off before its "Used" line.
  CHECK_THROWS(parse_ptxas_report(""));
  CHECK_THROWS(parse_ptxas_report("ptxas info    : Compiling entry function 'k' for 'sm_80'\n"));
}

TEST_CASE("occupancy: blocks per SM and what bounds them, by architecture") {
  // sm_90: 128 threads of 128 registers: 16 K registers a block, 4 blocks (registers).
  auto o = occupancy("sm_90a", 128, 128, 50176 + 32);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 4);
  CHECK(o->limit == "registers");
  CHECK(o->occupancy == doctest::Approx(0.25));
  // 255 registers round up to 256 per thread (units of 256 a warp): 2 blocks by registers, but 135 KB
  // of stages (+ 1 KB reserved) leave room for one in 228 KB.
  o = occupancy("sm_90a", 128, 255, 135168 + 3072);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 1);
  CHECK(o->limit == "shared memory");
  CHECK(o->occupancy == doctest::Approx(4.0 / 64));
  // Small blocks: bound by the threads of an SM (2048 on sm_80, 1536 on sm_86), then by blocks.
  o = occupancy("sm_80", 128, 32, 1312);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 16);
  CHECK(o->limit == "threads");
  CHECK(o->occupancy == doctest::Approx(1.0));
  o = occupancy("sm_86", 128, 32, 0);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 12);
  o = occupancy("sm_80", 32, 16, 0);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 32);
  CHECK(o->limit == "blocks");
  // sm_86 has 100 KB: a 135 KB block does not fit at all.
  o = occupancy("sm_86", 128, 64, 135168);
  REQUIRE(o);
  CHECK(o->max_blocks_per_sm == 0);
  CHECK(o->occupancy == 0);
  // An architecture whose limits are not in the table, and a malformed name.
  CHECK(!occupancy("sm_120", 128, 64, 0));
  CHECK(!occupancy("gfx90a", 128, 64, 0));
}

TEST_SUITE_END();
