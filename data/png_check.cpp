#include "data/png_check.h"

#include <algorithm>
#include <string>
#include <string_view>

#include "common/error.h"

namespace lockstep::data {
namespace {

constexpr size_t kSignatureBytes = 8;
constexpr size_t kChunkOverhead = 12;  // length, type, CRC

uint32_t be32(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(b[at]) << 24 | static_cast<uint32_t>(b[at + 1]) << 16 |
         static_cast<uint32_t>(b[at + 2]) << 8 | static_cast<uint32_t>(b[at + 3]);
}

std::string_view chunk_type(std::span<const uint8_t> b, size_t at) {
  return {reinterpret_cast<const char*>(b.data() + at + 4), 4};
}

// A chunk type as text: its four letters, or "damaged" when it has others.
std::string printable(std::string_view type) {
  const bool letters = std::all_of(type.begin(), type.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  });
  return letters ? std::string(type) : std::string("damaged");
}

}  // namespace

void check_png_structure(std::span<const uint8_t> bytes, const std::string& path,
                         int64_t max_pixels) {
  constexpr size_t kHeaderEnd = kSignatureBytes + kChunkOverhead + 13;
  if (bytes.size() < kHeaderEnd) {
    fail_input(path, ": truncated PNG (", bytes.size(), " bytes; its header alone needs ",
               kHeaderEnd, ")");
  }
  if (chunk_type(bytes, kSignatureBytes) != "IHDR" || be32(bytes, kSignatureBytes) != 13) {
    fail_input(path, ": damaged PNG: the first chunk is not a 13-byte IHDR header (",
               be32(bytes, kSignatureBytes), " bytes)");
  }
  const int64_t width = be32(bytes, 16), height = be32(bytes, 20);
  if (width == 0 || height == 0) {
    fail_input(path, ": damaged PNG: its header claims ", width, "x", height, " pixels");
  }
  if (width > max_pixels / height) {  // width * height > max_pixels, without overflow
    fail_input(path, ": image of ", width, "x", height, " pixels is over the limit of ",
               max_pixels / 1000000, " megapixels; refused before decoding");
  }
  // Every chunk up to IEND must end inside the file: stb_image grows its
  // buffer to a chunk's claimed length before it reads the data, so one
  // damaged length field would cost up to 4 GiB.
  bool image_data = false;
  for (size_t at = kSignatureBytes; at + kChunkOverhead <= bytes.size();) {
    const uint64_t length = be32(bytes, at);
    const std::string_view type = chunk_type(bytes, at);
    if (at + kChunkOverhead + length > bytes.size()) {
      fail_input(path, ": truncated PNG: the ", printable(type), " chunk at byte ", at, " claims ",
                 length, " bytes, past the end of the file (", bytes.size(), " bytes)");
    }
    if (type == "IDAT" && !image_data) {
      if (length == 0) fail_input(path, ": damaged PNG: an empty IDAT chunk before any image data");
      image_data = true;
    }
    if (type == "IEND") return;
    at += kChunkOverhead + length;
  }
}

}  // namespace lockstep::data
