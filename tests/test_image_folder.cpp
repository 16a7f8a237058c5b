// Image-folder datasets: labels and pixels (PNG exact, JPEG within a bound),
// channel conversion and resizing, the decoded-split cache, every bad-input
// message and skip mode, export of IDX data and batch-by-batch equality with
// it, and the `data show` contact sheet.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "app/data_show.h"
#include "data/batch_loader.h"
#include "data/catalog.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "data/sampler.h"
#include "nn/error.h"
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
  write_image(dir.file("test/g/1.jpg"), gray, true);
  // stb_image_write stores even a gray JPEG as YCbCr (3 components), so the
  // folder would be colour by default: ask for one channel.
  const auto d =
      data::load_image_folder(dir.path(), true, {.channels = 1, .use_cache = false}).dataset;
  ASSERT_EQ(d.size(), 2);
  ASSERT_EQ(d.channels, 1);
  int worst = 0;
  for (size_t i = 0; i < gray.pixels.size(); ++i) {
    worst = std::max(worst, std::abs(int(d.image(0)[i]) - int(gray.pixels[i])));
  }
  EXPECT_LE(worst, 8) << "quality-95 JPEG of a smooth gradient";
  // Colour JPEG, read as colour.
  ScratchDir colour_dir;
  write_image(colour_dir.file("train/c/1.jpg"), rgb, true);
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

// --- export -------------------------------------------------------------------------

TEST(ImageFolderExport, ClassDirsSortInLabelOrder) {
  EXPECT_EQ(data::export_class_dirs({"0", "1", "2"}), (std::vector<std::string>{"0", "1", "2"}));
  EXPECT_EQ(data::export_class_dirs({"b", "a/x"}), (std::vector<std::string>{"0_b", "1_a_x"}));
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    std::string name = "c";
    name += std::to_string(11 - i);
    names.push_back(name);
  }
  const auto dirs = data::export_class_dirs(names);
  EXPECT_EQ(dirs[0], "00_c11");
  EXPECT_EQ(dirs[11], "11_c0");
  EXPECT_TRUE(std::is_sorted(dirs.begin(), dirs.end()));
  EXPECT_EQ(data::export_class_dirs({".hidden"}), (std::vector<std::string>{"_hidden"}));
}

// The IDX dataset in export order: what the folder must read back.
data::Dataset reordered(const data::Dataset& d, const std::vector<int64_t>& order) {
  data::Dataset out = d;
  out.images.clear();
  out.labels.clear();
  for (int64_t i : order) {
    out.images.insert(out.images.end(), d.image(i), d.image(i) + d.image_bytes());
    out.labels.push_back(d.labels[static_cast<size_t>(i)]);
  }
  return out;
}

// Same batches, batch by batch, for the same sampler over both datasets
// (shuffled, augmented, 2 ranks).
void expect_same_batches(const data::Dataset& a, const data::Dataset& b) {
  for (int rank = 0; rank < 2; ++rank) {
    data::DistributedSampler sampler(a.size(), rank, 2, true, 7);
    sampler.set_epoch(3);
    data::BatchLoaderOptions lo;
    lo.batch_size = 16;
    lo.normalization = data::mnist_normalization();
    lo.augmentation = data::cifar10_augmentation();
    lo.seed = 7;
    lo.epoch = 3;
    data::BatchLoader la(a, sampler.indices(), lo), lb(b, sampler.indices(), lo);
    data::Batch ba, bb;
    int64_t batches = 0;
    while (la.next(ba)) {
      ASSERT_TRUE(lb.next(bb));
      ASSERT_EQ(ba.labels, bb.labels) << "batch " << batches;
      ASSERT_EQ(ba.sample_ids, bb.sample_ids);
      ASSERT_TRUE(
          std::equal(ba.images.span().begin(), ba.images.span().end(), bb.images.span().begin()))
          << "batch " << batches;
      ++batches;
    }
    EXPECT_FALSE(lb.next(bb));
    EXPECT_EQ(batches, sampler.steps(16));
  }
}

TEST(ImageFolderExport, ExportedIdxReadsBackAsTheSameSamplesAndBatches) {
  ScratchDir idx, out;
  testing::write_mnist_dir(idx.path(), 120, 50);
  const auto train = data::load_dataset("mnist", idx.path(), true);
  const auto test = data::load_dataset("mnist", idx.path(), false);
  const auto stats = data::export_image_folder(train, test, out.path());
  EXPECT_EQ(stats.train_images, 120);
  EXPECT_EQ(stats.test_images, 50);
  EXPECT_TRUE(fs::exists(out.file("train/3")));
  for (const bool is_train : {true, false}) {
    const data::Dataset& idx_set = is_train ? train : test;
    const auto folder = data::load_image_folder(out.path(), is_train).dataset;
    const auto expected = reordered(idx_set, data::export_order(idx_set));
    EXPECT_EQ(folder.class_names, idx_set.class_names);
    ASSERT_EQ(folder.size(), idx_set.size());
    EXPECT_EQ(folder.labels, expected.labels);
    EXPECT_TRUE(folder.images == expected.images) << "PNG export is lossless";
    expect_same_batches(expected, folder);
  }
  EXPECT_TRUE(throws_input_error([&] { data::export_image_folder(train, test, out.path()); },
                                 {"/train already exists"}));
}

