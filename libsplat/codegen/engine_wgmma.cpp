// Tensor-core engine for bf16/fp16 on Hopper (wgmma, sm_90a). Part of the device text every
// emitted module holds (see device_code.h); compiled by NVRTC, not by the host compiler.
#include "libsplat/codegen/device_code.h"

namespace splat {

const char* engine_wgmma() {
  return R"CUDA(
)CUDA";
}

}  // namespace splat
