// PNG headers and JPEG Huffman tables checked before stb_image decodes:
// sizes over the limit named as such whatever their magnitude, damaged
// chunk structure and overfull Huffman tables refused.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "data/image_io.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

using testing::throws_input_error;

void put_be32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}

void put_le32(std::vector<uint8_t>& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Recomputes the CRC of the chunk starting at `at` (length, type, data, CRC).
void fix_crc(std::vector<uint8_t>& b, size_t at) {
  const uint32_t length =
      static_cast<uint32_t>(b[at]) << 24 | b[at + 1] << 16 | b[at + 2] << 8 | b[at + 3];
  put_be32(b, at + 8 + length, static_cast<uint32_t>(crc32(0L, b.data() + at + 4, 4 + length)));
}

std::vector<uint8_t> gray_png() {
  return data::encode_png(data::Image{1, 1, 1, {128}});
}

TEST(PngCheck, HeaderOverTheLimitGetsTheOverSizeMessage) {
  for (uint32_t side : {20000u, 100000u, 0x7fffffffu, 0xffffffffu}) {
    std::vector<uint8_t> png = gray_png();
    put_be32(png, 16, side);
    put_be32(png, 20, side);
    fix_crc(png, 8);
    EXPECT_TRUE(throws_input_error([&] { data::image_info(png, "big.png"); },
                                   {"big.png", std::to_string(side) + "x" + std::to_string(side),
                                    "64 megapixels", "refused before decoding"}))
        << side;
  }
}

TEST(PngCheck, DamagedChunksAreRefusedBeforeDecoding) {
  // IHDR of length 0: the signature, then an empty IHDR chunk and IEND.
  std::vector<uint8_t> empty_ihdr = gray_png();
  empty_ihdr.resize(8);
  const uint8_t chunk[] = {0, 0, 0, 0, 'I', 'H', 'D', 'R', 0, 0, 0, 0};
  empty_ihdr.insert(empty_ihdr.end(), chunk, chunk + sizeof(chunk));
  empty_ihdr.resize(64, 0);
  fix_crc(empty_ihdr, 8);
  EXPECT_TRUE(throws_input_error([&] { data::decode_image(empty_ihdr, "e.png"); },
                                 {"e.png", "13-byte IHDR"}));
  // An empty IDAT before the image data.
  std::vector<uint8_t> empty_idat = gray_png();
  const uint8_t idat[] = {0, 0, 0, 0, 'I', 'D', 'A', 'T', 0, 0, 0, 0};
  empty_idat.insert(empty_idat.begin() + 33, idat, idat + sizeof(idat));
  fix_crc(empty_idat, 33);
  EXPECT_TRUE(throws_input_error([&] { data::decode_image(empty_idat, "i.png"); },
                                 {"i.png", "empty IDAT"}));
  // A chunk after the image data whose length runs past the end of the file
  // (found by tests/fuzz/fuzz_image: stb grew its buffer to the claimed
  // length first, 2 GiB here), and one with a damaged type.
  for (const char* type : {"IDAT", "\x01\x02zz"}) {
    std::vector<uint8_t> overlong = gray_png();
    const uint8_t header[] = {0x80, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4};
    const size_t iend = overlong.size() - 12;
    overlong.insert(overlong.begin() + static_cast<std::ptrdiff_t>(iend), header, header + 12);
    std::copy(type, type + 4, overlong.begin() + static_cast<std::ptrdiff_t>(iend) + 4);
    const std::string name = type[0] == 'I' ? "IDAT" : "damaged";
    EXPECT_TRUE(throws_input_error(
        [&] { data::decode_image(overlong, "o.png"); },
        {"o.png", "truncated PNG", "the " + name + " chunk at byte " + std::to_string(iend),
         "claims 2147483648 bytes",
         "past the end of the file (" + std::to_string(overlong.size()) + " bytes)"}))
        << name;
  }
  // Zero pixels.
  std::vector<uint8_t> zero = gray_png();
  put_be32(zero, 16, 0);
  fix_crc(zero, 8);
  EXPECT_TRUE(throws_input_error([&] { data::image_info(zero, "z.png"); }, {"z.png", "0x1"}));
  EXPECT_NO_THROW(data::decode_image(gray_png(), "ok.png"));
}

// A BMP whose compression field reads as a negative int (found by
// tests/fuzz/fuzz_image): stb decoded the 70-byte file as 11524 x 4864
// uncompressed pixels, seconds of work; refused before decoding.
TEST(BmpCheck, NegativeCompressionTypeIsRefusedBeforeDecoding) {
  // 2 x 2, 24 bits: file header, 40-byte info header, rows of 8 bytes.
  std::vector<uint8_t> bmp(54 + 16, 7);
  bmp[0] = 'B', bmp[1] = 'M';
  for (auto [at, v] : {std::pair<size_t, uint32_t>{2, 70},
                       {6, 0},
                       {10, 54},
                       {14, 40},
                       {18, 2},
                       {22, 2},
                       {26, 1 | 24 << 16},
                       {30, 0},
                       {34, 16},
                       {38, 0},
                       {42, 0},
                       {46, 0},
                       {50, 0}}) {
    put_le32(bmp, at, v);
  }
  EXPECT_EQ(data::decode_image(bmp, "ok.bmp").width, 2);
  // Top-down (negative height): decoded; and its magnitude is what the
  // pixel limit sees (found by fuzz_image: 37 x -14352382 passed the limit
  // as a negative product and stb allocated 1.6 GB).
  std::vector<uint8_t> top_down = bmp;
  put_le32(top_down, 22, static_cast<uint32_t>(-2));
  EXPECT_EQ(data::decode_image(top_down, "down.bmp").height, 2);
  put_le32(top_down, 18, 37);
  put_le32(top_down, 22, static_cast<uint32_t>(-14352382));
  EXPECT_TRUE(throws_input_error([&] { data::image_info(top_down, "tall.bmp"); },
                                 {"tall.bmp", "37x14352382 pixels", "over the limit"}));
  put_le32(bmp, 18, 11524);
  put_le32(bmp, 22, 4864);
  put_le32(bmp, 30, 0xff00ff00u);
  EXPECT_TRUE(throws_input_error([&] { data::decode_image(bmp, "c.bmp"); },
                                 {"c.bmp", "damaged BMP", "compression type 4278255360"}));
}

// The offset of the first segment with `marker` in a JPEG that
// stb_image_write made (segments back to back from byte 2), or past its end.
size_t find_segment(const std::vector<uint8_t>& jpeg, uint8_t marker) {
  size_t at = 2;
  while (at + 3 < jpeg.size() && !(jpeg[at] == 0xFF && jpeg[at + 1] == marker)) {
    at += 2 + (static_cast<size_t>(jpeg[at + 2]) << 8 | jpeg[at + 3]);
  }
  return at;
}

// A DHT segment whose table declares more than 256 codes (found by
// tests/fuzz/fuzz_image: stb_image wrote past the table).
TEST(JpegCheck, OverfullHuffmanTableIsRefused) {
  const data::Image image{8, 8, 1, std::vector<uint8_t>(64, 100)};
  std::vector<uint8_t> jpeg = data::encode_jpeg(image);
  EXPECT_NO_THROW(data::decode_image(jpeg, "ok.jpg"));
  const size_t dht = find_segment(jpeg, 0xC4);
  ASSERT_LT(dht + 21, jpeg.size()) << "no DHT segment";
  for (size_t i = 5; i < 21; ++i) jpeg[dht + i] = 0x20;  // 16 lengths x 32 codes = 512
  EXPECT_TRUE(throws_input_error([&] { data::decode_image(jpeg, "h.jpg"); },
                                 {"h.jpg", "Huffman table declares 512 codes (at most 256)"}));
}

// A scan whose component selects a Huffman table that no DHT segment
// defined (found by tests/fuzz/fuzz_image: stb_image decoded with the
// table's uninitialised memory and read past its 256 symbols).
TEST(JpegCheck, ScanWithAnUndefinedHuffmanTableIsRefused) {
  const data::Image image{8, 8, 3, std::vector<uint8_t>(192, 100)};
  for (int which : {0, 1}) {  // the DC or the AC selector of the first component
    std::vector<uint8_t> jpeg = data::encode_jpeg(image);
    EXPECT_NO_THROW(data::decode_image(jpeg, "ok.jpg"));
    const size_t sos = find_segment(jpeg, 0xDA);
    ASSERT_LT(sos + 6, jpeg.size()) << "no SOS segment";
    uint8_t& selector = jpeg[sos + 6];  // FF DA, length, Ns, component id, selector
    selector = which == 0 ? static_cast<uint8_t>(0x30 | (selector & 15))
                          : static_cast<uint8_t>((selector & 0xF0) | 3);
    EXPECT_TRUE(
        throws_input_error([&] { data::decode_image(jpeg, "t.jpg"); },
                           {"t.jpg", "damaged JPEG",
                            std::string("a scan uses ") + (which == 0 ? "DC" : "AC") +
                                " Huffman table 3, which no DHT segment before it defines"}));
  }
}

}  // namespace
}  // namespace lockstep
