#include "app/formats/tfrecord.h"

#include <array>
#include <cstring>

#include "common/little_endian.h"

namespace lockstep::app {
namespace {

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    table[i] = c;
  }
  return table;
}

}  // namespace

uint32_t crc32c(std::string_view bytes) {
  static const std::array<uint32_t, 256> table = make_table();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) c = table[(c ^ b) & 0xffu] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

uint32_t masked_crc32c(std::string_view bytes) {
  const uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string out;
  append_le<uint64_t>(out, data.size());
  append_le<uint32_t>(out, masked_crc32c(out));
  out.append(data);
  append_le<uint32_t>(out, masked_crc32c(data));
  return out;
}

std::vector<std::string> read_tfrecords(std::string_view bytes, size_t* valid_bytes) {
  std::vector<std::string> records;
  size_t at = 0;
  while (bytes.size() - at >= 12) {
    const uint64_t n = load_le<uint64_t>(bytes.data() + at);
    if (load_le<uint32_t>(bytes.data() + at + 8) != masked_crc32c(bytes.substr(at, 8))) break;
    if (n > bytes.size() - at - 16) break;
    const std::string_view data = bytes.substr(at + 12, n);
    if (load_le<uint32_t>(bytes.data() + at + 12 + n) != masked_crc32c(data)) break;
    records.emplace_back(data);
    at += 16 + n;
  }
  if (valid_bytes) *valid_bytes = at;
  return records;
}

}  // namespace lockstep::app
