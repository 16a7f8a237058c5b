// safetensors files: the byte layout, round trips, 16-bit widening, damaged
// files, and starting a model from a file (--init-from / --init-skip) with
// one clear error per name or shape mismatch.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "app/formats/safetensors.h"
#include "app/formats/weights_io.h"
#include "nn/model_zoo.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

using testing::ScratchDir;
using testing::throws_input_error;

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A hand-made file: header JSON text, then data bytes.
void write_raw(const std::string& path, const std::string& header,
               const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes;
  bytes.reserve(8 + header.size() + data.size());
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<uint8_t>(header.size() >> (8 * i)));
  for (char c : header) bytes.push_back(static_cast<uint8_t>(c));
  bytes.insert(bytes.end(), data.begin(), data.end());
  testing::write_bytes(path, bytes);
}

TEST(Safetensors, RoundTripKeepsNamesShapesValuesMetadataAndWritesTheDocumentedLayout) {
  ScratchDir dir;
  app::SafetensorsFile f;
  f.metadata = {{"model", "mnist_net"}, {"format", "pt"}};
  f.tensors = {{"conv1.weight", {2, 1, 1, 2}, {1.5f, -2.0f, 0.25f, 3.0f}},
               {"conv1.bias", {2}, {0.0f, -1.0f}},
               {"bn.num_batches_tracked", {}, {7.0f}}};
  app::save_safetensors(dir.file("w.safetensors"), f, {"bn.num_batches_tracked"});
  const auto bytes = read_bytes(dir.file("w.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 4 * 4 + 2 * 4 + 8);
  const auto header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(n));
  EXPECT_EQ(header["conv1.weight"]["dtype"], "F32");
  EXPECT_EQ(header["conv1.weight"]["data_offsets"], nlohmann::json({0, 16}));
  EXPECT_EQ(header["bn.num_batches_tracked"]["dtype"], "I64");
  EXPECT_EQ(header["__metadata__"]["model"], "mnist_net");
  int64_t tracked = 0;
  std::memcpy(&tracked, bytes.data() + bytes.size() - 8, 8);
  EXPECT_EQ(tracked, 7);
  const auto back = app::load_safetensors(dir.file("w.safetensors"));
  EXPECT_EQ(back.metadata, f.metadata);
  ASSERT_EQ(back.tensors.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back.tensors[i].name, f.tensors[i].name);
    EXPECT_EQ(back.tensors[i].shape, f.tensors[i].shape);
    EXPECT_EQ(back.tensors[i].values, f.tensors[i].values);
  }
}

TEST(Safetensors, SixteenBitValuesWidenExactly) {
  EXPECT_EQ(app::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(app::half_to_float(0xc000), -2.0f);
  EXPECT_EQ(app::half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(app::half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(app::half_to_float(0x3555), 0.333251953125f);
  EXPECT_TRUE(std::isinf(app::half_to_float(0xfc00)) && app::half_to_float(0xfc00) < 0);
  EXPECT_TRUE(std::isnan(app::half_to_float(0x7e00)));
  EXPECT_EQ(app::bfloat16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(app::bfloat16_to_float(0xc0a0), -5.0f);
  ScratchDir dir;
  write_raw(dir.file("h.safetensors"),
            R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"BF16","shape":[1],"data_offsets":[4,6]}})",
            {0x00, 0x3c, 0x00, 0xc0, 0x80, 0x3f});
  const auto f = app::load_safetensors(dir.file("h.safetensors"));
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].values, (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(f.tensors[1].values, (std::vector<float>{1.0f}));
}

TEST(Safetensors, DamagedFilesAreOneLineErrorsNamingFileAndTensor) {
  ScratchDir dir;
  const std::string p = dir.file("bad.safetensors");
  testing::write_bytes(p, {1, 2, 3});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "not a safetensors"}));
  write_raw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", {0, 0, 0, 0});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "\"a\"", "(2)"}));
  write_raw(p, R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})",
            std::vector<uint8_t>(8));
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "\"a\"", "C64"}));
  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
            std::vector<uint8_t>(12));
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "\"a\"", "gap"}));
  write_raw(p, "{not json", {});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "JSON"}));
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(dir.file("none")); },
                                 {dir.file("none"), "cannot open"}));
}

// Inputs of tests/fuzz/regression/safetensors: counts that wrapped past 2^64
// passed the size check, and floats were converted to integers.
TEST(Safetensors, ShapesAndOffsetsAreExactIntegersWhoseCountsDoNotOverflow) {
  ScratchDir dir;
  const std::string p = dir.file("bad.safetensors");
  write_raw(p, R"({"a":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})",
            std::vector<uint8_t>(4));
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "\"a\"", "2^64"}));
  write_raw(p, R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", {});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "\"a\"", "2^64"}));
  write_raw(p, R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1e300,1]}})", {1});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); },
                                 {p, "\"a\"", "data_offsets", "non-negative integers"}));
  write_raw(p, R"({"a":{"dtype":"U8","shape":[2.5],"data_offsets":[0,2]}})", {1, 2});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); },
                                 {p, "\"a\"", "shape [2.5]", "non-negative integers"}));
  write_raw(p, R"({"__metadata__":[1]})", {});
  EXPECT_TRUE(throws_input_error([&] { app::load_safetensors(p); }, {p, "__metadata__"}));
}

