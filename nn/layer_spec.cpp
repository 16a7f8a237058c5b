#include "nn/layer_spec.h"

#include <sstream>

#include "common/error.h"
#include "nn/layers/activations.h"
#include "nn/layers/avg_pool2d.h"
#include "nn/layers/batch_norm2d.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool2d.h"
#include "nn/layers/residual_block.h"

namespace lockstep::nn {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
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
  bool flag(const std::string& key, bool fallback) {
    const std::string v = word(key, fallback ? "true" : "false");
    if (v == "true" || v == "1") return true;
    if (v == "false" || v == "0") return false;
    fail_input("layer \"", text_, "\": ", key, "=", v, " is not true or false");
  }
  std::string word(const std::string& key, const std::string& fallback) {
    auto it = args_.find(key);
    if (it == args_.end()) return fallback;
    std::string v = it->second;
    args_.erase(it);
    return v;
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

}  // namespace

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

namespace {

void need_image(const std::string& text, const std::string& type, const Shape& in) {
  if (in.size() != 4) {
    fail_input("layer \"", text, "\": ", type, " needs an image input (N, C, H, W), got ",
               shape_string(in));
  }
}

// conv1 (3x3, stride) bn1+relu conv2 (3x3) bn2, no conv biases.
std::unique_ptr<Layer> make_basic_block(Args& args, const std::string& text, const Shape& in) {
  need_image(text, "basic_block", in);
  const int64_t planes = args.integer("out", 0, true);
  const int64_t stride = args.integer("stride", 1);
  const bool same = stride == 1 && planes == in[1];
  std::string shortcut = args.word("shortcut", "auto");
  if (shortcut == "auto") shortcut = same ? "identity" : "conv";
  if (planes <= 0 || stride <= 0) {
    fail_input("layer \"", text, "\": out and stride must be positive");
  }
  auto main = std::make_unique<Sequential>();
  main->add("conv1", std::make_unique<Conv2d>(in[1], planes, 3, stride, 1, false));
  main->add("bn1", std::make_unique<BatchNorm2d>(planes, true));
  main->add("conv2", std::make_unique<Conv2d>(planes, planes, 3, 1, 1, false));
  main->add("bn2", std::make_unique<BatchNorm2d>(planes));
  ShortcutKind kind = ShortcutKind::kIdentity;
  std::unique_ptr<Sequential> projection;
  if (shortcut == "identity") {
    if (!same) {
      fail_input("layer \"", text, "\": an identity shortcut needs stride 1 and out=", in[1],
                 "; use shortcut=pad or shortcut=conv");
    }
  } else if (shortcut == "pad") {
    kind = ShortcutKind::kPad;
  } else if (shortcut == "conv") {
    kind = ShortcutKind::kProjection;
    projection = std::make_unique<Sequential>();
    projection->add("0", std::make_unique<Conv2d>(in[1], planes, 1, stride, 0, false));
    projection->add("1", std::make_unique<BatchNorm2d>(planes));
  } else {
    fail_input("layer \"", text, "\": unknown shortcut \"", shortcut,
               "\" (known: auto, identity, pad, conv)");
  }
  const std::string what =
      detail::concat("basic_block(", in[1], "->", planes, ", s", stride, ", ", shortcut, ")");
  return std::make_unique<ResidualBlock>(std::move(main), kind, std::move(projection), planes,
                                         stride, true, what);
}

std::unique_ptr<Layer> make_image_layer(Args& args, const LayerSpec& spec, const std::string& text,
                                        const Shape& in) {
  const auto& t = spec.type;
  need_image(text, t, in);
  if (t == "conv2d") {
    const int64_t out = args.integer("out", 0, true);
    const int64_t kernel = args.integer("kernel", 0, true);
    const int64_t stride = args.integer("stride", 1);
    const int64_t pad = args.integer("pad", 0);
    return std::make_unique<Conv2d>(in[1], out, kernel, stride, pad, args.flag("bias", true));
  }
  if (t == "batchnorm2d") return std::make_unique<BatchNorm2d>(in[1], args.flag("relu", false));
  if (t == "max_pool2d" || t == "avg_pool2d") {
    const int64_t kernel = args.integer("kernel", 0, true);
    const int64_t stride = args.integer("stride", 0);
    if (t == "avg_pool2d") return std::make_unique<AvgPool2d>(kernel, stride);
    return std::make_unique<MaxPool2d>(kernel, stride);
  }
  if (t == "global_avg_pool2d") return std::make_unique<GlobalAvgPool2d>();
  return make_basic_block(args, text, in);
}

}  // namespace

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& text, const Shape& in) {
  Args args(spec, text);
  std::unique_ptr<Layer> layer;
  const auto& t = spec.type;
  if (t == "conv2d" || t == "batchnorm2d" || t == "max_pool2d" || t == "avg_pool2d" ||
      t == "global_avg_pool2d" || t == "basic_block") {
    layer = make_image_layer(args, spec, text, in);
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
               "\" (known: conv2d, batchnorm2d, max_pool2d, avg_pool2d, global_avg_pool2d, "
               "basic_block, relu, dropout, dropout2d, flatten, linear, log_softmax)");
  }
  args.done();
  return layer;
}

}  // namespace lockstep::nn