TEST(ImageFolderExport, FashionMnistSubsetThroughTheCommandMatchesIdxBatches) {
  if (!fs::exists(std::string(LOCKSTEP_FASHION_MNIST_DIR) + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed in " LOCKSTEP_FASHION_MNIST_DIR;
  }
  ScratchDir out;
  const auto r = testing::run_lockstep("data export --dataset fashion-mnist --limit 30 --out " +
                                       out.path() + "/fm");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("exported 300 train and 300 test images"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(out.file("fm/train/0_T-shirt_top")));
  EXPECT_TRUE(fs::exists(out.file("fm/test/9_Ankle_boot")));
  const auto idx = data::load_dataset("fashion-mnist", "", true);
  const auto folder = data::load_dataset("folder", out.path() + "/fm", true);
  EXPECT_EQ(folder.size(), 300);
  const auto expected = reordered(idx, data::export_order(idx, 30));
  EXPECT_EQ(folder.labels, expected.labels);
  EXPECT_TRUE(folder.images == expected.images);
  expect_same_batches(expected, folder);
}

// --- data show ----------------------------------------------------------------------

TEST(DataShowSheet, CommandWritesAPngOfTheExpectedSizeAndPixels) {
  ScratchDir dir;
  const auto written = testing::write_mnist_dir(dir.file("idx"), 200, 20);
  const std::string sheet = dir.file("sheet.png");
  const auto run = testing::run_lockstep("data show --dataset mnist --data-dir " + dir.file("idx") +
                                         " --per-class 4 --zoom 2 --augment off --out " + sheet);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto bytes = data::read_file_bytes(sheet);
  const data::ImageInfo info = data::image_info(bytes, sheet);  // stbi_info
  std::vector<std::string> names;
  for (int k = 0; k < 10; ++k) names.push_back(std::to_string(k));
  const int64_t cell = 28 * 2, gap = app::kSheetGap;
  const int64_t label_w = app::label_column_width(names, cell);
  EXPECT_EQ(info.width, label_w + 4 * (cell + gap) + gap);
  EXPECT_EQ(info.height, 10 * (cell + gap) + gap);
  EXPECT_EQ(info.channels, 3);
  // Row r, column j shows the j-th sample of class r, un-normalised back to
  // its pixels (gray in R, G and B), each pixel a 2x2 block.
  const Image image = data::decode_image(bytes, sheet, 3);
  const auto& train = written.train;
  for (int64_t r = 0; r < 10; r += 3) {
    std::vector<int64_t> ids;
    for (int64_t i = 0; i < train.n && ids.size() < 4; ++i) {
      if (train.labels[static_cast<size_t>(i)] == r) ids.push_back(i);
    }
    for (size_t j = 0; j < ids.size(); ++j) {
      const int64_t x0 = label_w + gap + static_cast<int64_t>(j) * (cell + gap);
      const int64_t y0 = gap + r * (cell + gap);
      for (int64_t y = 0; y < 28; y += 5) {
        for (int64_t x = 0; x < 28; x += 3) {
          const uint8_t want = train.images[static_cast<size_t>(ids[j] * 784 + y * 28 + x)];
          for (int64_t dy = 0; dy < 2; ++dy) {
            const int64_t at = ((y0 + 2 * y + dy) * image.width + x0 + 2 * x + 1) * 3;
            ASSERT_EQ(image.pixels[static_cast<size_t>(at)], want)
                << "class " << r << " sample " << j << " at " << x << "," << y;
            ASSERT_EQ(image.pixels[static_cast<size_t>(at + 2)], want);
          }
        }
      }
    }
  }
}

TEST(DataShowSheet, ShowsTheAugmentationTrainingDraws) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.path(), 60, 10);
  const auto d = data::load_dataset("mnist", dir.path(), true);
  app::SheetOptions o;
  o.per_class = 2;
  o.zoom = 1;
  o.normalization = data::mnist_normalization();
  o.augmentation = data::cifar10_augmentation();
  o.seed = 5;
  o.epoch = 2;
  const Image sheet = app::contact_sheet(d, o);
  const int64_t label_w = app::label_column_width(d.class_names, 28);
  EXPECT_EQ(sheet.width, label_w + 2 * 30 + 2);
  // The first sample of class 0, transformed as the loader would, then inverted.
  int64_t id = 0;
  while (d.labels[static_cast<size_t>(id)] != 0) ++id;
  const data::PixelTransform t(1, o.normalization, o.augmentation);
  std::vector<float> v(784);
  t.apply(d.image(id), 28, 28, 5, 2, id, v.data());
  int64_t differs_from_raw = 0;
  for (int64_t y = 0; y < 28; ++y) {
    for (int64_t x = 0; x < 28; ++x) {
      const float unit = v[static_cast<size_t>(y * 28 + x)] * 0.3081f + 0.1307f;
      const auto want = static_cast<uint8_t>(std::clamp(std::lround(unit * 255.0f), 0L, 255L));
      const int64_t at = ((2 + y) * sheet.width + label_w + 2 + x) * 3;
      ASSERT_EQ(sheet.pixels[static_cast<size_t>(at)], want) << x << "," << y;
      differs_from_raw += want != d.image(id)[y * 28 + x];
    }
  }
  const data::CropFlip cf = data::draw_crop_flip(o.augmentation, 5, 2, id);
  if (cf.dx != 0 || cf.dy != 0 || cf.flip) {
    EXPECT_GT(differs_from_raw, 0);
  }
}

TEST(DataShowSheet, BadArgumentsAreNamed) {
  const auto r =
      testing::run_lockstep("data show --dataset mnist --data-dir /nonexistent --out x.png");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent"), std::string::npos) << r.output;
  const auto s = testing::run_lockstep("data show --split validation");
  EXPECT_NE(s.exit_code, 0);
  EXPECT_NE(s.output.find("--split"), std::string::npos) << s.output;
}

}  // namespace
}  // namespace lockstep
