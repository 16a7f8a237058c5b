// The model tree: residual blocks against central differences, the zoo's
// ResNets (parameter counts of the papers, PyTorch's names), gradients
// announced last first, the tree in the summary, and the layer-list syntax.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "common/error.h"
#include "nn/layer_spec.h"
#include "nn/model_zoo.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

using testing::check_layer_gradients;
using testing::fill_random;

std::unique_ptr<Layer> block(const std::string& text, const Shape& in) {
  auto layer = make_layer(parse_spec(text), text, in);
  layer->set_name("layer1.0");
  layer->reset_parameters(3, Device::kCpu);
  return layer;
}

TEST(ResidualBlock, GradientsMatchCentralDifferencesForEveryShortcut) {
  for (const char* text : {"basic_block out=3", "basic_block out=4 stride=2 shortcut=pad",
                           "basic_block out=4 stride=2 shortcut=conv"}) {
    SCOPED_TRACE(text);
    auto layer = block(text, {2, 3, 4, 4});
    Tensor x({2, 3, 4, 4});
    fill_random(x, 17);
    check_layer_gradients(*layer, x, {.training = true}, {.step = 1e-3f, .tolerance = 3e-2});
  }
}

TEST(ResidualBlock, NamesFollowPyTorch) {
  auto layer = block("basic_block out=8 stride=2 shortcut=conv", {1, 4, 8, 8});
  std::vector<std::string> names;
  for (Parameter* p : layer->parameters()) names.push_back(p->name);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "layer1.0.conv1.weight", "layer1.0.bn1.weight", "layer1.0.bn1.bias",
                       "layer1.0.conv2.weight", "layer1.0.bn2.weight", "layer1.0.bn2.bias",
                       "layer1.0.shortcut.0.weight", "layer1.0.shortcut.1.weight",
                       "layer1.0.shortcut.1.bias"}));
  std::vector<std::string> buffers;
  for (Buffer* b : layer->buffers()) buffers.push_back(b->name);
  EXPECT_EQ(buffers.size(), 9u);
  EXPECT_EQ(buffers[1], "layer1.0.bn1.running_var");
  EXPECT_EQ(buffers[8], "layer1.0.shortcut.1.num_batches_tracked");
}

TEST(ResidualBlock, PaddingShortcutCopiesEveryOtherPixelBetweenZeroChannels) {
  // With the main path's weights zero, y = relu(shortcut(x)).
  auto layer = block("basic_block out=4 stride=2 shortcut=pad", {1, 2, 2, 2});
  for (Parameter* p : layer->parameters()) p->value.zero();
  Tensor x({1, 2, 2, 2}), y({1, 4, 1, 1});
  for (int64_t i = 0; i < 8; ++i) x.data()[i] = static_cast<float>(i + 1);
  auto backend = testing::test_cpu_backend(1);
  layer->forward(*backend, x, y, {.training = true});
  EXPECT_EQ(std::vector<float>(y.data(), y.data() + 4), (std::vector<float>{0, 1, 5, 0}));
}

TEST(ResNetZoo, ParameterCountsMatchThePapers) {
  const std::map<std::string, int64_t> expected = {
      {"resnet20", 269722}, {"resnet32", 464154},   {"resnet44", 658586},
      {"resnet56", 853018}, {"resnet110", 1727962}, {"resnet18_cifar", 11173962}};
  for (const auto& [name, count] : expected) {
    auto model = build_model(name, {}, {3, 32, 32}, 10);
    model->reset_parameters(1, Device::kCpu);
    EXPECT_EQ(model->parameter_count(), count) << name;
  }
}

TEST(ResNetZoo, ChannelsImageSizeAndClassesComeFromTheDataSet) {
  auto model = build_model("resnet20", {}, {1, 28, 28}, 7);
  model->reset_parameters(1, Device::kCpu);
  EXPECT_EQ(model->output_size(), 7);
  EXPECT_EQ(model->parameters().front()->value.shape(), (Shape{16, 1, 3, 3}));
}

TEST(ResNetZoo, NamesFollowPyTorchStateDicts) {
  auto model = build_model("resnet18_cifar", {}, {3, 32, 32}, 10);
  model->reset_parameters(1, Device::kCpu);
  std::vector<std::string> names;
  for (Parameter* p : model->parameters()) names.push_back(p->name);
  for (Buffer* b : model->buffers()) names.push_back(b->name);
  for (const char* want : {"conv1.weight", "bn1.weight", "layer1.0.conv1.weight",
                           "layer1.0.bn1.running_var", "layer2.0.shortcut.0.weight",
                           "layer4.1.bn2.num_batches_tracked", "linear.weight", "linear.bias"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EXPECT_EQ(std::find(names.begin(), names.end(), "conv1.bias"), names.end());
}

TEST(ResNetZoo, BackwardAnnouncesEveryGradientOnceLastFirst) {
  for (const char* name : {"resnet20", "resnet18_cifar"}) {
    auto model = build_model(name, {}, {3, 8, 8}, 10);
    model->reset_parameters(1, Device::kCpu);
    auto backend = testing::test_cpu_backend(1);
    Tensor x({2, 3, 8, 8});
    fill_random(x, 1);
    const int32_t labels[] = {1, 7};
    model->forward(*backend, x, {.training = true});
    model->loss(*backend, labels, 0.5f, true);
    std::vector<size_t> order;
    model->backward(*backend, [&](size_t i) { order.push_back(i); });
    ASSERT_EQ(order.size(), model->parameters().size()) << name;
    for (size_t i = 0; i < order.size(); ++i) {
      EXPECT_EQ(order[i], order.size() - 1 - i) << name << " announcement " << i;
    }
  }
}

TEST(ResNetZoo, SummaryPrintsTheTree) {
  auto model = build_model("resnet20", {}, {3, 32, 32}, 10);
  model->reset_parameters(1, Device::kCpu);
  const std::string s = model->summary();
  EXPECT_NE(s.find("layer2.0 "), std::string::npos) << s;
  EXPECT_NE(s.find("basic_block(16->32, s2, pad)"), std::string::npos) << s;
  EXPECT_NE(s.find("    layer2.0.conv1"), std::string::npos) << s;
  EXPECT_NE(s.find("(32, 16, 16)"), std::string::npos) << s;
  EXPECT_NE(s.find("parameters: 269722"), std::string::npos) << s;
}

TEST(LayerSpec, NewLayerTypesAndErrors) {
  auto error = [](const std::string& text, const Shape& in) {
    try {
      make_layer(parse_spec(text), text, in);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error("basic_block out=8", {1, 4, 8, 8}), "no error");  // auto: a conv shortcut
  EXPECT_NE(error("basic_block out=8 shortcut=identity", {1, 4, 8, 8}).find("identity shortcut"),
            std::string::npos);
  EXPECT_NE(error("basic_block out=8 shortcut=magic", {1, 4, 8, 8}).find("unknown shortcut"),
            std::string::npos);
  EXPECT_NE(error("batchnorm2d relu=maybe", {1, 4, 8, 8}).find("not true or false"),
            std::string::npos);
  EXPECT_NE(error("batchnorm2d", {1, 4}).find("image input"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::nn
