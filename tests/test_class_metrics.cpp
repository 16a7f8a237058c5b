// Per-class evaluation against a case worked out by hand: confusion matrix,
// top-1 and top-2 accuracy (ties ranked to the lower class, as argmax),
// per-class accuracy, the CSV files and a PNG that decodes; and the files a
// training run and `lockstep evaluate --report-dir` leave.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/checkpoint/checkpoint.h"
#include "app/config/data_setup.h"
#include "app/run/class_metrics.h"
#include "data/image_io.h"
#include "distributed/communicator.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::read_file;
using testing::ScratchDir;

app::ClassMetrics hand_case() {
  // true labels 1, 1, 0, 1, 2; argmax 1, 0, 2, 0 (tie with 1), 2
  const std::vector<float> outputs = {0.1f, 0.7f, 0.2f, 0.5f, 0.3f, 0.2f, 0.2f, 0.3f,
                                      0.5f, 0.4f, 0.4f, 0.2f, 0.0f, 0.0f, 1.0f};
  const std::vector<int32_t> labels = {1, 1, 0, 1, 2};
  app::ClassMetrics m(3, 2);
  m.add(outputs.data(), labels.data(), 2);  // in two pieces, as batches come
  m.add(outputs.data() + 6, labels.data() + 2, 3);
  auto comm = distributed::make_single_communicator();
  m.reduce(*comm);
  return m;
}

TEST(ClassMetrics, AgreesWithAHandComputedCase) {
  const app::ClassMetrics m = hand_case();
  const int64_t want[3][3] = {{0, 0, 1}, {2, 1, 0}, {0, 0, 1}};
  for (int t = 0; t < 3; ++t)
    for (int p = 0; p < 3; ++p) EXPECT_EQ(m.confusion(t, p), want[t][p]) << t << "," << p;
  EXPECT_EQ(m.samples(), 5);
  EXPECT_DOUBLE_EQ(m.top1_accuracy(), 2.0 / 5.0);
  EXPECT_DOUBLE_EQ(m.top_k_accuracy(), 4.0 / 5.0);  // only sample 2 misses its top 2
  EXPECT_DOUBLE_EQ(m.class_accuracy(0), 0.0);
  EXPECT_DOUBLE_EQ(m.class_accuracy(1), 1.0 / 3.0);
  EXPECT_DOUBLE_EQ(m.class_accuracy(2), 1.0);
  EXPECT_EQ(app::ClassMetrics(3, 10).top_k(), 3) << "k is capped at the class count";
}

TEST(ClassMetrics, WritesCsvFilesAndAPngWithClassNames) {
  ScratchDir dir;
  app::write_class_reports(dir.path(), hand_case(), {"cat", "dog, big", "emu"});
  EXPECT_EQ(read_file(dir.file("confusion_matrix.csv")),
            "true\\predicted,cat,\"dog, big\",emu\n"
            "cat,0,0,1\n"
            "\"dog, big\",2,1,0\n"
            "emu,0,0,1\n");
  EXPECT_EQ(read_file(dir.file("per_class_accuracy.csv")),
            "class,name,samples,correct,accuracy\n"
            "0,cat,1,0,0.000000\n"
            "1,\"dog, big\",3,1,0.333333\n"
            "2,emu,1,1,1.000000\n");
  const data::Image png = data::load_image(dir.file("confusion_matrix.png"), 3);
  EXPECT_GT(png.width, 3 * 44);
  EXPECT_GT(png.height, 3 * 44);
}

// Top-k accuracy with k at or above the class count is 100% whatever the
// model does: a top_k set so is refused once the classes are known; the
// default is lowered for data sets of few classes.
TEST(ClassMetrics, TopKMustBeBelowTheClassCount) {
  app::TrainConfig c;
  EXPECT_EQ(app::top_k_for(c, 10), 5);
  EXPECT_EQ(app::top_k_for(c, 3), 2) << "the default, lowered";
  EXPECT_EQ(app::top_k_for(c, 2), 1);
  c.top_k = 3;
  c.origins["top_k"] = {"config file c.toml:7", true};
  EXPECT_EQ(app::top_k_for(c, 4), 3);
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::top_k_for(c, 3); },
      {"config file c.toml:7: config key top_k = 3 is not below the 3 classes of the data (top-3 "
       "accuracy would be 100%): set top_k to at most 2"}));
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 32, 16);
  const auto r = testing::run_lockstep(testing::mnist_train_args(
      dir.file("data"), dir.file("run"), "--epochs 1 --progress none --top-k 12"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("flag --top-k: config key top_k = 12 is not below the 10 classes of the "
                          "data (top-12 accuracy would be 100%): set top_k to at most 9"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run"))) << r.output;
}

TEST(ClassMetrics, TrainingAndEvaluateLeaveTheReports) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 64, 40);
  auto r = testing::run_lockstep(testing::mnist_train_args(
      dir.file("data"), dir.file("run"), "--epochs 1 --batch-size 16 --progress none --top-k 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string per_class = read_file(dir.file("run/per_class_accuracy.csv"));
  EXPECT_EQ(per_class.substr(0, 36), "class,name,samples,correct,accuracy\n");
  const std::string metrics = read_file(dir.file("run/metrics.csv"));
  EXPECT_NE(metrics.find("test_top_k_accuracy"), std::string::npos);
  r = testing::run_lockstep("evaluate --threads 1 --checkpoint " +
                            testing::newest_checkpoint(dir.file("run")) + " --report-dir " +
                            dir.file("eval"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("top-3 acc "), std::string::npos) << r.output;
  EXPECT_EQ(read_file(dir.file("eval/per_class_accuracy.csv")), per_class);
  EXPECT_EQ(read_file(dir.file("eval/confusion_matrix.csv")),
            read_file(dir.file("run/confusion_matrix.csv")));
  // evaluate's --top-k meets the class count too.
  const auto ten = testing::run_lockstep("evaluate --threads 1 --top-k 10 --checkpoint " +
                                         testing::newest_checkpoint(dir.file("run")));
  EXPECT_NE(ten.exit_code, 0);
  EXPECT_NE(ten.output.find("flag --top-k: config key top_k = 10 is not below the 10 classes"),
            std::string::npos)
      << ten.output;
  // 40 test samples, each counted once.
  int64_t total = 0;
  for (const auto& row : testing::read_csv(dir.file("run/per_class_accuracy.csv"))) {
    total += std::stoll(row.at("samples"));
  }
  EXPECT_EQ(total, 40);
}

}  // namespace
}  // namespace lockstep
