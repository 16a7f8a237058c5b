// Numbers in the little-endian files lockstep reads and writes (checkpoints,
// safetensors, TFRecord, TensorBoard events): loads from and appends to byte
// strings in host order, which these formats share.
#pragma once

#include <bit>
#include <cstring>
#include <string>

namespace lockstep::app {

static_assert(std::endian::native == std::endian::little,
              "lockstep's file formats are little-endian and this code reads and writes host "
              "order; a big-endian host needs byte swapping here");

// The T stored at p (sizeof(T) bytes, any alignment).
template <typename T>
T load_le(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Appends the sizeof(T) bytes of v to out.
template <typename T>
void append_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

}  // namespace lockstep::app
