// Image-folder datasets: labels and pixels (PNG exact, JPEG within a bound),
// channel conversion and resizing, the decoded-split cache, every bad-input
// message and skip mode. Exporting a dataset as a folder and the contact
// sheet (`lockstep data`): test_data_command.cpp.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "data/catalog.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using data::FolderOptions;
using data::Image;
using testing::ScratchDir;
using testing::throws_input_error;

// A deterministic pattern; smooth when `smooth` (JPEG-friendly).
Image pattern(int64_t h, int64_t w, int64_t c, int seed, bool smooth = false) {
  Image image{h, w, c, {}};
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      for (int64_t k = 0; k < c; ++k) {
        const int64_t v = smooth ? 40 + 8 * x + 6 * y + 30 * k + seed
                                 : (y * 31 + x * 17 + k * 71 + seed * 13) * 7;
        image.pixels.push_back(static_cast<uint8_t>(smooth ? std::min<int64_t>(v, 250) : v % 256));
      }
    }
  }
  return image;
}

void write_image(const std::string& path, const Image& image, bool jpeg = false) {
  fs::create_directories(fs::path(path).parent_path());
  testing::write_bytes(path, jpeg ? data::encode_jpeg(image, 95) : data::encode_png(image));
}

// Planar copy of an image, for comparing with Dataset samples.
std::vector<uint8_t> planar(const Image& image) {
  std::vector<uint8_t> chw(static_cast<size_t>(image.bytes()));
  data::to_planar(image, chw.data());
  return chw;
}

std::vector<uint8_t> sample(const data::Dataset& d, int64_t i) {
  return {d.image(i), d.image(i) + d.image_bytes()};
}

// root/train/{cat,dog}, root/test/{cat,dog}: gray 6x8 PNGs; returns the
// images in load order (class by class, sorted names).
std::vector<Image> write_gray_folder(const std::string& root) {
  std::vector<Image> images;
  int seed = 0;
  for (const char* split : {"train", "test"}) {
    for (const char* cls : {"cat", "dog"}) {
      for (const char* name : {"a.png", "b.png", "c.png"}) {
        const Image image = pattern(6, 8, 1, ++seed);
        write_image(root + "/" + split + "/" + cls + "/" + name, image);
        if (std::string(split) == "train") images.push_back(image);
      }
    }
  }
  return images;
}

TEST(ImageFolderLoad, PngGivesLabelsInSortedClassOrderAndExactPixels) {
  ScratchDir dir;
  // Created out of order, with a nested folder, a hidden file, a non-image.
  const Image z = pattern(6, 8, 1, 1), a = pattern(6, 8, 1, 2), n = pattern(6, 8, 1, 3);
  write_image(dir.file("train/zebra/1.png"), z);
  write_image(dir.file("train/ant/x/2.png"), n);
  write_image(dir.file("train/ant/1.png"), a);
  write_image(dir.file("train/ant/.hidden.png"), pattern(6, 8, 1, 9));
  testing::write_bytes(dir.file("train/ant/notes.txt"), {'h', 'i'});
  write_image(dir.file("test/zebra/1.PNG"), z);
  const auto train = data::load_image_folder(dir.path(), true, {.use_cache = false});
  const data::Dataset& d = train.dataset;
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"ant", "zebra"}));
  EXPECT_EQ(d.name, "folder/train");
  ASSERT_EQ(d.size(), 3);
  EXPECT_EQ(d.labels, (std::vector<int32_t>{0, 0, 1}));  // ant/1.png, ant/x/2.png, zebra/1.png
  EXPECT_EQ((std::vector<int64_t>{d.channels, d.height, d.width}), (std::vector<int64_t>{1, 6, 8}));
  EXPECT_EQ(sample(d, 0), planar(a));
  EXPECT_EQ(sample(d, 1), planar(n));
  EXPECT_EQ(sample(d, 2), planar(z));
  const auto test = data::load_image_folder(dir.path(), false, {.use_cache = false}).dataset;
  EXPECT_EQ(test.labels, (std::vector<int32_t>{1}));  // train's numbering, not test's
  EXPECT_EQ(test.num_classes, 2);
}

