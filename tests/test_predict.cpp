// `lockstep predict`: a checkpoint trained for one epoch classifies its
// exported test images exactly as `lockstep evaluate` scores them (top-1 of
// every image is the model's argmax; same accuracy), for a model trained on
// IDX files and one trained on the exported image folder; CSV output; images
// of other sizes and colours; errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "app/checkpoint/checkpoint.h"
#include "app/commands/predict.h"
#include "app/config/config.h"
#include "app/run/trainer.h"
#include "data/batch_loader.h"
#include "data/catalog.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "distributed/communicator.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::newest_checkpoint;
using testing::run_lockstep;
using testing::ScratchDir;

std::vector<std::vector<std::string>> read_csv(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, ',')) fields.push_back(field);
    rows.push_back(fields);
  }
  return rows;
}

// "test loss 0.1234 acc 87.00% (100 samples" -> 0.87
double evaluated_accuracy(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"(acc ([0-9.]+)% \((\d+) samples)"))) return -1;
  return std::stod(m[1]) / 100.0;
}

std::string train_one_epoch(const std::string& data_args, const std::string& run_dir) {
  const auto r = run_lockstep("train " + data_args +
                              " --epochs 1 --lr 0.05 --batch-size 16 --threads 2"
                              " --progress none --run-dir " +
                              run_dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return newest_checkpoint(run_dir);
}

// The checkpoint's model, restored by the trainer (the path evaluate takes),
// applied to dataset in order: its argmax per sample.
std::vector<int64_t> trainer_argmax(const std::string& checkpoint, const data::Dataset& dataset) {
  const auto ckpt = app::load_checkpoint(checkpoint);
  app::TrainConfig config = app::train_config_from_json(ckpt.meta.at("config"), checkpoint);
  config.resume = checkpoint;
  config.run_dir.clear();
  config.progress = "none";
  auto comm = distributed::make_single_communicator();
  app::Trainer trainer(config, *comm);
  std::vector<int64_t> ids(static_cast<size_t>(dataset.size()));
  std::iota(ids.begin(), ids.end(), 0);
  const data::PixelTransform transform(dataset.channels,
                                       data::default_normalization(config.dataset));
  data::Batch batch;
  data::fill_batch(dataset, ids, transform, 0, 0, batch);
  const nn::Tensor& out = trainer.model().forward(*nn::make_cpu_backend(1), batch.images, {});
  std::vector<int64_t> argmax;
  const int64_t classes = out.dim(1);
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const float* row = out.data() + i * classes;
    argmax.push_back(std::max_element(row, row + classes) - row);
  }
  return argmax;
}

// Predicts every image of folder/test through the command; checks the CSV
// against the true classes (parent folder names) and the trainer's argmax;
// returns the accuracy.
double predict_exported(const std::string& checkpoint, const std::string& folder,
                        const std::string& csv) {
  const auto r = run_lockstep("predict --checkpoint " + checkpoint + " " + folder +
                              "/test --top-k 3 --threads 2 --csv " + csv);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const auto rows = read_csv(csv);
  EXPECT_EQ(rows.at(0),
            (std::vector<std::string>{"path", "top1", "prob1", "top2", "prob2", "top3", "prob3"}));
  const auto test = data::load_image_folder(folder, false).dataset;
  const auto argmax = trainer_argmax(checkpoint, test);
  EXPECT_EQ(rows.size(), static_cast<size_t>(test.size()) + 1);
  int64_t correct = 0;
  // Files are listed in the folder loader's order: class by class, sorted.
  for (size_t i = 1; i < rows.size(); ++i) {
    const auto& row = rows[i];
    EXPECT_EQ(row.size(), 7u);
    const std::string truth = fs::path(row[0]).parent_path().filename().string();
    const std::string& top1 = row[1];
    EXPECT_EQ(top1, test.class_names[static_cast<size_t>(argmax[i - 1])]) << row[0];
    EXPECT_EQ(truth, test.class_names[static_cast<size_t>(test.labels[i - 1])]) << row[0];
    correct += top1 == truth;
    const double p1 = std::stod(row[2]), p2 = std::stod(row[4]), p3 = std::stod(row[6]);
    EXPECT_GE(p1, p2);
    EXPECT_GE(p2, p3);
    EXPECT_LE(p1 + p2 + p3, 1.0 + 1e-5);
  }
  // The printed lines name each file with its classes.
  EXPECT_NE(r.output.find(rows.at(1).at(0) + ": " + rows.at(1).at(1) + " "), std::string::npos)
      << r.output;
  return static_cast<double>(correct) / static_cast<double>(test.size());
}

