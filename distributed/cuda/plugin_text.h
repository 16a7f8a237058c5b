// Text helpers of the CUDA plugin's C interface (cuda_plugin.cpp), without
// CUDA headers so that every build tests them (tests/test_cuda_host_rules.cpp).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>

namespace lockstep::distributed {

// Copies text into out[size], cut to size - 1 bytes and NUL-terminated;
// nothing when out is null or size is 0.
inline void copy_c_string(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = text.size() < size - 1 ? text.size() : size - 1;
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

// The device lines of nn::cuda_devices_description() (its first line repeats
// the versions that `lockstep info` prints itself): text after the first
// newline, "" when there is none.
inline std::string device_lines(const std::string& description) {
  const size_t eol = description.find('\n');
  return eol == std::string::npos ? std::string() : description.substr(eol + 1);
}

}  // namespace lockstep::distributed