TEST(ImageFolderLoad, ColourPngIsExactAndConvertsToGrayWithStbWeights) {
  ScratchDir dir;
  const Image rgb = pattern(5, 7, 3, 4);
  write_image(dir.file("train/a/1.png"), rgb);
  write_image(dir.file("train/b/1.png"), rgb);  // a classifier needs two classes
  write_image(dir.file("test/a/1.png"), rgb);
  const auto colour = data::load_image_folder(dir.path(), true, {.use_cache = false}).dataset;
  ASSERT_EQ(colour.channels, 3);
  EXPECT_EQ(sample(colour, 0), planar(rgb));
  const auto gray =
      data::load_image_folder(dir.path(), true, {.channels = 1, .use_cache = false}).dataset;
  ASSERT_EQ(gray.channels, 1);
  for (int64_t i = 0; i < 35; ++i) {
    const uint8_t* p = rgb.pixels.data() + i * 3;
    EXPECT_EQ(gray.image(0)[i], (p[0] * 77 + p[1] * 150 + p[2] * 29) >> 8) << "pixel " << i;
  }
}

TEST(ImageFolderLoad, GrayAndColourMixIntoTheFirstImagesChannelCount) {
  ScratchDir dir;
  const Image rgb = pattern(4, 4, 3, 1), g = pattern(4, 4, 1, 2);
  write_image(dir.file("train/a/1.png"), rgb);  // first image: colour
  write_image(dir.file("train/b/1.png"), g);
  write_image(dir.file("test/b/1.png"), g);  // the test split's first is gray
  const auto train = data::load_image_folder(dir.path(), true, {.use_cache = false}).dataset;
  const auto test = data::load_image_folder(dir.path(), false, {.use_cache = false}).dataset;
  EXPECT_EQ(train.channels, 3);
  EXPECT_EQ(test.channels, 3);
  for (int64_t k = 0; k < 3; ++k) {  // gray replicated into R, G and B
    EXPECT_TRUE(std::equal(g.pixels.begin(), g.pixels.end(), test.image(0) + k * 16));
  }
}

TEST(ImageFolderLoad, JpegPixelsAreWithinABound) {
  ScratchDir dir;
  const Image gray = pattern(16, 16, 1, 3, true), rgb = pattern(16, 16, 3, 5, true);
  write_image(dir.file("train/g/1.jpg"), gray, true);
  write_image(dir.file("train/g/2.jpeg"), gray, true);
  write_image(dir.file("train/h/1.jpg"), gray, true);  // a classifier needs two classes
  write_image(dir.file("test/g/1.jpg"), gray, true);
  // stb_image_write stores even a gray JPEG as YCbCr (3 components), so the
  // folder would be colour by default: ask for one channel.
  const auto d =
      data::load_image_folder(dir.path(), true, {.channels = 1, .use_cache = false}).dataset;
  ASSERT_EQ(d.size(), 3);
  ASSERT_EQ(d.channels, 1);
  int worst = 0;
  for (size_t i = 0; i < gray.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int(d.image(0)[i]) - int(gray.pixels[i])));
  }
  EXPECT_LE(worst, 8) << "quality-95 JPEG of a smooth gradient";
  // Colour JPEG, read as colour.
  ScratchDir colour_dir;
  write_image(colour_dir.file("train/c/1.jpg"), rgb, true);
  write_image(colour_dir.file("train/d/1.jpg"), rgb, true);
  write_image(colour_dir.file("test/c/1.jpg"), rgb, true);
  const auto c = data::load_image_folder(colour_dir.path(), true, {.use_cache = false}).dataset;
  ASSERT_EQ(c.channels, 3);
  const auto expected = planar(rgb);
  worst = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    worst = std::max(worst, std::abs(int(c.image(0)[i]) - int(expected[i])));
  }
  EXPECT_LE(worst, 16) << "quality-95 JPEG with 4:2:0 chroma of a smooth gradient";
}

TEST(ImageFolderLoad, MixedSizesAreResizedToImageSize) {
  ScratchDir dir;
  const Image same = pattern(8, 8, 1, 1), big = pattern(16, 16, 1, 2), odd = pattern(12, 10, 1, 3);
  Image flat{20, 30, 1, std::vector<uint8_t>(600, 77)};
  write_image(dir.file("train/a/1.png"), same);
  write_image(dir.file("train/a/2.png"), big);
  write_image(dir.file("train/b/1.png"), odd);
  write_image(dir.file("train/b/2.png"), flat);
  write_image(dir.file("test/a/1.png"), big);
  const auto d =
      data::load_image_folder(dir.path(), true, {.image_size = 8, .use_cache = false}).dataset;
  ASSERT_EQ(d.size(), 4);
  EXPECT_EQ(d.height, 8);
  EXPECT_EQ(d.width, 8);
  EXPECT_EQ(sample(d, 0), same.pixels);  // already 8x8: untouched
  EXPECT_EQ(sample(d, 1), data::resize_image(big, 8, 8).pixels);
  EXPECT_EQ(sample(d, 2), data::resize_image(odd, 8, 8).pixels);
  EXPECT_EQ(sample(d, 3), std::vector<uint8_t>(64, 77));  // a flat image stays flat
}

