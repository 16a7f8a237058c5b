// TFRecord framing, the container of TensorBoard event files:
//   u64 length (little-endian), u32 masked CRC-32C of those 8 bytes,
//   length bytes of data, u32 masked CRC-32C of the data;
//   masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::app {

// CRC-32C (Castagnoli, reflected polynomial 0x82f63b78) of bytes.
uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// One framed record holding data.
std::string tfrecord(std::string_view data);

// The records of bytes, in order, up to the first incomplete or damaged one
// (a writer that crashed mid-record leaves such a tail); *valid_bytes (when
// given) is where the good records end.
std::vector<std::string> read_tfrecords(std::string_view bytes, size_t* valid_bytes = nullptr);

}  // namespace lockstep::app
