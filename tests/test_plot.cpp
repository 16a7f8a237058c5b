// `lockstep plot`: metrics.csv files become a PNG of the requested size
// that a decoder reads; resumed runs count an epoch's last row; a folder
// without metrics is a one-line error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/commands/plot_command.h"
#include "data/image_io.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::ScratchDir;

const char* kHeader =
    "epoch,lr,train_loss,train_accuracy,train_samples,test_loss,test_accuracy,test_samples,"
    "seconds,images_per_second,compute_s,comm_wait_s,data_s,eval_s,checkpoint_s\n";

void write_run(const std::string& dir, double scale) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/metrics.csv");
  out << kHeader;
  for (int e = 1; e <= 4; ++e) {
    out << e << ",0.01," << scale / e << "," << 1 - 0.5 / e << ",100,"
        << (e == 2 ? std::string("nan") : std::to_string(scale * 1.1 / e)) << ","
        << (e == 2 ? std::string("nan") : std::to_string(1 - 0.6 / e)) << ",50,1,100,1,0,0,0,0\n";
  }
  out << "4,0.01,0.123,0.9,100,0.2,0.8,50,1,100,1,0,0,0,0\n";  // epoch 4 again (resumed)
}

// A run with a validation split: metrics.csv as the trainer writes it.
void write_validated_run(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::ofstream out(dir + "/metrics.csv");
  out << "epoch,lr,train_loss,train_accuracy,train_samples,test_loss,test_accuracy,"
         "test_samples,seconds,images_per_second,compute_s,comm_wait_s,data_s,eval_s,"
         "checkpoint_s,test_top_k_accuracy,val_loss,val_accuracy,precision,kernels\n";
  for (int e = 1; e <= 3; ++e) {
    out << e << ",0.01," << 2.0 / e << ",0.5,100," << 2.2 / e << ",0.4,50,1,100,1,0,0,0,0,0.9,"
        << 2.1 / e << "," << 0.1 * e << ",fp32,avx2\n";
  }
}

TEST(Plot, ReadsTheLastRowOfEachEpoch) {
  ScratchDir dir;
  write_run(dir.file("a"), 2.0);
  const auto points = app::read_curve(dir.file("a/metrics.csv"));
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[3].train_loss, 0.123);
  EXPECT_TRUE(std::isnan(points[1].test_loss));
  EXPECT_DOUBLE_EQ(points[0].train_loss, 2.0);
}

TEST(Plot, WritesAPngOfTheRequestedSize) {
  ScratchDir dir;
  write_run(dir.file("runs/a"), 2.0);
  write_run(dir.file("runs/b"), 1.5);
  const auto r =
      testing::run_lockstep("plot " + dir.file("runs/a") + " " + dir.file("runs/b") + " --out " +
                            dir.file("curves.png") + " --width 640 --height 360");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const data::Image image = data::load_image(dir.file("curves.png"), 3);
  EXPECT_EQ(image.width, 640);
  EXPECT_EQ(image.height, 360);
  size_t distinct = 0;  // something was drawn: not one flat colour
  for (size_t i = 3; i < image.pixels.size(); i += 3)
    distinct += image.pixels[i] != image.pixels[0];
  EXPECT_GT(distinct, 1000u);
}

TEST(Plot, DrawsValidationCurvesForRunsThatHaveThem) {
  ScratchDir dir;
  write_validated_run(dir.file("runs/val"));
  write_run(dir.file("runs/plain"), 2.0);
  const auto points = app::read_curve(dir.file("runs/val/metrics.csv"));
  ASSERT_EQ(points.size(), 3u);
  EXPECT_DOUBLE_EQ(points[1].val_loss, 1.05);
  EXPECT_DOUBLE_EQ(points[2].val_accuracy, 0.3);
  EXPECT_TRUE(std::isnan(app::read_curve(dir.file("runs/plain/metrics.csv"))[0].val_loss));
  // gnuplot through a wrapper that keeps the script it was given.
  const std::string wrapper = dir.file("gnuplot.sh");
  std::ofstream(wrapper) << "#!/bin/sh\ncp \"$1\" " << dir.file("kept.gp")
                         << " && gnuplot \"$1\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  const auto r =
      testing::run_lockstep("plot " + dir.file("runs/val") + " " + dir.file("runs/plain") +
                            " --out " + dir.file("c.png") + " --gnuplot " + wrapper);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::stringstream script;
  script << std::ifstream(dir.file("kept.gp")).rdbuf();
  const std::string text = script.str();
  size_t drawn = 0;  // loss and accuracy panels
  for (size_t at = 0; (at = text.find("'val validation'", at)) != std::string::npos; ++at) ++drawn;
  EXPECT_EQ(drawn, 2u) << text;
  EXPECT_EQ(text.find("plain validation"), std::string::npos) << text;
  EXPECT_NE(text.find("'plain test'"), std::string::npos) << text;
}

// Run names go into gnuplot as they are ("bob's run_a": no broken quote, no
// subscript); a failing gnuplot leaves the previous PNG as it was and says
// its first line; the temporary folder goes either way.
TEST(Plot, QuotesRunNamesAndKeepsTheOldPngWhenGnuplotFails) {
  ScratchDir dir;
  write_run(dir.file("bob's run_a"), 2.0);
  const std::string wrapper = dir.file("gnuplot.sh");
  std::ofstream(wrapper) << "#!/bin/sh\ncp \"$1\" " << dir.file("kept.gp")
                         << " && dirname \"$1\" > " << dir.file("tmp.txt")
                         << " && gnuplot \"$1\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  std::string run = "'";  // the shell's quoting of the folder's name
  run += dir.file("bob'\\''s run_a");
  run += "'";
  auto r = testing::run_lockstep("plot " + run + " --out " + dir.file("c.png") + " --gnuplot " +
                                 wrapper);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::stringstream script;
  script << std::ifstream(dir.file("kept.gp")).rdbuf();
  EXPECT_NE(script.str().find("title 'bob''s run_a train'"), std::string::npos) << script.str();
  EXPECT_NE(script.str().find("noenhanced"), std::string::npos) << script.str();
  std::string tmp;
  std::getline(std::ifstream(dir.file("tmp.txt")), tmp);
  EXPECT_FALSE(tmp.empty());
  EXPECT_FALSE(std::filesystem::exists(tmp)) << tmp << " was left behind";

  const std::string old_png = testing::read_file(dir.file("c.png"));
  ASSERT_GT(old_png.size(), 1000u);
  const std::string failing = dir.file("failing.sh");
  std::ofstream(failing) << "#!/bin/sh\ndirname \"$1\" > " << dir.file("tmp.txt")
                         << "\necho 'first complaint'\necho 'second'\nexit 1\n";
  std::filesystem::permissions(failing, std::filesystem::perms::owner_all);
  r = testing::run_lockstep("plot " + run + " --out " + dir.file("c.png") + " --gnuplot " +
                            failing);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("failed writing " + dir.file("c.png") + ": first complaint\n"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("second"), std::string::npos) << r.output;
  EXPECT_EQ(testing::read_file(dir.file("c.png")), old_png) << "the old PNG was touched";
  std::getline(std::ifstream(dir.file("tmp.txt")), tmp);
  EXPECT_FALSE(std::filesystem::exists(tmp)) << tmp << " was left behind";
}

TEST(Plot, AFolderWithoutMetricsIsAOneLineError) {
  ScratchDir dir;
  const auto r = testing::run_lockstep("plot " + dir.path() + " --out " + dir.file("x.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find(dir.path() + "/metrics.csv: cannot read metrics"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace lockstep