// --- cache ------------------------------------------------------------------------

TEST(ImageFolderCache, SecondLoadReadsTheCacheAndGivesTheSameData) {
  ScratchDir dir;
  write_gray_folder(dir.path());
  const auto first = data::load_image_folder(dir.path(), true);
  EXPECT_FALSE(first.stats.from_cache);
  EXPECT_TRUE(first.stats.cache_problem.empty()) << first.stats.cache_problem;
  ASSERT_TRUE(fs::exists(first.stats.cache_path));
  EXPECT_EQ(fs::path(first.stats.cache_path).parent_path(), fs::path(dir.path()));
  EXPECT_EQ(fs::path(first.stats.cache_path).filename().string().rfind(".lockstep-cache-train-", 0),
            0u);
  const auto second = data::load_image_folder(dir.path(), true);
  EXPECT_TRUE(second.stats.from_cache);
  EXPECT_EQ(second.dataset.fingerprint(), first.dataset.fingerprint());
  EXPECT_EQ(second.dataset.class_names, first.dataset.class_names);
  EXPECT_EQ(second.dataset.name, "folder/train");
  // The test split has its own cache; other options have their own too.
  EXPECT_FALSE(data::load_image_folder(dir.path(), false).stats.from_cache);
  EXPECT_TRUE(data::load_image_folder(dir.path(), false).stats.from_cache);
  EXPECT_FALSE(data::load_image_folder(dir.path(), true, {.channels = 3}).stats.from_cache);
  EXPECT_TRUE(data::load_image_folder(dir.path(), true).stats.from_cache);
  // No leftover temporaries.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST(ImageFolderCache, ChangedAddedOrRemovedFilesRebuildIt) {
  ScratchDir dir;
  write_gray_folder(dir.path());
  ASSERT_FALSE(data::load_image_folder(dir.path(), true).stats.from_cache);
  // Rewrite one file with new pixels (and a later mtime: ext4 stamps are coarse).
  const std::string path = dir.file("train/dog/b.png");
  const auto before = fs::last_write_time(path);
  const Image changed = pattern(6, 8, 1, 99);
  write_image(path, changed);
  fs::last_write_time(path, before + std::chrono::seconds(2));
  auto r = data::load_image_folder(dir.path(), true);
  EXPECT_FALSE(r.stats.from_cache);
  EXPECT_EQ(sample(r.dataset, 4), changed.pixels);
  EXPECT_TRUE(data::load_image_folder(dir.path(), true).stats.from_cache);
  // A new file.
  write_image(dir.file("train/dog/d.png"), pattern(6, 8, 1, 50));
  r = data::load_image_folder(dir.path(), true);
  EXPECT_FALSE(r.stats.from_cache);
  EXPECT_EQ(r.dataset.size(), 7);
  // A removed file.
  fs::remove(dir.file("train/cat/a.png"));
  r = data::load_image_folder(dir.path(), true);
  EXPECT_FALSE(r.stats.from_cache);
  EXPECT_EQ(r.dataset.size(), 6);
  EXPECT_TRUE(data::load_image_folder(dir.path(), true).stats.from_cache);
}

