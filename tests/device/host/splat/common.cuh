// Host stand-in for the device prologue (libsplat/device/common.cuh) that libsplat/device/plan.cuh
// includes, so that test_gather.cpp can run plan.cuh's code on the CPU, one simulated thread at a time:
// threadIdx is a variable the test sets, and cp_async16 records each copy instead of issuing it.
#pragma once
#include <cstdint>
#include <vector>

#define __device__
#define __forceinline__ inline

typedef int64_t i64;

struct HostThreadIdx {
  unsigned x = 0, y = 0, z = 0;
};
inline HostThreadIdx threadIdx;

struct HostCopy {
  const void* dst;
  const void* src;
  int src_bytes;
};
inline std::vector<HostCopy> host_copies;

inline void cp_async16(void* dst, const void* src, int src_bytes) { host_copies.push_back({dst, src, src_bytes}); }

// Rows of K and V between a head's consecutive keys (a packed variable-length batch: kv_heads).
constexpr int kKvStep = 1;
