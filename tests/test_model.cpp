// Models: the zoo's exact shapes and names, layer-list parsing and its
// errors, gradient-ready order, and a whole-model gradient check through the
// loss.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "common/error.h"
#include "nn/layers/activations.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/composite.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/linear.h"
#include "nn/layers/residual_block.h"
#include "nn/layers/sequential.h"
#include "nn/model_zoo.h"
#include "support/backend_checks.h"
#include "support/cpu_backend.h"
#include "support/gradient_check.h"

namespace lockstep::nn {
namespace {

std::vector<std::string> names(const Model& m) {
  std::vector<std::string> out;
  for (const Parameter* p : m.parameters()) out.push_back(p->name);
  return out;
}

TEST(ModelZoo, MnistNetIsTheReferenceNetwork) {
  auto m = build_model("mnist_net", {}, {1, 28, 28}, 10);
  m->reset_parameters(42, Device::kCpu);
  EXPECT_EQ(m->parameter_count(), 21840);  // as PyTorch counts the reference Net
  EXPECT_EQ(m->loss_kind(), LossKind::kNll);
  EXPECT_EQ(names(*m),
            (std::vector<std::string>{"conv1.weight", "conv1.bias", "conv2.weight", "conv2.bias",
                                      "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"}));
  EXPECT_EQ(m->parameters()[2]->value.shape(), (Shape{20, 10, 5, 5}));
  EXPECT_EQ(m->parameters()[4]->value.shape(), (Shape{50, 320}));
}

TEST(ModelZoo, AlexnetCifarIsTheReferenceNetwork) {
  auto m = build_model("alexnet_cifar", {}, {3, 32, 32}, 10);
  m->reset_parameters(42, Device::kCpu);
  EXPECT_EQ(m->parameter_count(), 23272266);
  EXPECT_EQ(m->loss_kind(), LossKind::kCrossEntropy);
  EXPECT_EQ(m->parameters()[0]->name, "features.0.weight");
  EXPECT_EQ(m->parameters()[0]->value.shape(), (Shape{64, 3, 3, 3}));
  EXPECT_EQ(m->parameters()[10]->name, "classifier.1.weight");
  EXPECT_EQ(m->parameters()[10]->value.shape(), (Shape{4096, 1024}));
}

// build_model's InputError message for these arguments, or "no error".
std::string build_error(const std::string& name, const std::vector<std::string>& layers,
                        const Shape& image_shape) {
  try {
    build_model(name, layers, image_shape, 10);
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

// An image folder of any number of classes trains a zoo network: its last
// layer follows the dataset.
TEST(ModelZoo, LastLayerTakesTheDatasetsClassCount) {
  for (const int64_t classes : {2, 10, 37}) {
    auto mnist = build_model("mnist_net", {}, {1, 28, 28}, classes);
    mnist->reset_parameters(1, Device::kCpu);
    EXPECT_EQ(mnist->parameters().back()->value.shape(), (Shape{classes}));
    auto alexnet = build_model("alexnet_cifar", {}, {3, 32, 32}, classes);
    alexnet->reset_parameters(1, Device::kCpu);
    EXPECT_EQ(alexnet->parameters().back()->value.shape(), (Shape{classes}));
    EXPECT_EQ(alexnet->parameters().back()->name, "classifier.6.bias");
  }
}

TEST(ModelZoo, RefusesMismatchedDataAndBadSpecs) {
  struct BadSpec {
    std::string name;
    std::vector<std::string> layers;
    Shape image_shape;
    std::string message_part;
  };
  const std::vector<BadSpec> cases = {
      {"mnist_net",
       {},
       {3, 32, 32},
       "reference network for (1, 28, 28) images, but the dataset has (3, 32, 32)"},
      {"resnet", {}, {1, 28, 28}, "unknown model"},
      {"custom", {"conv2d out=4 kernal=3"}, {1, 8, 8}, "missing required argument kernel"},
      {"custom", {"conv2d out=4 kernel=3 strid=2"}, {1, 8, 8}, "unknown argument strid"},
      {"custom", {"conv2d out=2 kernel=3", "linear out=10"}, {1, 8, 8}, "add a flatten layer"},
      {"custom", {"flatten", "linear out=5"}, {1, 8, 8}, "10 classes"},
      {"custom", {"flatten", "lineer out=10"}, {1, 8, 8}, "unknown layer type \"lineer\""},
  };
  for (const BadSpec& c : cases) {
    const std::string message = build_error(c.name, c.layers, c.image_shape);
    EXPECT_NE(message.find(c.message_part), std::string::npos)
        << c.name << " " << ::testing::PrintToString(c.layers) << ": " << message;
  }
}

const std::vector<std::string> kTiny = {"conv2d out=3 kernel=3 pad=1",
                                        "relu",
                                        "max_pool2d kernel=2",
                                        "flatten",
                                        "fc: linear out=4",
                                        "log_softmax"};

TEST(Model, GradientsAreAnnouncedLastLayerFirst) {
  auto m = build_model("custom", kTiny, {2, 6, 6}, 4);
  m->reset_parameters(1, Device::kCpu);
  EXPECT_EQ(names(*m),
            (std::vector<std::string>{"conv2d1.weight", "conv2d1.bias", "fc.weight", "fc.bias"}));
  auto backend = testing::test_cpu_backend(1);
  Tensor x({5, 2, 6, 6});
  testing::fill_random(x, 3);
  Tensor labels_holder({5});
  const int32_t labels[] = {0, 1, 2, 3, 1};
  m->forward(*backend, x, {.training = true});
  m->loss(*backend, labels, 1.0f, true);
  std::vector<size_t> order;
  m->backward(*backend, [&](size_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<size_t>{3, 2, 1, 0}));
}

// d(mean loss)/d(parameter) of a whole model, against central differences
// of the loss computed in double from the model's own forward.
TEST(Model, WholeModelGradientMatchesCentralDifferences) {
  for (const char* loss : {"nll", "cross_entropy"}) {
    std::vector<std::string> specs = kTiny;
    if (std::string(loss) == "cross_entropy") specs.pop_back();
    auto m = build_model("custom", specs, {2, 6, 6}, 4, loss);
    m->reset_parameters(2, Device::kCpu);
    auto backend = testing::test_cpu_backend(1);
    Tensor x({3, 2, 6, 6});
    testing::fill_random(x, 4);
    const int32_t labels[] = {2, 0, 3};
    auto mean_loss = [&] {
      m->forward(*backend, x, {});
      return m->loss(*backend, labels, 0.0f, false).loss_sum / 3.0;
    };
    m->forward(*backend, x, {});
    m->loss(*backend, labels, 1.0f / 3.0f, true);
    m->backward(*backend);
    for (Parameter* p : m->parameters()) {
      Tensor analytic = p->grad.clone();
      for (int64_t i = 0; i < p->value.numel(); i += 3) {
        float& v = p->value.data()[i];
        const float saved = v;
        v = saved + 1e-3f;
        const double plus = mean_loss();
        v = saved - 1e-3f;
        const double minus = mean_loss();
        v = saved;
        const double numeric = (plus - minus) / 2e-3;
        EXPECT_NEAR(analytic.data()[i], numeric, 2e-3 * std::max(1.0, std::fabs(numeric)))
            << loss << " " << p->name << "[" << i << "]";
      }
    }
  }
}

// Every Sequential in a model and its depth (top-level layers: 0).
void sequentials(const std::vector<Layer*>& layers, int depth,
                 std::vector<std::pair<Sequential*, int>>& out) {
  for (Layer* layer : layers) {
    if (auto* s = dynamic_cast<Sequential*>(layer)) out.emplace_back(s, depth);
    if (const auto* c = dynamic_cast<const Composite*>(layer)) {
      sequentials(c->children(), depth + 1, out);
    }
  }
}

std::vector<std::pair<Sequential*, int>> sequentials(const Model& m) {
  std::vector<Layer*> top;
  for (const auto& layer : m.layers()) top.push_back(layer.get());
  std::vector<std::pair<Sequential*, int>> out;
  sequentials(top, 0, out);
  return out;
}

// One training step's gradients: every parameter's, in order.
std::vector<std::vector<float>> step_gradients(Model& m) {
  auto backend = testing::test_cpu_backend(2);
  Tensor x({4, 3, 16, 16});
  testing::fill_random(x, 6);
  const int32_t labels[] = {1, 7, 3, 0};
  m.forward(*backend, x, {.training = true});
  m.loss(*backend, labels, 0.25f, true);
  m.backward(*backend);
  std::vector<std::vector<float>> out;
  for (const Parameter* p : m.parameters())
    out.emplace_back(p->grad.data(), p->grad.data() + p->grad.numel());
  return out;
}

// A Sequential (depth 0) of a convolution and two residual blocks, whose
// main paths are Sequentials (depth 2), then a linear layer.
std::unique_ptr<Model> nested_model() {
  auto block = [] {
    auto path = std::make_unique<Sequential>();
    path->add("conv1", std::make_unique<Conv2d>(8, 8, 3, 1, 1, false));
    path->add("bn1", std::make_unique<BatchNorm2d>(8, true));
    path->add("conv2", std::make_unique<Conv2d>(8, 8, 3, 1, 1, false));
    path->add("bn2", std::make_unique<BatchNorm2d>(8));
    return std::make_unique<ResidualBlock>(std::move(path), ShortcutKind::kIdentity, nullptr, 8, 1,
                                           true, "basic block");
  };
  auto trunk = std::make_unique<Sequential>();
  trunk->add("stem", std::make_unique<Conv2d>(3, 8, 3, 1, 1));
  trunk->add("0", block());
  trunk->add("1", block());
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::move(trunk));
  layers.push_back(std::make_unique<Flatten>());
  layers.push_back(std::make_unique<Linear>(8 * 16 * 16, 10));
  auto m = std::make_unique<Model>("nested", Shape{3, 16, 16}, std::move(layers),
                                   LossKind::kCrossEntropy);
  m->reset_parameters(8, Device::kCpu);
  return m;
}

// The Sequentials at one depth pass their gradients through one pair of
// tensors (resnet20: its nine blocks' main paths, one pair), those at
// different depths through different pairs, and the gradients are those
// of a pair each.
TEST(Model, SequentialsAtOneDepthShareTheirSpareGradients) {
  auto resnet = build_model("resnet20", {}, {3, 16, 16}, 10);
  std::set<const SpareGradients*> blocks;
  for (const auto& [s, depth] : sequentials(*resnet)) {
    EXPECT_EQ(depth, 1);  // each block's main path, the blocks at the top level
    blocks.insert(s->spare_gradients().get());
  }
  EXPECT_EQ(blocks.size(), 1u);

  auto shared = nested_model(), apart = nested_model();
  std::map<int, std::set<const SpareGradients*>> pairs;
  for (const auto& [s, depth] : sequentials(*shared))
    pairs[depth].insert(s->spare_gradients().get());
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].size(), 1u);
  EXPECT_EQ(pairs[2].size(), 1u);
  EXPECT_NE(*pairs[0].begin(), *pairs[2].begin());
  for (const auto& [s, depth] : sequentials(*apart)) {
    s->set_spare_gradients(std::make_shared<SpareGradients>());
  }
  EXPECT_EQ(testing::differing_bits(step_gradients(*apart), step_gradients(*shared)), 0u);
}

TEST(Model, SummaryListsLayersAndParameterCount) {
  auto m = build_model("mnist_net", {}, {1, 28, 28}, 10);
  m->reset_parameters(0, Device::kCpu);
  const std::string s = m->summary();
  EXPECT_NE(s.find("conv2_drop"), std::string::npos);
  EXPECT_NE(s.find("(320)"), std::string::npos);
  EXPECT_NE(s.find("parameters: 21840"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::nn
