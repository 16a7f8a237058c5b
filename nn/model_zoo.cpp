#include "nn/model_zoo.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "nn/error.h"
#include "nn/layers/activations.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/max_pool2d.h"

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

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

struct LayerSpec {
  std::string name, type;
  std::map<std::string, std::string> args;
};

LayerSpec parse_spec(const std::string& text) {
  LayerSpec spec;
  std::string body = text;
  if (auto colon = body.find(':'); colon != std::string::npos) {
    spec.name = trim(body.substr(0, colon));
    body = body.substr(colon + 1);
  }
  std::istringstream words(body);
  words >> spec.type;
  std::string word;
  while (words >> word) {
    const auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == word.size()) {
      fail_input("layer \"", text, "\": argument \"", word, "\" is not key=value");
    }
    spec.args[word.substr(0, eq)] = word.substr(eq + 1);
  }
  if (spec.type.empty()) fail_input("layer \"", text, "\": empty layer spec");
  return spec;
}

// Reads and removes one argument; the caller checks that none are left.
class Args {
 public:
  Args(const LayerSpec& spec, const std::string& text) : args_(spec.args), text_(text) {}
  int64_t integer(const std::string& key, int64_t fallback, bool required = false) {
    return take<int64_t>(key, fallback, required, "an integer",
                         [](const std::string& v, size_t* used) { return std::stoll(v, used); });
  }
  float real(const std::string& key, float fallback) {
    return take<float>(key, fallback, false, "a number",
                       [](const std::string& v, size_t* used) { return std::stof(v, used); });
  }
  void done() const {
    if (!args_.empty()) {
      fail_input("layer \"", text_, "\": unknown argument ", args_.begin()->first, "=");
    }
  }

 private:
  // Parses and removes key; the whole value must parse.
  template <typename T, typename Parse>
  T take(const std::string& key, T fallback, bool required, const char* what, Parse parse) {
    auto it = args_.find(key);
    if (it == args_.end()) {
      if (required) fail_input("layer \"", text_, "\": missing required argument ", key, "=");
      return fallback;
    }
    size_t used = 0;
    T v{};
    try {
      v = parse(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size()) {
      fail_input("layer \"", text_, "\": ", key, "=", it->second, " is not ", what);
    }
    args_.erase(it);
    return v;
  }

  std::map<std::string, std::string> args_;
  std::string text_;
};

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& text, const Shape& in) {
  Args args(spec, text);
  std::unique_ptr<Layer> layer;
  const auto& t = spec.type;
  if (t == "conv2d") {
    if (in.size() != 4)
      fail_input("layer \"", text, "\": conv2d needs an image input, got ", shape_string(in));
    const int64_t out = args.integer("out", 0, true);
    const int64_t kernel = args.integer("kernel", 0, true);
    const int64_t stride = args.integer("stride", 1);
    const int64_t pad = args.integer("pad", 0);
    layer = std::make_unique<Conv2d>(in[1], out, kernel, stride, pad);
  } else if (t == "max_pool2d") {
    const int64_t kernel = args.integer("kernel", 0, true);
    layer = std::make_unique<MaxPool2d>(kernel, args.integer("stride", 0));
  } else if (t == "relu") {
    layer = std::make_unique<ReLU>();
  } else if (t == "flatten") {
    layer = std::make_unique<Flatten>();
  } else if (t == "log_softmax") {
    layer = std::make_unique<LogSoftmax>();
  } else if (t == "dropout" || t == "dropout2d") {
    layer = std::make_unique<Dropout>(args.real("p", 0.5f), t == "dropout2d");
  } else if (t == "linear") {
    if (in.size() != 2)
      fail_input("layer \"", text, "\": linear needs a flat input (N, F), got ", shape_string(in),
                 "; add a flatten layer before it");
    layer = std::make_unique<Linear>(in[1], args.integer("out", 0, true));
  } else {
    fail_input("layer \"", text, "\": unknown layer type \"", t,
               "\" (known: conv2d, max_pool2d, relu, dropout, dropout2d, flatten, linear, "
               "log_softmax)");
  }
  args.done();
  return layer;
}

}  // namespace

std::vector<std::string> zoo_model_names() {
  return {"mnist_net", "alexnet_cifar"};
}

std::vector<std::string> zoo_layer_specs(const std::string& name) {
  if (name == "mnist_net") return kMnistNet;
  if (name == "alexnet_cifar") return kAlexnetCifar;
  fail_input("unknown model \"", name, "\" (known: mnist_net, alexnet_cifar, custom)");
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
    specs = zoo_layer_specs(name);
    // The last layer is sized to the dataset's classes (10 in the references).
    std::string& last_linear = *std::find_if(specs.rbegin(), specs.rend(), [](const auto& s) {
      return s.find("linear out=") != std::string::npos;
    });
    last_linear =
        last_linear.substr(0, last_linear.find("out=")) + "out=" + std::to_string(num_classes);
    const Shape expected = name == "mnist_net" ? Shape{1, 28, 28} : Shape{3, 32, 32};
    if (input_shape != expected) {
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
