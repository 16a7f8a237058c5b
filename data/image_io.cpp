// Image files through stb (the implementations are compiled in
// data/stb_impl.cpp; stb_easy_font is header-only).
#define STBI_NO_STDIO
#define STBI_WRITE_NO_STDIO
#include <stb_easy_font.h>
#include <stb_image.h>
#include <stb_image_resize.h>
#include <stb_image_write.h>

#include "data/image_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "data/atomic_file.h"
#include "data/jpeg_check.h"
#include "data/png_check.h"

namespace lockstep::data {
namespace {

bool starts_with(std::span<const uint8_t> bytes, std::initializer_list<uint8_t> magic) {
  if (bytes.size() < magic.size()) return false;
  return std::equal(magic.begin(), magic.end(), bytes.begin());
}

bool is_png(std::span<const uint8_t> b) {
  return starts_with(b, {0x89, 'P', 'N', 'G'});
}
bool is_jpeg(std::span<const uint8_t> b) {
  return starts_with(b, {0xFF, 0xD8});
}
bool is_bmp(std::span<const uint8_t> b) {
  return starts_with(b, {'B', 'M'});
}

uint32_t le32(std::span<const uint8_t> b, size_t at) {
  return static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
         static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
}

// stb decodes a cut-short JPEG or BMP as if the rest were zeros, and reports
// a cut-short PNG with a puzzling reason: say "truncated" ourselves. Returns
// "" when the file looks complete.
std::string truncation(std::span<const uint8_t> b) {
  if (is_png(b)) {
    static constexpr char kIend[] = "IEND";
    const auto end = std::search(b.begin(), b.end(), kIend, kIend + 4);
    return end == b.end() ? "truncated PNG (no IEND chunk)" : "";
  }
  if (is_jpeg(b)) {
    // Entropy-coded data never holds FF DA or FF D9 (FF is stuffed), so the
    // last start-of-scan must be followed by an end-of-image marker.
    size_t last_sos = 0, last_eoi = 0;
    for (size_t i = 0; i + 1 < b.size(); ++i) {
      if (b[i] != 0xFF) continue;
      if (b[i + 1] == 0xDA) last_sos = i;
      if (b[i + 1] == 0xD9) last_eoi = i;
    }
    return last_eoi <= last_sos ? "truncated JPEG (no end-of-image marker after the last scan)"
                                : "";
  }
  if (is_bmp(b) && b.size() >= 34 && le32(b, 14) >= 40) {
    // stb reads the field as a signed int: it refuses 1, 2 (RLE) and 4 and
    // up, but decodes a negative one as uncompressed pixels.
    const auto compression = static_cast<int32_t>(le32(b, 30));
    if (compression < 0) {
      return detail::concat("damaged BMP (compression type ", le32(b, 30), ")");
    }
    if (compression != 0 && compression != 3) return "";  // stb refuses it
    const int64_t width = static_cast<int32_t>(le32(b, 18));
    const int64_t height = std::abs(static_cast<int64_t>(static_cast<int32_t>(le32(b, 22))));
    const int64_t bits = static_cast<int64_t>(b[28]) | static_cast<int64_t>(b[29]) << 8;
    if (width <= 0) return "";                         // stb refuses it
    const int64_t row = (width * bits + 31) / 32 * 4;  // < 2^47: no overflow
    // In double: row * height can pass 2^63 in a damaged header.
    const double need =
        static_cast<double>(le32(b, 10)) + static_cast<double>(row) * static_cast<double>(height);
    if (need > static_cast<double>(b.size())) {
      return detail::concat("truncated BMP (", b.size(), " bytes, the header needs ", need, ")");
    }
  }
  return "";
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

void append_bytes(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* p = static_cast<const uint8_t*>(data);
  out->insert(out->end(), p, p + size);
}

void check_image(const Image& image, const char* what) {
  LOCKSTEP_CHECK(image.channels >= 1 && image.channels <= 4 && image.height > 0 &&
                     image.width > 0 && static_cast<int64_t>(image.pixels.size()) == image.bytes(),
                 what);
}

}  // namespace

bool has_image_extension(const std::string& path) {
  const std::string p = lower(path);
  for (const char* ext : {".png", ".jpg", ".jpeg", ".bmp"}) {
    const size_t n = std::strlen(ext);
    if (p.size() > n && p.compare(p.size() - n, n, ext) == 0) return true;
  }
  return false;
}

std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    fail_input(path, std::filesystem::exists(path, ec) ? ": not a regular file" : ": no such file");
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) fail_input(path, ": cannot be opened (", std::strerror(errno), ")");
  const std::streamoff size = in.tellg();
  if (size < 0) fail_input(path, ": cannot tell its size");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) fail_input(path, ": read failed after ", in.gcount(), " of ", size, " bytes");
  return bytes;
}

