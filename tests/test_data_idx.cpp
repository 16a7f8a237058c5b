// IDX reader (MNIST family): small files in the real format, bad files, and
// the Fashion-MNIST package files.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "data/catalog.h"
#include "data/idx.h"
#include "support/dataset_files.h"

namespace lockstep::data {
namespace {

using testing::ScratchDir;
using testing::synthetic_images;
using testing::throws_input_error;
using testing::write_idx;
using testing::write_idx_images;
using testing::write_idx_labels;

// Bad IDX files: each test writes files into dir_; fails() passes when
// read_idx of two of them throws an InputError naming every one of parts
// (throws_input_error).
class IdxErrors : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }
  ::testing::AssertionResult fails(const std::string& images, const std::string& labels,
                                   const std::vector<std::string>& parts) const {
    return throws_input_error([&] { read_idx(file(images), file(labels), mnist_class_names()); },
                              parts);
  }

 private:
  ScratchDir dir_;
};

class IdxFormats : public ::testing::TestWithParam<bool> {};

TEST_P(IdxFormats, ReadsExactValues) {
  const bool gzip = GetParam();
  ScratchDir dir;
  const std::vector<uint8_t> pixels = {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255};
  write_idx_images(dir.file("img"), 2, 2, 3, pixels, gzip);
  write_idx_labels(dir.file("lab"), {7, 2}, gzip);
  const Dataset ds = read_idx(dir.file("img"), dir.file("lab"), mnist_class_names());
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.channels, 1);
  EXPECT_EQ(ds.height, 2);
  EXPECT_EQ(ds.width, 3);
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_EQ(ds.images, pixels);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{7, 2}));
  EXPECT_EQ(ds.image(1)[0], 250);
}

INSTANTIATE_TEST_SUITE_P(Idx, IdxFormats, ::testing::Values(false, true),
                         [](const auto& p) { return p.param ? "gzip" : "raw"; });

TEST(IdxReader, InfersClassesWhenNoNamesGiven) {
  ScratchDir dir;
  write_idx_images(dir.file("img"), 3, 1, 1, {1, 2, 3});
  write_idx_labels(dir.file("lab"), {0, 4, 2});
  const Dataset ds = read_idx(dir.file("img"), dir.file("lab"), {});
  EXPECT_EQ(ds.num_classes, 5);
  EXPECT_EQ(ds.class_names.back(), "4");
}

TEST_F(IdxErrors, MissingFile) {
  write_idx_labels(file("lab"), {1});
  EXPECT_TRUE(fails("nope", "lab", {file("nope"), "cannot open", "No such file"}));
}

TEST_F(IdxErrors, TruncatedImagesRawAndGzip) {
  for (bool gzip : {false, true}) {
    // The header promises 3 images of 2x2 (12 pixels); 10 follow.
    write_idx_images(file("img"), 3, 2, 2, std::vector<uint8_t>(10, 9), gzip);
    write_idx_labels(file("lab"), {1, 2, 3}, gzip);
    EXPECT_TRUE(fails("img", "lab",
                      {file("img"), "truncated", "3 images of 2x2", "28 bytes", "holds 26 bytes"}))
        << "gzip=" << gzip;
  }
}

TEST_F(IdxErrors, CutGzipStream) {
  const auto data = synthetic_images(50, 1, 28, 28);
  write_idx_images(file("img.gz"), 50, 28, 28, data.images, true);
  write_idx_labels(file("lab.gz"), data.labels, true);
  std::filesystem::resize_file(file("img.gz"), std::filesystem::file_size(file("img.gz")) / 2);
  EXPECT_TRUE(fails("img.gz", "lab.gz", {file("img.gz"), "gzip"}));
}

TEST_F(IdxErrors, TruncatedLabels) {
  write_idx_images(file("img"), 3, 1, 1, {1, 2, 3});
  write_idx(file("lab"), 0x00000801, {3}, {1, 2});
  EXPECT_TRUE(
      fails("img", "lab", {file("lab"), "truncated", "3 labels", "11 bytes", "holds 10 bytes"}));
}

TEST_F(IdxErrors, TruncatedHeader) {
  testing::write_bytes(file("img"), {0, 0, 8, 3, 0, 0});
  write_idx_labels(file("lab"), {1});
  EXPECT_TRUE(fails("img", "lab", {file("img"), "truncated", "6 bytes", "needs 16"}));
}

TEST_F(IdxErrors, WrongMagicSaysFoundAndExpected) {
  write_idx_images(file("img"), 1, 1, 1, {1});
  write_idx_labels(file("lab"), {1});
  // Swapped files: each magic is the other's.
  EXPECT_TRUE(fails("lab", "img",
                    {file("lab"), "wrong magic 0x00000801", "expected 0x00000803", "swapped"}));
  write_idx(file("junk"), 0x12345678, {1}, {1});
  EXPECT_TRUE(
      fails("img", "junk", {file("junk"), "wrong magic 0x12345678", "expected 0x00000801"}));
}

