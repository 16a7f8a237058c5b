// `lockstep data` (app/commands/data_show.h): a dataset exported as an image folder
// (class folders in label order) reads back as the same samples and the same
// batches as the IDX data; `data show` draws the contact sheet of what
// training sees, augmentation included, and names bad arguments.
#include <gtest/gtest.h>
#include <zlib.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <utility>

#include "app/commands/data_show.h"
#include "common/error.h"
#include "data/batch_loader.h"
#include "data/catalog.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "data/sampler.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using data::Image;
using testing::ScratchDir;
using testing::throws_input_error;

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
    const auto expected = idx_set.select(data::export_order(idx_set));
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
  REQUIRE_FASHION_MNIST();
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
  const auto expected = idx.select(data::export_order(idx, 30));
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

TEST(DataShowSheet, RefusesZoomsAndCountsPastItsBound) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.path(), 20, 10);
  const auto d = data::load_dataset("mnist", dir.path(), true);
  // 28 * 2^62 wraps to 0 in int64: refused before any product
  for (const auto& [per_class, zoom] : {std::pair<int64_t, int64_t>{1, int64_t{1} << 62},
                                        {int64_t{1} << 62, 1},
                                        {1, 4097},
                                        {0, 1}}) {
    app::SheetOptions o;
    o.per_class = per_class;
    o.zoom = zoom;
    try {
      app::contact_sheet(d, o);
      ADD_FAILURE() << per_class << " per class, zoom " << zoom << " accepted";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("per_class and zoom must be 1 to 4096"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(DataShowSheet, ASheetTooLargeIsRefusedBeforeAnyAllocation) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("idx"), 20, 20);
  const auto r = testing::run_lockstep("data show --dataset mnist --data-dir " + dir.file("idx") +
                                       " --per-class 4096 --zoom 4096 --out " + dir.file("s.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("sheet is too large; lower --per-class or --zoom"), std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("s.png")));
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