ImageInfo image_info(std::span<const uint8_t> bytes, const std::string& path) {
  if (bytes.empty()) fail_input(path, ": empty file (0 bytes), not an image");
  if (!is_png(bytes) && !is_jpeg(bytes) && !is_bmp(bytes)) {
    fail_input(path, ": not a PNG, JPEG or BMP image (unknown signature)");
  }
  if (is_png(bytes)) check_png_structure(bytes, path, kMaxImagePixels);
  if (is_jpeg(bytes)) check_jpeg_structure(bytes, path);
  int w = 0, h = 0, c = 0;
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c)) {
    const std::string reason = stbi_failure_reason() ? stbi_failure_reason() : "unknown";
    if (reason == "too large") {
      fail_input(path, ": image too large to decode (over the limit of ", kMaxImagePixels / 1000000,
                 " megapixels)");
    }
    const std::string cut = truncation(bytes);
    fail_input(path, ": cannot read the image header (", cut.empty() ? "stb_image: " + reason : cut,
               ")");
  }
  // stb_image reports a top-down BMP's height as negative (its decoder takes
  // the absolute value): the limit below must see the magnitude.
  ImageInfo info{std::abs(static_cast<int64_t>(h)), w, c};
  if (info.width <= 0 || info.height == 0) {
    fail_input(path, ": damaged image header: it claims ", w, "x", h, " pixels");
  }
  if (info.height * info.width > kMaxImagePixels) {
    fail_input(path, ": image of ", info.width, "x", info.height, " pixels is over the limit of ",
               kMaxImagePixels / 1000000, " megapixels; refused before decoding");
  }
  return info;
}

Image decode_image(std::span<const uint8_t> bytes, const std::string& path, int64_t channels) {
  if (channels != 0 && channels != 1 && channels != 3) {
    fail_input(path, ": cannot decode to ", channels, " channels (1 or 3)");
  }
  const ImageInfo info = image_info(bytes, path);
  const std::string cut = truncation(bytes);
  if (!cut.empty()) fail_input(path, ": ", cut);
  const int want = static_cast<int>(channels != 0 ? channels : (info.channels <= 2 ? 1 : 3));
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> data(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, want),
      stbi_image_free);
  if (!data) {
    fail_input(path, ": cannot decode (stb_image: ",
               stbi_failure_reason() ? stbi_failure_reason() : "unknown",
               "): damaged or not a PNG, JPEG or BMP image");
  }
  Image image;
  image.height = h;
  image.width = w;
  image.channels = want;
  image.pixels.assign(data.get(), data.get() + image.bytes());
  return image;
}

Image load_image(const std::string& path, int64_t channels) {
  return decode_image(read_file_bytes(path), path, channels);
}

Image resize_image(const Image& image, int64_t height, int64_t width) {
  check_image(image, "resize_image");
  LOCKSTEP_CHECK(height > 0 && width > 0);
  if (height == image.height && width == image.width) return image;
  Image out;
  out.height = height;
  out.width = width;
  out.channels = image.channels;
  out.pixels.resize(static_cast<size_t>(out.bytes()));
  const int ok = stbir_resize_uint8(image.pixels.data(), static_cast<int>(image.width),
                                    static_cast<int>(image.height), 0, out.pixels.data(),
                                    static_cast<int>(width), static_cast<int>(height), 0,
                                    static_cast<int>(image.channels));
  LOCKSTEP_CHECK(ok == 1, "stbir_resize_uint8 failed");
  return out;
}

void to_planar(const Image& image, uint8_t* chw) {
  const int64_t plane = image.height * image.width, c = image.channels;
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t i = 0; i < plane; ++i) chw[k * plane + i] = image.pixels[i * c + k];
  }
}

Image from_planar(const uint8_t* chw, int64_t channels, int64_t height, int64_t width) {
  Image image{height, width, channels, {}};
  image.pixels.resize(static_cast<size_t>(image.bytes()));
  const int64_t plane = height * width;
  for (int64_t k = 0; k < channels; ++k) {
    for (int64_t i = 0; i < plane; ++i) image.pixels[i * channels + k] = chw[k * plane + i];
  }
  return image;
}

