// Forwards to the device header (the SIMT stand-in for common.cuh sits beside it).
#pragma once
#include "libsplat/device/backward_rows.cuh"