TEST(ImageFolderCache, DamagedCacheIsRebuiltNotTrusted) {
  ScratchDir dir;
  write_gray_folder(dir.path());
  const auto first = data::load_image_folder(dir.path(), true);
  std::fstream f(first.stats.cache_path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(-10, std::ios::end);
  f.put('\x5a');
  f.close();
  const auto again = data::load_image_folder(dir.path(), true);
  EXPECT_FALSE(again.stats.from_cache);
  EXPECT_EQ(again.dataset.fingerprint(), first.dataset.fingerprint());
  // Cut short.
  fs::resize_file(first.stats.cache_path, 30);
  EXPECT_FALSE(data::load_image_folder(dir.path(), true).stats.from_cache);
  EXPECT_TRUE(data::load_image_folder(dir.path(), true).stats.from_cache);
}

TEST(ImageFolderCache, UnwritableCacheIsANoteNotAnError) {
  ScratchDir dir;
  write_gray_folder(dir.path());
  // A folder where the cache file should be makes the rename fail.
  const std::string blocker =
      data::load_image_folder(dir.path(), true, {.use_cache = true}).stats.cache_path;
  fs::remove(blocker);
  fs::create_directories(blocker + "/x");
  const auto r = data::load_image_folder(dir.path(), true);
  EXPECT_EQ(r.dataset.size(), 6);
  EXPECT_FALSE(r.stats.from_cache);
  EXPECT_NE(r.stats.cache_problem.find(blocker), std::string::npos) << r.stats.cache_problem;
  ASSERT_EQ(r.stats.notes().size(), 1u);
  EXPECT_NE(r.stats.notes()[0].find("image cache not written"), std::string::npos);
}

// --- bad input ----------------------------------------------------------------------

// A valid gray PNG whose IHDR claims width x height (CRC fixed up).
std::vector<uint8_t> png_with_header_size(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = data::encode_png(Image{1, 1, 1, {128}});
  for (int i = 0; i < 4; ++i) {
    png[16 + i] = static_cast<uint8_t>(width >> (24 - 8 * i));
    png[20 + i] = static_cast<uint8_t>(height >> (24 - 8 * i));
  }
  const uint32_t crc = static_cast<uint32_t>(crc32(0L, png.data() + 12, 17));  // type + data
  for (int i = 0; i < 4; ++i) png[29 + i] = static_cast<uint8_t>(crc >> (24 - 8 * i));
  return png;
}

TEST(ImageFolderErrors, HugeImageIsRefusedFromItsHeader) {
  const std::vector<uint8_t> huge = png_with_header_size(30000, 30000);
  const auto info_call = [&] { data::image_info(huge, "huge.png"); };
  EXPECT_TRUE(throws_input_error(
      info_call, {"huge.png", "30000x30000", "64 megapixels", "refused before decoding"}));
  ScratchDir dir;
  write_gray_folder(dir.path());
  testing::write_bytes(dir.file("train/cat/huge.png"), huge);
  EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                                 {"train/cat/huge.png", "64 megapixels"}));
  // A header within the limit still decodes normally.
  EXPECT_NO_THROW(data::decode_image(data::encode_png(pattern(300, 200, 3, 1)), "ok.png"));
}

TEST(ImageFolderErrors, BadFilesAreNamedWithWhatIsWrong) {
  struct Case {
    const char* name;
    std::vector<uint8_t> bytes;
    std::vector<std::string> message;
  };
  const std::vector<uint8_t> png = data::encode_png(pattern(6, 8, 1, 7));
  const std::vector<uint8_t> jpeg = data::encode_jpeg(pattern(6, 8, 1, 7, true));
  std::vector<uint8_t> bad_zlib = png;
  for (size_t i = 41; i < bad_zlib.size() - 16; ++i) bad_zlib[i] ^= 0x5a;
  const std::vector<Case> cases = {
      {"zero.png", {}, {"zero.png", "empty file"}},
      {"text.png", {'h', 'e', 'l', 'l', 'o', '\n'}, {"text.png", "not a PNG, JPEG or BMP"}},
      {"cut.png",
       {png.begin(), png.begin() + static_cast<long>(png.size() / 2)},
       {"cut.png", "truncated PNG"}},
      {"cut.jpg",
       {jpeg.begin(), jpeg.begin() + static_cast<long>(jpeg.size() * 2 / 3)},
       {"cut.jpg", "truncated JPEG"}},
      {"garbled.png", bad_zlib, {"garbled.png", "cannot decode"}},
  };
  for (const Case& c : cases) {
    ScratchDir dir;
    write_gray_folder(dir.path());
    testing::write_bytes(dir.file(std::string("train/dog/") + c.name), c.bytes);
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); }, c.message))
        << c.name;
  }
}