std::vector<uint8_t> encode_png(const Image& image) {
  check_image(image, "encode_png");
  std::vector<uint8_t> out;
  const int ok =
      stbi_write_png_to_func(append_bytes, &out, static_cast<int>(image.width),
                             static_cast<int>(image.height), static_cast<int>(image.channels),
                             image.pixels.data(), static_cast<int>(image.width * image.channels));
  LOCKSTEP_CHECK(ok != 0, "stbi_write_png_to_func failed");
  return out;
}

std::vector<uint8_t> encode_jpeg(const Image& image, int quality) {
  check_image(image, "encode_jpeg");
  std::vector<uint8_t> out;
  const int ok = stbi_write_jpg_to_func(
      append_bytes, &out, static_cast<int>(image.width), static_cast<int>(image.height),
      static_cast<int>(image.channels), image.pixels.data(), quality);
  LOCKSTEP_CHECK(ok != 0, "stbi_write_jpg_to_func failed");
  return out;
}

namespace {

// Writes bytes into an existing file that is not a regular one (a device,
// a pipe, /dev/stdout), in place: nothing to replace atomically.
void write_through(const std::string& path, std::span<const uint8_t> bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  int err = fd < 0 ? errno : write_fully(fd, bytes.data(), bytes.size());
  if (fd >= 0 && ::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) fail_input("cannot write ", path, ": ", std::strerror(err));
}

}  // namespace

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes, bool sync) {
  const ReplaceTarget target = replace_target(path);
  if (target.in_place) return write_through(path, bytes);
  static std::atomic<uint64_t> counter{0};
  AtomicFile file(target.path,
                  target.path + ".tmp." + std::to_string(::getpid()) + "." +
                      std::to_string(counter.fetch_add(1)),
                  "file");
  file.write(bytes.data(), bytes.size());
  file.commit(sync);
}

void write_text_atomically(const std::string& path, std::string_view text, bool sync) {
  write_file_atomically(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()),
      sync);
}

int64_t text_width(const std::string& text, int64_t scale) {
  std::string copy = text;
  return stb_easy_font_width(copy.data()) * scale;
}

int64_t text_height(const std::string& text, int64_t scale) {
  std::string copy = text;
  return stb_easy_font_height(copy.data()) * scale;
}

void fill_rect(Image& image, int64_t x, int64_t y, int64_t w, int64_t h,
               const std::vector<uint8_t>& color) {
  LOCKSTEP_CHECK(static_cast<int64_t>(color.size()) == image.channels);
  const int64_t x0 = std::max<int64_t>(x, 0), x1 = std::min(x + w, image.width);
  const int64_t y0 = std::max<int64_t>(y, 0), y1 = std::min(y + h, image.height);
  for (int64_t r = y0; r < y1; ++r) {
    for (int64_t q = x0; q < x1; ++q) {
      std::copy(color.begin(), color.end(),
                image.pixels.begin() + (r * image.width + q) * image.channels);
    }
  }
}

void draw_text(Image& image, int64_t x, int64_t y, const std::string& text, int64_t scale,
               const std::vector<uint8_t>& color) {
  // stb_easy_font emits axis-aligned quads of 4 vertices (x, y, z floats and
  // 4 colour bytes each), about 270 bytes per character.
  struct Vertex {
    float x, y, z;
    uint8_t rgba[4];
  };
  std::vector<Vertex> quads(text.size() * 80 + 64);
  std::string copy = text;
  const int n = stb_easy_font_print(0, 0, copy.data(), nullptr, quads.data(),
                                    static_cast<int>(quads.size() * sizeof(Vertex)));
  for (int q = 0; q < n; ++q) {
    const Vertex* v = &quads[static_cast<size_t>(q) * 4];
    const auto x0 = static_cast<int64_t>(std::min(v[0].x, v[2].x));
    const auto x1 = static_cast<int64_t>(std::max(v[0].x, v[2].x));
    const auto y0 = static_cast<int64_t>(std::min(v[0].y, v[2].y));
    const auto y1 = static_cast<int64_t>(std::max(v[0].y, v[2].y));
    fill_rect(image, x + x0 * scale, y + y0 * scale, (x1 - x0) * scale, (y1 - y0) * scale, color);
  }
}

}  // namespace lockstep::data
