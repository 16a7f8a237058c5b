// Image files through stb (Debian libstb-dev): decoding PNG, JPEG and BMP
// (stb_image), encoding PNG and JPEG (stb_image_write), resizing
// (stb_image_resize) and drawing text (stb_easy_font). No codec or resampler
// of our own: the stb implementations are compiled into image_io.cpp only.
//
//   Image pixels are interleaved (H, W, C) uint8, as files and stb hold them;
//   Dataset samples are planar (C, H, W): to_planar / from_planar convert.
//
// Every failure is an InputError naming the file: empty, truncated, not an
// image, or larger than kMaxImagePixels (refused from the header, before any
// pixel is decoded).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::data {

// Images with more pixels (width * height) are refused before decoding.
inline constexpr int64_t kMaxImagePixels = 64'000'000;  // 64 megapixels
// The largest side a model's input may have (image_size, a checkpoint's
// input_shape).
inline constexpr int64_t kMaxImageSide = 16384;

struct Image {
  int64_t height = 0, width = 0, channels = 0;  // channels 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;                  // (H, W, C) interleaved

  int64_t bytes() const { return height * width * channels; }
};

// What a file's header says, without decoding pixels.
struct ImageInfo {
  int64_t height = 0, width = 0;
  int64_t channels = 0;  // in the file: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
};

// True for names ending in .png, .jpg, .jpeg or .bmp (any case).
bool has_image_extension(const std::string& path);

// The raw bytes of path (no gzip detection). Throws InputError naming path.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Header of an encoded image. `path` is only used in messages. Throws
// InputError for an empty, unrecognised or truncated header, or for an image
// over kMaxImagePixels.
ImageInfo image_info(std::span<const uint8_t> bytes, const std::string& path);

// Decodes to `channels` channels (1 or 3; 0: 1 for gray files, 3 for colour
// ones). Colour to gray uses stb's luminance weights; alpha is dropped.
// Checks image_info first, so a huge image is refused before decoding, and
// refuses a JPEG without its end marker or a BMP shorter than its header
// says (stb would return such files padded, not fail).
Image decode_image(std::span<const uint8_t> bytes, const std::string& path, int64_t channels = 0);
// read_file_bytes + decode_image.
Image load_image(const std::string& path, int64_t channels = 0);

// Resampled to height x width (stb_image_resize defaults: Mitchell filter
// when shrinking, Catmull-Rom when enlarging). Same size: a copy.
Image resize_image(const Image& image, int64_t height, int64_t width);

// Planar (C, H, W) <-> interleaved (H, W, C).
void to_planar(const Image& image, uint8_t* chw);
Image from_planar(const uint8_t* chw, int64_t channels, int64_t height, int64_t width);

// Lossless PNG bytes of image.
std::vector<uint8_t> encode_png(const Image& image);
// JPEG bytes (quality 1..100); used by tests and tools.
std::vector<uint8_t> encode_jpeg(const Image& image, int quality = 95);
// Writes bytes to path atomically through an AtomicFile (atomic_file.h):
// readers see the old file or the new one, never a part; sync: fsync the
// file and its folder. Throws InputError naming path; the temporary is removed.
// A symbolic link keeps pointing where it did (its target is replaced); an
// existing device or pipe (/dev/null, /dev/stdout) is written into in place.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes,
                           bool sync = true);
// The same for text (a CSV file, a marker, a serialized message).
void write_text_atomically(const std::string& path, std::string_view text, bool sync = true);

// Text with stb_easy_font, each font pixel drawn as scale x scale pixels.
// text_width / text_height are the size write_text covers (ASCII only).
int64_t text_width(const std::string& text, int64_t scale);
int64_t text_height(const std::string& text, int64_t scale);
// Draws text with its top-left corner at (x, y) in `color` (one value per
// channel); parts outside the image are clipped.
void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, int64_t scale,
               const std::vector<uint8_t>& color);
// Fills the rectangle [x, x + w) x [y, y + h), clipped, with color.
void fill_rect(Image& image, int64_t x, int64_t y, int64_t w, int64_t h,
               const std::vector<uint8_t>& color);

}  // namespace lockstep::data
