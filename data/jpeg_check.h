// Checks of a JPEG's Huffman tables made before stb_image sees the bytes:
// the stb_image Debian ships writes past the end of a table when a DHT
// segment declares more than 256 codes, and reads past one when a scan uses
// a table no DHT segment defined.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lockstep::data {

// bytes start with the JPEG signature (FF D8). Throws InputError naming path
// when a Huffman table (DHT segment) declares more than 256 codes or more
// codes than its segment holds, or a scan decodes with a table that no DHT
// segment before it defines. Anything else is left to the decoder.
void check_jpeg_structure(std::span<const uint8_t> bytes, const std::string& path);

}  // namespace lockstep::data
