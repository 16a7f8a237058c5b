#include "data/jpeg_check.h"

#include <algorithm>
#include <tuple>

#include "common/error.h"

namespace lockstep::data {
namespace {

constexpr uint8_t kDht = 0xC4, kSos = 0xDA, kEoi = 0xD9, kSofProgressive = 0xC2;

// The Huffman tables defined so far: bit `id` of dc (class 0) or ac (class 1).
struct DefinedTables {
  unsigned dc = 0, ac = 0;
};

bool is_standalone(uint8_t marker) {  // markers without a length field
  return marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8);
}

// The tables of one DHT segment: bytes [begin, end). stb_image reads a
// table's 16 counts even where they run past the segment (or the file, as
// zeros), so they are checked the same way.
void check_dht(std::span<const uint8_t> b, size_t begin, size_t end, const std::string& path,
               DefinedTables& defined) {
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
    const unsigned table_class = b[at] >> 4, id = b[at] & 15u;
    if (id <= 3 && table_class <= 1) (table_class == 0 ? defined.dc : defined.ac) |= 1u << id;
    at = table_end;
  }
}

// The start-of-scan header in bytes [begin, end): each component's DC and
// AC table must be defined by then where stb_image decodes with it (it reads
// an undefined table's uninitialised memory as codes and indexes past its
// symbol array): baseline scans use both, progressive ones the DC table in
// a first DC scan and the AC table in AC scans. Selectors over 3 and cut
// headers are left to the decoder.
void check_scan_tables(std::span<const uint8_t> b, size_t begin, size_t end, bool progressive,
                       const DefinedTables& defined, const std::string& path) {
  if (begin >= end) return;
  const size_t components = b[begin], spectral = begin + 1 + 2 * components;
  if (spectral + 3 > end) return;
  const bool first_dc = b[spectral] == 0 && (b[spectral + 2] >> 4) == 0;
  const bool uses_dc = !progressive || first_dc, uses_ac = !progressive || b[spectral] > 0;
  for (size_t i = 0; i < components; ++i) {
    const unsigned dc = b[begin + 2 + 2 * i] >> 4, ac = b[begin + 2 + 2 * i] & 15u;
    for (auto [used, id, have, name] :
         {std::tuple{uses_dc, dc, defined.dc, "DC"}, std::tuple{uses_ac, ac, defined.ac, "AC"}}) {
      if (used && id <= 3 && !(have >> id & 1u)) {
        fail_input(path, ": damaged JPEG: a scan uses ", name, " Huffman table ", id,
                   ", which no DHT segment before it defines");
      }
    }
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
  DefinedTables defined;
  bool progressive = false;
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
    if (marker == kDht) check_dht(bytes, at + 4, std::min(end, bytes.size()), path, defined);
    if (marker == kSofProgressive) progressive = true;
    if (marker == kSos) {
      check_scan_tables(bytes, at + 4, std::min(end, bytes.size()), progressive, defined, path);
    }
    if (end > bytes.size()) return;
    at = marker == kSos ? skip_scan_data(bytes, end) : end;
  }
}

}  // namespace lockstep::data