TEST(ImageFolderErrors, LayoutProblemsAreNamed) {
  {
    ScratchDir dir;
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.file("nowhere"), true); },
                                   {"nowhere", "does not exist"}));
    fs::create_directories(dir.file("test/a"));
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                                   {"/train", "no such folder"}));
    fs::create_directories(dir.file("train"));
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                                   {"/train", "no class folders"}));
  }
  {
    ScratchDir dir;
    write_gray_folder(dir.path());
    fs::create_directories(dir.file("train/empty"));
    testing::write_bytes(dir.file("train/empty/readme.txt"), {'x'});
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                                   {"train/empty", "class folder has no images"}));
  }
  {
    ScratchDir dir;
    write_gray_folder(dir.path());
    write_image(dir.file("test/wolf/1.png"), pattern(6, 8, 1, 1));
    EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), false); },
                                   {"test/wolf", "class \"wolf\" is not in", "/train"}));
    EXPECT_NO_THROW(data::load_image_folder(dir.path(), true));  // train alone is fine
  }
  {
    ScratchDir dir;
    write_gray_folder(dir.path());
    write_image(dir.file("train/dog/big.png"), pattern(12, 8, 1, 1));
    EXPECT_TRUE(
        throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                           {"train/dog/big.png", "8x12", "train/cat/a.png", "8x6", "image_size"}));
    // Skipping does not hide a size mix: it is a setting, not a bad file.
    EXPECT_TRUE(throws_input_error(
        [&] { data::load_image_folder(dir.path(), true, {.skip_bad_images = true}); },
        {"big.png", "image_size"}));
    EXPECT_EQ(data::load_image_folder(dir.path(), true, {.image_size = 6}).dataset.size(), 7);
  }
  EXPECT_TRUE(throws_input_error([] { data::load_image_folder("/tmp", true, {.channels = 2}); },
                                 {"image_channels", "2"}));
  EXPECT_TRUE(throws_input_error([] { data::load_dataset("folder", "", true); },
                                 {"folder", "needs data_dir"}));
}

// --data-dir one level too deep (or a set with one class): refused with one
// line naming the folder, by the loader and by `lockstep train`.
TEST(ImageFolderErrors, FewerThanTwoClassesIsRefusedNamingTheFolder) {
  ScratchDir dir;
  for (const char* split : {"train", "test"}) {
    for (const char* name : {"a.png", "b.png"}) {
      write_image(dir.file(std::string("one/") + split + "/cat/" + name), pattern(6, 8, 1, 1));
    }
  }
  EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.file("one"), true); },
                                 {dir.file("one/train"), "one class folder (cat)"}));
  const auto r = testing::run_lockstep("train --dataset folder --data-dir " + dir.file("one") +
                                       " --epochs 1 --progress none --run-dir " + dir.file("run"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(dir.file("one/train") + ": one class folder (cat); a classifier needs"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("epoch   1/1"), std::string::npos) << "trained anyway:\n" << r.output;
}

TEST(ImageFolderErrors, SkipModeCountsAndNamesSkippedFiles) {
  ScratchDir dir;
  write_gray_folder(dir.path());
  const std::vector<uint8_t> png = data::encode_png(pattern(6, 8, 1, 7));
  testing::write_bytes(dir.file("train/cat/0-empty.png"), {});
  testing::write_bytes(dir.file("train/dog/cut.png"), {png.begin(), png.begin() + 20});
  testing::write_bytes(dir.file("train/dog/huge.png"), png_with_header_size(30000, 30000));
  const FolderOptions skip{.skip_bad_images = true};
  const auto r = data::load_image_folder(dir.path(), true, skip);
  EXPECT_EQ(r.stats.files, 9);
  EXPECT_EQ(r.stats.skipped, 3);
  EXPECT_EQ(r.dataset.size(), 6);
  EXPECT_EQ(r.dataset.labels, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  ASSERT_EQ(r.stats.skipped_files.size(), 3u);
  EXPECT_NE(r.stats.skipped_files[0].find("0-empty.png"), std::string::npos);
  ASSERT_EQ(r.stats.notes().size(), 1u);
  EXPECT_NE(r.stats.notes()[0].find("skipped 3 of 9 images"), std::string::npos)
      << r.stats.notes()[0];
  // The first (bad) image does not decide the size; the cache keeps the count.
  const auto cached = data::load_image_folder(dir.path(), true, skip);
  EXPECT_TRUE(cached.stats.from_cache);
  EXPECT_EQ(cached.stats.skipped, 3);
  EXPECT_EQ(cached.dataset.fingerprint(), r.dataset.fingerprint());
  // Through the catalog, the note reaches the caller.
  std::vector<std::string> notes;
  data::load_dataset("folder", dir.path(), true, skip, &notes);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("skipped 3"), std::string::npos);
  // Without skipping, the first bad file in order is the error.
  EXPECT_TRUE(throws_input_error([&] { data::load_image_folder(dir.path(), true); },
                                 {"0-empty.png", "empty file"}));
}

}  // namespace
}  // namespace lockstep
