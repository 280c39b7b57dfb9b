#include "libsplat/report/atomic_file.h"

#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace splat {

void write_atomically(const std::string& path, const std::function<void(std::ofstream&)>& write) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  {
    std::ofstream o(tmp, std::ios::binary);
    if (!o) throw std::runtime_error(path + ": cannot open for writing");
    try {
      write(o);
    } catch (...) {
      o.close();
      std::filesystem::remove(tmp, ec);
      throw;
    }
    o.close();
    if (!o) {
      std::filesystem::remove(tmp, ec);
      throw std::runtime_error(path + ": write failed");
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw std::runtime_error(path + ": cannot write: " + why);
  }
}

}  // namespace splat
