#include "data/jpeg_check.h"

#include <algorithm>

#include "nn/error.h"

namespace lockstep::data {
namespace {

constexpr uint8_t kDht = 0xC4, kSos = 0xDA, kEoi = 0xD9;

bool is_standalone(uint8_t marker) {  // markers without a length field
  return marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8);
}

// The tables of one DHT segment: bytes [begin, end). stb_image reads a
// table's 16 counts even where they run past the segment (or the file, as
// zeros), so they are checked the same way.
void check_dht(std::span<const uint8_t> b, size_t begin, size_t end, const std::string& path) {
  for (size_t at = begin; at < end;) {
    int codes = 0;
    for (size_t i = at + 1; i <= at + 16 && i < b.size(); ++i) codes += b[i];
    if (codes > 256) {
      fail_input(path, ": damaged JPEG: a Huffman table declares ", codes, " codes (at most 256)");
    }
    const size_t table_end = at + 17 + static_cast<size_t>(codes);
    if (table_end > end && end == b.size()) return;  // the file is cut short: the decoder says so
    if (table_end > end) {
      fail_input(path, ": damaged JPEG: a Huffman table declares ", codes,
                 " codes but its segment holds ", end > at + 17 ? end - at - 17 : 0);
    }
    at = table_end;
  }
}

// The position after the entropy-coded data that starts at `at`: the next
// marker (FF not followed by 00 or a restart marker).
size_t skip_scan_data(std::span<const uint8_t> b, size_t at) {
  for (; at + 1 < b.size(); ++at) {
    if (b[at] != 0xFF) continue;
    const uint8_t next = b[at + 1];
    if (next != 0x00 && !(next >= 0xD0 && next <= 0xD7) && next != 0xFF) return at;
  }
  return b.size();
}

}  // namespace

void check_jpeg_structure(std::span<const uint8_t> bytes, const std::string& path) {
  for (size_t at = 2; at + 4 <= bytes.size();) {
    if (bytes[at] != 0xFF) {  // padding between segments: stb_image scans on for a marker
      ++at;
      continue;
    }
    const uint8_t marker = bytes[at + 1];
    if (marker == 0xFF) {  // fill byte
      ++at;
      continue;
    }
    if (marker == kEoi) return;
    if (is_standalone(marker)) {
      at += 2;
      continue;
    }
    const size_t length = static_cast<size_t>(bytes[at + 2]) << 8 | bytes[at + 3];
    const size_t end = at + 2 + length;
    if (length < 2) return;
    if (marker == kDht) check_dht(bytes, at + 4, std::min(end, bytes.size()), path);
    if (end > bytes.size()) return;
    at = marker == kSos ? skip_scan_data(bytes, end) : end;
  }
}

}  // namespace lockstep::data
