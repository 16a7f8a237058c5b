// Checks of a PNG's chunk structure made before stb_image sees the bytes:
// stb reports a header over its size limit as "unknown image type", and
// hands memcpy a null pointer for an empty first IDAT chunk.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lockstep::data {

// bytes start with the PNG signature. Throws InputError naming path when the
// first chunk is not a 13-byte IHDR, the header claims zero pixels or more
// than max_pixels, or an IDAT chunk before the first non-empty one is empty.
void check_png_structure(std::span<const uint8_t> bytes, const std::string& path,
                         int64_t max_pixels);

}  // namespace lockstep::data