TEST(PredictE2E, AgreesWithEvaluateOnExportedTestImagesOfAnIdxModel) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("idx"), 400, 100);
  const std::string ckpt =
      train_one_epoch("--dataset mnist --data-dir " + dir.file("idx"), dir.file("run"));
  ASSERT_FALSE(ckpt.empty());
  const auto e = run_lockstep("evaluate --threads 2 --checkpoint " + ckpt);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const double evaluated = evaluated_accuracy(e.output);
  ASSERT_GE(evaluated, 0.0) << e.output;
  const auto x = run_lockstep("data export --dataset mnist --data-dir " + dir.file("idx") +
                              " --out " + dir.file("images"));
  ASSERT_EQ(x.exit_code, 0) << x.output;
  const double predicted = predict_exported(ckpt, dir.file("images"), dir.file("p.csv"));
  EXPECT_NEAR(predicted, evaluated, 1e-9) << e.output;
  EXPECT_GT(predicted, 0.3) << "one epoch on separable synthetic data beats chance (0.1)";
}

TEST(PredictE2E, AgreesWithEvaluateForAModelTrainedOnTheImageFolder) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("idx"), 400, 100);
  ASSERT_EQ(run_lockstep("data export --dataset mnist --data-dir " + dir.file("idx") + " --out " +
                         dir.file("images"))
                .exit_code,
            0);
  const std::string ckpt =
      train_one_epoch("--dataset folder --data-dir " + dir.file("images"), dir.file("run"));
  ASSERT_FALSE(ckpt.empty());
  const auto meta = app::load_checkpoint(ckpt).meta;
  EXPECT_EQ(meta.at("dataset"), "folder");
  EXPECT_EQ(meta.at("input_shape"), nlohmann::json({1, 28, 28}));
  const auto e = run_lockstep("evaluate --threads 2 --checkpoint " + ckpt);
  ASSERT_EQ(e.exit_code, 0) << e.output;
  EXPECT_NE(e.output.find("100 samples of folder"), std::string::npos) << e.output;
  const double predicted = predict_exported(ckpt, dir.file("images"), dir.file("p.csv"));
  EXPECT_NEAR(predicted, evaluated_accuracy(e.output), 1e-9) << e.output;

  // Other sizes and colours are converted like the training data: a colour
  // 56x56 copy of a test image gets the same top class as the image.
  const std::string first = app::expand_image_inputs({dir.file("images/test")}).front();
  const data::Image gray = data::load_image(first, 1);
  data::Image colour{28, 28, 3, {}};
  for (uint8_t v : gray.pixels) colour.pixels.insert(colour.pixels.end(), {v, v, v});
  testing::write_bytes(dir.file("big.png"), data::encode_png(data::resize_image(colour, 56, 56)));
  app::Predictor predictor(ckpt, 2);
  const auto p = predictor.predict({first, dir.file("big.png")}, 10);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].classes.size(), 10u);
  double sum = 0.0;
  for (double q : p[0].probabilities) sum += q;
  EXPECT_NEAR(sum, 1.0, 1e-6);
  EXPECT_EQ(p[1].classes[0], p[0].classes[0]);
}

