// SHA-256 (FIPS 180-4) of bytes fed in pieces: the state digests of the
// reproducible mode, which runs on any number of ranks compare.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace lockstep::app {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  // The digest as 64 lowercase hex digits; the object is spent after it.
  std::string hex();

 private:
  void block(const uint8_t* p);

  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buffer_{};
  size_t used_ = 0;
  uint64_t bytes_ = 0;
};

}  // namespace lockstep::app
