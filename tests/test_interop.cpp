// Weights and graphs that leave lockstep, read by the tools people use:
// lockstep's safetensors load into the matching PyTorch module (strict) and
// give lockstep predict's outputs; its ONNX file passes onnx.checker's full
// check and onnxruntime gives the same outputs; weights PyTorch saved load
// into lockstep (F16 and BF16 too) and give PyTorch's outputs. The Python
// side is tests/interop/lockstep_interop.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/checkpoint/checkpoint.h"
#include "app/formats/safetensors.h"
#include "app/formats/weights_io.h"
#include "data/catalog.h"
#include "data/image_io.h"
#include "data/transform.h"
#include "nn/model_zoo.h"
#include "support/dataset_files.h"
#include "support/interop_util.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::newest_checkpoint;
using testing::run_interop;
using testing::run_lockstep;
using testing::ScratchDir;

struct Case {
  std::string model, dataset;
  nn::Shape shape;  // (C, H, W)
};

const Case kMnist{"mnist_net", "mnist", {1, 28, 28}};
const Case kAlexnet{"alexnet_cifar", "cifar10", {3, 32, 32}};
const Case kResnet20{"resnet20", "cifar10", {3, 32, 32}};
constexpr int64_t kImages = 6;

// Writes the data set, returns its test images.
testing::SyntheticImages write_data(const Case& c, const std::string& dir) {
  if (c.dataset == "mnist") return testing::write_mnist_dir(dir, 64, kImages).test;
  return testing::write_cifar10_dir(dir, 8, kImages).test;
}

// The first kImages test images as PNG files (img000.png, ...) and as raw
// (n, C, H, W) bytes for the Python side.
void write_inputs(const testing::SyntheticImages& images, const std::string& dir) {
  std::filesystem::create_directories(dir + "/img");
  const int64_t pixels = images.channels * images.height * images.width;
  for (int64_t i = 0; i < kImages; ++i) {
    const data::Image image = data::from_planar(images.images.data() + i * pixels, images.channels,
                                                images.height, images.width);
    char name[32];
    std::snprintf(name, sizeof(name), "/img/img%03lld.png", static_cast<long long>(i));
    testing::write_bytes(dir + name, data::encode_png(image));
  }
  testing::write_bytes(
      dir + "/pixels.u8",
      std::vector<uint8_t>(images.images.begin(), images.images.begin() + kImages * pixels));
}

void expect_same_tensors(const std::string& a, const std::string& b) {
  const auto fa = app::load_safetensors(a), fb = app::load_safetensors(b);
  ASSERT_EQ(fa.tensors.size(), fb.tensors.size());
  for (size_t i = 0; i < fa.tensors.size(); ++i) {
    EXPECT_EQ(fa.tensors[i].name, fb.tensors[i].name);
    EXPECT_EQ(fa.tensors[i].shape, fb.tensors[i].shape);
    EXPECT_EQ(fa.tensors[i].values, fb.tensors[i].values) << fa.tensors[i].name;
  }
}

