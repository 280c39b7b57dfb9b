#pragma once
// The device code of an emitted module: the headers of libsplat/device/ (embedded in the library,
// libsplat/device/embedded.h), which the module includes after its SPLAT_* constants and before its
// pattern tables and entry points.
#include <string>

namespace splat {

// The #include lines of the device headers, one per line, in the order the module includes them.
const std::string& device_includes();

// source with each #include "splat/..." line replaced by that header's text (recursively, each
// header once, its #pragma once dropped): a self-contained .cu that nvcc compiles with no include
// path, to the same code as source with the headers. Throws std::logic_error for a name that is
// not an embedded header.
std::string inline_device_headers(const std::string& source);

}  // namespace splat
