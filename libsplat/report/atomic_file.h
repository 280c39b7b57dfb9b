#pragma once
// Report files written whole or not at all: into a temporary file next to the target, then renamed.
#include <fstream>
#include <functional>
#include <string>

namespace splat {

// write(stream) into PATH.tmpPID, then a rename onto path; a failed write (an exception from write,
// or a stream error) leaves neither a half-written file nor the temporary. Throws
// std::runtime_error on I/O failure.
void write_atomically(const std::string& path, const std::function<void(std::ofstream&)>& write);

}  // namespace splat