void lockstep_to_pytorch(const Case& c) {
  LOCKSTEP_REQUIRE_INTEROP_PYTHON();
  ScratchDir dir;
  const auto test = write_data(c, dir.file("data"));
  write_inputs(test, dir.path());
  const std::string run = dir.file("run");
  auto r = run_lockstep("train --model " + c.model + " --dataset " + c.dataset + " --data-dir " +
                        dir.file("data") +
                        " --epochs 1 --lr 0.01 --batch-size 16 --threads 2 --progress none "
                        "--run-dir " +
                        run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ckpt = newest_checkpoint(run);
  ASSERT_FALSE(ckpt.empty());
  for (const char* format : {"safetensors", "onnx"}) {
    r = run_lockstep("export --checkpoint " + ckpt + " --format " + format + " --out " +
                     dir.file(std::string("model.") + format));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  // The file training wrote at its end holds the same weights.
  expect_same_tensors(run + "/model.safetensors", dir.file("model.safetensors"));
  r = run_lockstep("predict --threads 2 --checkpoint " + ckpt + " " + dir.file("img") +
                   " --outputs-csv " + dir.file("outputs.csv"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_interop("check-export --model " + c.model + " --weights " +
                  dir.file("model.safetensors") + " --onnx " + dir.file("model.onnx") +
                  " --pixels " + dir.file("pixels.u8") + " --count " + std::to_string(kImages) +
                  " --outputs " + dir.file("outputs.csv"));
  std::printf("%s", r.output.c_str());  // the differences found, for the log
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("PASS"), std::string::npos) << r.output;
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

// lockstep's outputs with the weights of file on the test images.
std::vector<float> lockstep_outputs(const Case& c, const std::string& file,
                                    const testing::SyntheticImages& images) {
  auto model = nn::build_model(c.model, {}, c.shape, 10, "auto");
  model->reset_parameters(7, nn::Device::kCpu);
  app::init_weights_from(*model, file, {});
  const int64_t pixels = nn::shape_numel(c.shape);
  nn::Tensor x({kImages, c.shape[0], c.shape[1], c.shape[2]});
  const data::PixelTransform transform(c.shape[0], data::default_normalization(c.dataset));
  for (int64_t i = 0; i < kImages; ++i) {
    transform.apply(images.images.data() + i * pixels, c.shape[1], c.shape[2], data::CropFlip{},
                    x.data() + i * pixels);
  }
  const nn::Tensor& y = model->forward(*nn::make_cpu_backend(2), x, {});
  return std::vector<float>(y.data(), y.data() + y.numel());
}

void pytorch_to_lockstep(const Case& c) {
  LOCKSTEP_REQUIRE_INTEROP_PYTHON();
  ScratchDir dir;
  const auto test = write_data(c, dir.file("data"));
  write_inputs(test, dir.path());
  const auto norm = data::default_normalization(c.dataset);
  const auto r = run_interop("make-weights --model " + c.model + " --pixels " +
                             dir.file("pixels.u8") + " --count " + std::to_string(kImages) +
                             " --mean '" + nlohmann::json(norm.mean).dump() + "' --std '" +
                             nlohmann::json(norm.stddev).dump() + "' --out-dir " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<float> want = read_floats(dir.file("pt_outputs.f32"));
  const std::vector<float> got = lockstep_outputs(c, dir.file("pt.safetensors"), test);
  ASSERT_EQ(got.size(), want.size());
  float scale = 0.0f;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * scale) << i;
  // 16-bit files widen to exactly PyTorch's float32 values.
  for (const char* tag : {"f16", "bf16"}) {
    expect_same_tensors(dir.file(std::string("pt_") + tag + ".safetensors"),
                        dir.file(std::string("pt_") + tag + "_as_f32.safetensors"));
  }
}

TEST(Interop, MnistNetSafetensorsAndOnnxFromLockstepMatchPyTorchAndOnnxruntime) {
  lockstep_to_pytorch(kMnist);
}

TEST(Interop, AlexnetCifarSafetensorsAndOnnxFromLockstepMatchPyTorchAndOnnxruntime) {
  lockstep_to_pytorch(kAlexnet);
}

TEST(Interop, MnistNetWeightsSavedByPyTorchGivePyTorchsOutputsInLockstep) {
  pytorch_to_lockstep(kMnist);
}

TEST(Interop, AlexnetCifarWeightsSavedByPyTorchGivePyTorchsOutputsInLockstep) {
  pytorch_to_lockstep(kAlexnet);
}

TEST(Interop, Resnet20SafetensorsAndOnnxFromLockstepMatchPyTorchAndOnnxruntime) {
  lockstep_to_pytorch(kResnet20);
}

TEST(Interop, Resnet20WeightsSavedByPyTorchGivePyTorchsOutputsInLockstep) {
  pytorch_to_lockstep(kResnet20);
}

}  // namespace
}  // namespace lockstep
