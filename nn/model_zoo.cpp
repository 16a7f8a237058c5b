#include "nn/model_zoo.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "common/error.h"
#include "nn/layer_spec.h"
#include "nn/resnet_zoo.h"

namespace lockstep::nn {
namespace {

// The reference workshop network (pytorch_mnist.py), with PyTorch's names.
const std::vector<std::string> kMnistNet = {
    "conv1: conv2d out=10 kernel=5",
    "pool1: max_pool2d kernel=2",
    "relu1: relu",
    "conv2: conv2d out=20 kernel=5",
    "conv2_drop: dropout2d p=0.5",
    "pool2: max_pool2d kernel=2",
    "relu2: relu",
    "flatten: flatten",
    "fc1: linear out=50",
    "relu3: relu",
    "dropout: dropout p=0.5",
    "fc2: linear out=10",
    "log_softmax: log_softmax",
};

// The reference CIFAR-10 network (pytorch_cifar10.py), named like a
// PyTorch features/classifier Sequential pair.
const std::vector<std::string> kAlexnetCifar = {
    "features.0: conv2d out=64 kernel=3 stride=2 pad=1",
    "features.1: relu",
    "features.2: max_pool2d kernel=2",
    "features.3: conv2d out=192 kernel=3 pad=1",
    "features.4: relu",
    "features.5: max_pool2d kernel=2",
    "features.6: conv2d out=384 kernel=3 pad=1",
    "features.7: relu",
    "features.8: conv2d out=256 kernel=3 pad=1",
    "features.9: relu",
    "features.10: conv2d out=256 kernel=3 pad=1",
    "features.11: relu",
    "features.12: max_pool2d kernel=2",
    "flatten: flatten",
    "classifier.0: dropout p=0.5",
    "classifier.1: linear out=4096",
    "classifier.2: relu",
    "classifier.3: dropout p=0.5",
    "classifier.4: linear out=4096",
    "classifier.5: relu",
    "classifier.6: linear out=10",
};

}  // namespace

std::vector<std::string> zoo_model_names() {
  std::vector<std::string> names = {"mnist_net", "alexnet_cifar"};
  for (const std::string& n : resnet_model_names()) names.push_back(n);
  return names;
}

std::vector<std::string> zoo_layer_specs(const std::string& name, int64_t num_classes) {
  if (is_resnet_model(name)) return resnet_layer_specs(name, num_classes);
  if (name == "mnist_net" || name == "alexnet_cifar") {
    std::vector<std::string> specs = name == "mnist_net" ? kMnistNet : kAlexnetCifar;
    // The last layer is sized to the dataset's classes (10 in the references).
    std::string& last_linear = *std::find_if(specs.rbegin(), specs.rend(), [](const auto& s) {
      return s.find("linear out=") != std::string::npos;
    });
    last_linear =
        last_linear.substr(0, last_linear.find("out=")) + "out=" + std::to_string(num_classes);
    return specs;
  }
  std::string known;
  for (const std::string& n : zoo_model_names()) known += n + ", ";
  fail_input("unknown model \"", name, "\" (known: ", known, "custom)");
}

std::unique_ptr<Model> build_model(const std::string& name,
                                   const std::vector<std::string>& layer_specs,
                                   const Shape& input_shape, int64_t num_classes,
                                   const std::string& loss) {
  std::vector<std::string> specs;
  if (name == "custom") {
    if (layer_specs.empty()) fail_input("model \"custom\" needs a layer list (key: layers)");
    specs = layer_specs;
  } else {
    if (!layer_specs.empty()) {
      fail_input("model \"", name, "\" is a zoo model: give layers only with model = \"custom\"");
    }
    specs = zoo_layer_specs(name, num_classes);
    const Shape expected = name == "mnist_net" ? Shape{1, 28, 28} : Shape{3, 32, 32};
    if (!is_resnet_model(name) && input_shape != expected) {
      fail_input("model \"", name, "\" is the reference network for ", shape_string(expected),
                 " images, but the dataset has ", shape_string(input_shape),
                 " images; write a layer list with model = \"custom\" for other shapes");
    }
  }
  Shape shape = input_shape;
  shape.insert(shape.begin(), 1);
  std::vector<std::unique_ptr<Layer>> layers;
  std::map<std::string, int> seen;
  for (const std::string& text : specs) {
    LayerSpec spec = parse_spec(text);
    auto layer = make_layer(spec, text, shape);
    std::string layer_name =
        spec.name.empty() ? spec.type + std::to_string(layers.size() + 1) : spec.name;
    if (seen[layer_name]++) fail_input("layer \"", text, "\": duplicate layer name ", layer_name);
    layer->set_name(layer_name);
    shape = layer->output_shape(shape);
    layers.push_back(std::move(layer));
  }
  if (shape.size() != 2 || shape[1] != num_classes) {
    fail_input("model \"", name, "\" produces ", shape_string(shape),
               " per batch but the dataset has ", num_classes, " classes");
  }
  const bool ends_in_log_softmax = specs.back().find("log_softmax") != std::string::npos;
  LossKind kind;
  if (loss == "auto") {
    kind = ends_in_log_softmax ? LossKind::kNll : LossKind::kCrossEntropy;
  } else if (loss == "nll") {
    if (!ends_in_log_softmax) fail_input("loss \"nll\" needs a model that ends in log_softmax");
    kind = LossKind::kNll;
  } else if (loss == "cross_entropy") {
    kind = LossKind::kCrossEntropy;
  } else {
    fail_input("unknown loss \"", loss, "\" (known: auto, nll, cross_entropy)");
  }
  return std::make_unique<Model>(name, input_shape, std::move(layers), kind);
}

}  // namespace lockstep::nn