std::unique_ptr<nn::Model> mnist_net(uint64_t seed) {
  auto m = nn::build_model("mnist_net", {}, {1, 28, 28}, 10, "auto");
  m->reset_parameters(seed, nn::Device::kCpu);
  return m;
}

// mnist_net's weights from seed, with a 5-class head (fc2) instead of 10.
void write_five_class_weights(const std::string& path, uint64_t seed) {
  auto m = mnist_net(seed);
  app::SafetensorsFile f = app::model_weights_file(*m, {});
  for (app::CheckpointEntry& e : f.tensors) {
    if (e.name == "fc2.weight") e.shape = {5, 50};
    if (e.name == "fc2.bias") e.shape = {5};
    e.values.resize(static_cast<size_t>(nn::shape_numel(e.shape)));
  }
  app::save_safetensors(path, f);
}

std::vector<float> values(nn::Model& m, const std::string& name) {
  for (nn::Parameter* p : m.parameters())
    if (p->name == name) return {p->value.data(), p->value.data() + p->value.numel()};
  return {};
}

TEST(InitWeights, LoadsEveryTensorOrSkipsMatchingOnes) {
  ScratchDir dir;
  auto a = mnist_net(1), b = mnist_net(2);
  app::save_model_weights(dir.file("a.safetensors"), *a, {});
  app::init_weights_from(*b, dir.file("a.safetensors"), {"fc2.*"});
  EXPECT_EQ(values(*b, "conv1.weight"), values(*a, "conv1.weight"));
  EXPECT_EQ(values(*b, "fc1.bias"), values(*a, "fc1.bias"));
  EXPECT_NE(values(*b, "fc2.weight"), values(*a, "fc2.weight")) << "skipped: kept its own";
  app::init_weights_from(*b, dir.file("a.safetensors"), {});
  EXPECT_EQ(values(*b, "fc2.weight"), values(*a, "fc2.weight"));
}

TEST(InitWeights, NameAndShapeMismatchesNameTheTensorAndBothShapesAndChangeNothing) {
  ScratchDir dir;
  auto ten = mnist_net(1);
  auto five = mnist_net(3);
  write_five_class_weights(dir.file("five.safetensors"), 3);
  const auto before = values(*ten, "conv1.weight");
  const std::string p = dir.file("five.safetensors");
  EXPECT_TRUE(throws_input_error([&] { app::init_weights_from(*ten, p, {}); },
                                 {p, "\"fc2.weight\"", "(5, 50)", "(10, 50)", "--init-skip"}));
  EXPECT_EQ(values(*ten, "conv1.weight"), before);
  EXPECT_NO_THROW(app::init_weights_from(*ten, p, {"fc2.*"}));
  EXPECT_EQ(values(*ten, "conv1.weight"), values(*five, "conv1.weight"));

  app::SafetensorsFile extra = app::model_weights_file(*ten, {});
  extra.tensors.push_back({"head.weight", {3}, {1, 2, 3}});
  app::save_safetensors(dir.file("extra.safetensors"), extra);
  EXPECT_TRUE(
      throws_input_error([&] { app::init_weights_from(*ten, dir.file("extra.safetensors"), {}); },
                         {"\"head.weight\"", "(3)", "not in this model"}));
  extra.tensors.erase(extra.tensors.begin());  // conv1.weight
  app::save_safetensors(dir.file("missing.safetensors"), extra);
  EXPECT_TRUE(throws_input_error(
      [&] { app::init_weights_from(*ten, dir.file("missing.safetensors"), {"head.*"}); },
      {"no tensor \"conv1.weight\"", "(10, 1, 5, 5)"}));
}

TEST(InitWeights, TrainStartsFromAFileAndRefusesAMismatchInOneLine) {
  ScratchDir dir;
  testing::write_mnist_dir(dir.file("data"), 32, 16);
  write_five_class_weights(dir.file("w.safetensors"), 3);
  const std::string common = "train --dataset mnist --data-dir " + dir.file("data") +
                             " --epochs 1 --batch-size 16 --threads 1 --progress none "
                             "--run-dir " +
                             dir.file("run") + " --init-from " + dir.file("w.safetensors");
  auto r = testing::run_lockstep(common);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("\"fc2.weight\" has shape (5, 50), this model expects (10, 50)"),
            std::string::npos)
      << r.output;
  r = testing::run_lockstep(common + " --init-skip 'fc2.*'");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace lockstep
