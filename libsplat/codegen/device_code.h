#pragma once
// Pattern-independent CUDA text shared by every emitted module (types, PTX helpers, kernel bodies).
namespace splat {
const char* device_code();
}  // namespace splat