TEST_F(IdxErrors, CountMismatchNamesBothFiles) {
  write_idx_images(file("img"), 3, 1, 1, {1, 2, 3});
  write_idx_labels(file("lab"), {1, 2});
  EXPECT_TRUE(fails("img", "lab", {file("img"), "3 images", file("lab"), "2 labels"}));
}

TEST_F(IdxErrors, ZeroDimensions) {
  write_idx_labels(file("lab"), {1});
  write_idx_images(file("img"), 1, 0, 28, {});
  EXPECT_TRUE(fails("img", "lab", {file("img"), "1 images of 0x28", "must all be positive"}));
  write_idx_images(file("img0"), 0, 28, 28, {});
  EXPECT_TRUE(fails("img0", "lab", {file("img0"), "0 images of 28x28"}));
}

TEST_F(IdxErrors, LabelOutOfRange) {
  write_idx_images(file("img"), 3, 1, 1, {1, 2, 3});
  write_idx_labels(file("lab"), {1, 10, 2});
  EXPECT_TRUE(fails("img", "lab", {file("lab"), "label 10 of sample 1", "[0, 10)"}));
}

TEST_F(IdxErrors, TrailingBytes) {
  write_idx_images(file("img"), 1, 1, 2, {1, 2, 3});
  write_idx_labels(file("lab"), {1});
  EXPECT_TRUE(fails("img", "lab", {file("img"), "1 unexpected bytes", "found 19"}));
}

TEST(IdxMnistDir, LoadsBothSplitsRawAndGzip) {
  for (bool gzip : {true, false}) {
    ScratchDir dir;
    const auto written = testing::write_mnist_dir(dir.path(), 30, 12, gzip);
    const Dataset train = load_mnist_family(dir.path(), true, "fashion-mnist");
    const Dataset test = load_mnist_family(dir.path(), false, "fashion-mnist");
    EXPECT_EQ(train.size(), 30);
    EXPECT_EQ(test.size(), 12);
    testing::expect_splits(train, test, written, "fashion-mnist");
    EXPECT_EQ(train.class_names[9], "Ankle boot");
    EXPECT_EQ(load_mnist_family(dir.path(), true, "mnist").class_names[9], "9");
  }
}

TEST(IdxMnistDir, DottedSpellingAndCatalog) {
  ScratchDir dir;
  const auto data = synthetic_images(4, 1, 28, 28);
  write_idx_images(dir.file("train-images.idx3-ubyte"), 4, 28, 28, data.images);
  write_idx_labels(dir.file("train-labels.idx1-ubyte"), data.labels);
  const Dataset ds = load_dataset("mnist", dir.path(), true);
  EXPECT_EQ(ds.name, "mnist/train");
  EXPECT_EQ(ds.images, data.images);
}

TEST(IdxMnistDir, MissingFilesAndUnknownNames) {
  ScratchDir dir;
  EXPECT_TRUE(throws_input_error([&] { load_mnist_family(dir.path(), false, "mnist"); },
                                 {dir.file("t10k-images-idx3-ubyte"), "not found"}));
  EXPECT_TRUE(throws_input_error([&] { load_dataset("imagenet", dir.path(), true); },
                                 {"imagenet", "fashion-mnist", "cifar10"}));
  EXPECT_TRUE(throws_input_error([&] { load_mnist_family(dir.path(), true, "cifar10"); },
                                 {"cifar10", "MNIST family"}));
}

TEST(IdxFashionMnist, ReadsThePackageFiles) {
  REQUIRE_FASHION_MNIST();
  const std::string dir = LOCKSTEP_FASHION_MNIST_DIR;
  EXPECT_EQ(default_data_dir("fashion-mnist"), dir);
  const Dataset train = load_dataset("fashion-mnist", "", true);
  const Dataset test = load_dataset("fashion-mnist", "", false);
  for (const Dataset* ds : {&train, &test}) {
    EXPECT_EQ(ds->channels, 1);
    EXPECT_EQ(ds->height, 28);
    EXPECT_EQ(ds->width, 28);
    EXPECT_EQ(ds->num_classes, 10);
    // Fashion-MNIST is balanced: 6000 (train) or 1000 (test) of each class.
    std::vector<int64_t> counts(10, 0);
    for (int32_t label : ds->labels) ++counts[static_cast<size_t>(label)];
    for (int64_t count : counts) EXPECT_EQ(count, ds->size() / 10);
  }
  EXPECT_EQ(train.size(), 60000);
  EXPECT_EQ(test.size(), 10000);
  // The first training and test images are both ankle boots.
  EXPECT_EQ(train.labels[0], 9);
  EXPECT_EQ(test.labels[0], 9);
  EXPECT_NE(train.fingerprint(), test.fingerprint());
  EXPECT_NE(train.fingerprint(), train.head(100).fingerprint());
  EXPECT_EQ(train.fingerprint(), load_dataset("fashion-mnist", dir, true).fingerprint());
}

}  // namespace
}  // namespace lockstep::data
