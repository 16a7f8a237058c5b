// `lockstep export --format onnx`: with libonnx-dev built in, a trained
// checkpoint becomes an ONNX file (its graph checked by onnx.checker and
// onnxruntime in test_interop.cpp); built without it, the command says what
// to install, in one line, and exits non-zero.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/checkpoint/checkpoint.h"
#include "app/formats/onnx_export.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

TEST(OnnxExport, WritesTheGraphOrSaysWhatToInstall) {
  testing::ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 32, 16);
  auto r = testing::run_lockstep(testing::mnist_train_args(
      dir.file("data"), dir.file("run"), "--epochs 1 --batch-size 16 --progress none"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = testing::newest_checkpoint(dir.file("run"));
  r = testing::run_lockstep("export --checkpoint " + ckpt + " --format onnx --out " +
                            dir.file("m.onnx"));
  if (!app::onnx_export_available()) {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("built without ONNX support; install libonnx-dev"), std::string::npos)
        << r.output;
    GTEST_SKIP() << "built without libonnx-dev: only the error was checked";
  }
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string bytes = testing::read_file(dir.file("m.onnx"));
  // Every weight is an initializer: the file holds at least the 21,840 floats.
  EXPECT_GT(bytes.size(), 21840u * 4u);
  for (const char* text : {"lockstep", "conv1.weight", "fc2.bias", "normalize_mean", "Conv", "Gemm",
                           "MaxPool", "LogSoftmax"})
    EXPECT_NE(bytes.find(text), std::string::npos) << text;
  EXPECT_EQ(bytes.find("Dropout"), std::string::npos) << "inference graph: dropout left out";
}

}  // namespace
}  // namespace lockstep
