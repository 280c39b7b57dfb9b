#pragma once
// Pattern-independent CUDA text shared by every emitted module (types, PTX helpers, kernel bodies).
#include <string>

namespace splat {
// The whole text, in order: common helpers, the engines, the fused pass driver and the pipeline.
const std::string& device_code();
// The engines (one file each): bf16/fp16 tensor cores (mma.sync; Hopper wgmma), tf32 tensor cores,
// fp32 on tensor cores as three tf32 products (3xTF32), fp32 CUDA cores.
const char* engine_mma();
const char* engine_wgmma();
const char* engine_tf32();
const char* engine_tf32x3();
const char* engine_simt();
}  // namespace splat
