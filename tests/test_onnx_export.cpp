// `lockstep export --format onnx`: with libonnx-dev built in, a trained
// checkpoint becomes an ONNX file (its graph checked by onnx.checker and
// onnxruntime in test_interop.cpp); built without it, the command says what
// to install, in one line, and exits non-zero.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/trained_model.h"
#include "app/formats/onnx_export.h"
#include "common/error.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

// A checkpoint of mnist_net after one epoch on 32 small images, in dir
// ("" when training failed, which the caller's check then shows).
std::string trained_checkpoint(const testing::ScratchDir& dir) {
  testing::write_mnist_dir(dir.file("data"), 32, 16);
  const auto r = testing::run_lockstep(testing::mnist_train_args(
      dir.file("data"), dir.file("run"), "--epochs 1 --batch-size 16 --progress none"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? testing::newest_checkpoint(dir.file("run")) : "";
}

TEST(OnnxExport, WritesTheGraphOrSaysWhatToInstall) {
  testing::ScratchDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  ASSERT_FALSE(ckpt.empty());
  auto r = testing::run_lockstep("export --checkpoint " + ckpt + " --format onnx --out " +
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

// --format defaults to --out's extension, and a disagreement between the
// two is refused; the checkpoint itself is never the output.
TEST(ModelExport, TheFormatFollowsTheExtension) {
  testing::ScratchDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  ASSERT_FALSE(ckpt.empty());
  auto r =
      testing::run_lockstep("export --checkpoint " + ckpt + " --out " + dir.file("w.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("written as safetensors"), std::string::npos) << r.output;
  r = testing::run_lockstep("export --checkpoint " + ckpt + " --format safetensors --out " +
                            dir.file("m.onnx"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("export: --out " + dir.file("m.onnx") +
                          " ends in .onnx but --format is safetensors"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("m.onnx")));
  r = testing::run_lockstep("export --checkpoint " + ckpt + " --out " + ckpt);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("is the checkpoint itself"), std::string::npos) << r.output;
  if (app::onnx_export_available()) {
    r = testing::run_lockstep("export --checkpoint " + ckpt + " --out " + dir.file("m.onnx"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("written as onnx"), std::string::npos) << r.output;
  }
}

// A checkpoint whose metadata was edited by hand: errors name the file and
// the key, and no input shape can overflow the sizes computed from it.
TEST(ModelExport, BadCheckpointMetadataIsNamed) {
  testing::ScratchDir dir;
  const std::string ckpt = trained_checkpoint(dir);
  ASSERT_FALSE(ckpt.empty());
  const app::Checkpoint good = app::load_checkpoint(ckpt);
  const auto edited = [&](const char* key, const nlohmann::json& value) {
    app::Checkpoint c = good;
    c.meta[key] = value;
    const std::string path = dir.file(std::string("edited_") + key + ".lsck");
    app::save_checkpoint(path, c);
    try {
      app::load_trained_model(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const int64_t huge = int64_t{1} << 32;
  std::string what = edited("input_shape", {1, huge, huge});
  EXPECT_EQ(what.rfind(dir.file("edited_input_shape.lsck") + ": input_shape (1, 4294967296, "
                                                             "4294967296) is larger than 16384",
                       0),
            0u)
      << what;
  what = edited("epoch", "x");
  EXPECT_EQ(what.rfind(dir.file("edited_epoch.lsck") + ":", 0), 0u) << what;
  EXPECT_NE(what.find("epoch"), std::string::npos) << what;
}

}  // namespace
}  // namespace lockstep
