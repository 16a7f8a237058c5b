// CIFAR-10 binary reader on small files in the real format, and bad files.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/catalog.h"
#include "data/cifar10.h"
#include "support/dataset_files.h"

namespace lockstep::data {
namespace {

using testing::ScratchDir;
using testing::throws_input_error;

TEST(CifarReader, ReadsRecordsAsChwExactly) {
  ScratchDir dir;
  std::vector<uint8_t> images(2 * 3072);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<uint8_t>(i * 7 + 3);
  testing::write_cifar10_batch(dir.file("b.bin"), images, {3, 9});
  const Dataset ds = read_cifar10_files({dir.file("b.bin")});
  EXPECT_EQ(ds.size(), 2);
  EXPECT_EQ(ds.channels, 3);
  EXPECT_EQ(ds.height, 32);
  EXPECT_EQ(ds.width, 32);
  EXPECT_EQ(ds.labels, (std::vector<int32_t>{3, 9}));
  EXPECT_EQ(ds.images, images);
  // Record 1, G plane, pixel (0, 1): byte 1 + 1024 + 1 of the record.
  EXPECT_EQ(ds.image(1)[1024 + 1], static_cast<uint8_t>((3072 + 1025) * 7 + 3));
  EXPECT_EQ(ds.class_names[1], "automobile");
  EXPECT_EQ(ds.class_names[9], "truck");
}

TEST(CifarReader, LoadsTrainAndTestSplits) {
  ScratchDir dir;
  const auto written = testing::write_cifar10_dir(dir.path(), 3, 4);
  const Dataset train = load_cifar10(dir.path(), true);
  const Dataset test = load_dataset("cifar10", dir.path(), false);
  EXPECT_EQ(train.size(), 15);
  EXPECT_EQ(test.size(), 4);
  testing::expect_splits(train, test, written, "cifar10");
}

TEST(CifarReader, FindsTheUnpackedArchiveFolder) {
  ScratchDir dir;
  testing::write_cifar10_dir(dir.file("cifar-10-batches-bin"), 1, 2);
  EXPECT_EQ(load_cifar10(dir.path(), false).size(), 2);
}

TEST(CifarErrors, FileSizeNotAMultipleOfTheRecord) {
  ScratchDir dir;
  testing::write_bytes(dir.file("test_batch.bin"), std::vector<uint8_t>(2 * 3073 + 5, 1));
  EXPECT_TRUE(throws_input_error(
      [&] { load_cifar10(dir.path(), false); },
      {dir.file("test_batch.bin"), "6151 bytes", "3073-byte", "2 whole records and 5 bytes"}));
  testing::write_bytes(dir.file("empty.bin"), {});
  EXPECT_TRUE(throws_input_error([&] { read_cifar10_files({dir.file("empty.bin")}); },
                                 {dir.file("empty.bin"), "0 bytes"}));
}

TEST(CifarErrors, LabelAboveNine) {
  ScratchDir dir;
  testing::write_cifar10_batch(dir.file("b.bin"), std::vector<uint8_t>(3 * 3072, 0), {1, 2, 10});
  EXPECT_TRUE(throws_input_error([&] { read_cifar10_files({dir.file("b.bin")}); },
                                 {dir.file("b.bin"), "label 10 of record 2", "[0, 10)"}));
}

TEST(CifarErrors, MissingBatchFile) {
  ScratchDir dir;
  testing::write_cifar10_dir(dir.path(), 1, 1);
  std::filesystem::remove(dir.file("data_batch_4.bin"));
  EXPECT_TRUE(throws_input_error([&] { load_cifar10(dir.path(), true); },
                                 {dir.file("data_batch_4.bin"), "not found"}));
  EXPECT_TRUE(throws_input_error([&] { read_cifar10_files({dir.file("data_batch_4.bin")}); },
                                 {dir.file("data_batch_4.bin"), "cannot open"}));
}

}  // namespace
}  // namespace lockstep::data
