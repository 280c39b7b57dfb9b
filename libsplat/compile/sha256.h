#pragma once
// SHA-256 (FIPS 180-4) of a byte string, for content-addressed caches.
#include <string>
#include <string_view>

namespace splat {

class Sha256 {
 public:
  Sha256();
  Sha256& add(std::string_view bytes);
  // Lowercase hex digest of everything added; the object is spent afterwards.
  std::string hex();

 private:
  void block(const unsigned char* p);
  unsigned int h_[8];
  unsigned char buf_[64];
  size_t used_ = 0;
  unsigned long long total_ = 0;
};

}  // namespace splat
