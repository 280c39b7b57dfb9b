// Tensor-core engine for fp32 as three tf32 products (3xTF32). Part of the device text every
// emitted module holds (see device_code.h); compiled by NVRTC, not by the host compiler.
#include "libsplat/codegen/device_code.h"

namespace splat {

const char* engine_tf32x3() {
  return R"CUDA(
)CUDA";
}

}  // namespace splat
