// Checks of a PNG's chunk structure made before stb_image sees the bytes:
// stb reports a header over its size limit as "unknown image type", hands
// memcpy a null pointer for an empty first IDAT chunk, and grows its buffer
// to a chunk's claimed length (up to 4 GiB) before reading the chunk.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lockstep::data {

// bytes start with the PNG signature. Throws InputError naming path when the
// first chunk is not a 13-byte IHDR, the header claims zero pixels or more
// than max_pixels, an IDAT chunk before the first non-empty one is empty, or
// a chunk up to IEND claims more bytes than the file holds.
void check_png_structure(std::span<const uint8_t> bytes, const std::string& path,
                         int64_t max_pixels);

}  // namespace lockstep::data