TEST(PredictErrors, AreNamed) {
  ScratchDir dir;
  auto r = run_lockstep("predict --checkpoint " + dir.file("none.lsck") + " " + dir.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("folder has no images"), std::string::npos) << r.output;
  testing::write_bytes(dir.file("x.png"), {'n', 'o', 'p', 'e'});
  r = run_lockstep("predict --checkpoint " + dir.file("none.lsck") + " " + dir.file("x.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("none.lsck"), std::string::npos) << r.output;
  r = run_lockstep("predict --checkpoint " + dir.file("none.lsck") + " " + dir.file("nothing.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("nothing.png: no such image file or folder"), std::string::npos)
      << r.output;
  // An output that cannot be written is found before any inference.
  r = run_lockstep("predict --checkpoint " + dir.file("none.lsck") + " " + dir.file("x.png") +
                   " --csv " + dir.file("gone/p.csv"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("predict: --csv " + dir.file("gone/p.csv") + ": folder " +
                          dir.file("gone") + " does not exist"),
            std::string::npos)
      << r.output;
}

TEST(PredictErrors, UnreadableImageIsNamed) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("idx"), 100, 20);
  const std::string ckpt =
      train_one_epoch("--dataset mnist --data-dir " + dir.file("idx"), dir.file("run"));
  testing::write_bytes(dir.file("x.png"), {'n', 'o', 'p', 'e'});
  const auto r = run_lockstep("predict --checkpoint " + ckpt + " " + dir.file("x.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("x.png: not a PNG, JPEG or BMP image"), std::string::npos) << r.output;
  // A checkpoint that names no classes: refused, not read out of range.
  app::Checkpoint c = app::load_checkpoint(ckpt);
  c.meta["class_names"] = nlohmann::json::array();
  const std::string no_classes = dir.file("no_classes.lsck");
  app::save_checkpoint(no_classes, c);
  data::Image gray{28, 28, 1, std::vector<uint8_t>(28 * 28, 128)};
  testing::write_bytes(dir.file("y.png"), data::encode_png(gray));
  const auto e = run_lockstep("predict --checkpoint " + no_classes + " " + dir.file("y.png"));
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.output.find(no_classes + ": checkpoint names no classes"), std::string::npos)
      << e.output;
}

// --top-k above the model's classes is refused, naming both; up to them it
// lists that many; without it, 3.
TEST(PredictErrors, TopKAboveTheClassCountIsRefused) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("idx"), 100, 20);
  const std::string ckpt =
      train_one_epoch("--dataset mnist --data-dir " + dir.file("idx"), dir.file("run"));
  data::Image gray{28, 28, 1, std::vector<uint8_t>(28 * 28, 128)};
  testing::write_bytes(dir.file("y.png"), data::encode_png(gray));
  const std::string predict = "predict --checkpoint " + ckpt + " " + dir.file("y.png");
  const auto over = run_lockstep(predict + " --top-k 11");
  EXPECT_EQ(over.exit_code, 1) << over.output;
  EXPECT_NE(
      over.output.find("predict: --top-k 11 is more than the 10 classes of the model in " + ckpt),
      std::string::npos)
      << over.output;
  const auto zero = run_lockstep(predict + " --top-k 0");
  EXPECT_EQ(zero.exit_code, 1) << zero.output;
  EXPECT_NE(zero.output.find("predict: --top-k must be >= 1, got 0"), std::string::npos)
      << zero.output;
  // " | " separates the classes of an image's line.
  const auto count_classes = [](const std::string& output) {
    size_t n = 1;
    for (size_t at = output.find(" | "); at != std::string::npos; at = output.find(" | ", at + 1)) {
      ++n;
    }
    return n;
  };
  const auto all = run_lockstep(predict + " --top-k 10");
  EXPECT_EQ(all.exit_code, 0) << all.output;
  EXPECT_EQ(count_classes(all.output), 10u) << all.output;
  const auto default_k = run_lockstep(predict);
  EXPECT_EQ(default_k.exit_code, 0) << default_k.output;
  EXPECT_EQ(count_classes(default_k.output), 3u) << default_k.output;
}

}  // namespace
}  // namespace lockstep
