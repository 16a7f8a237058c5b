#include "nn/resnet_zoo.h"

#include <algorithm>

#include "common/error.h"

namespace lockstep::nn {
namespace {

struct Stage {
  int64_t channels, blocks, stride;
};

std::vector<std::string> build(const std::vector<Stage>& stages, int64_t stem,
                               const std::string& shortcut, int64_t num_classes) {
  std::vector<std::string> specs = {
      "conv1: conv2d out=" + std::to_string(stem) + " kernel=3 pad=1 bias=false",
      "bn1: batchnorm2d relu=true",
  };
  for (size_t s = 0; s < stages.size(); ++s) {
    for (int64_t b = 0; b < stages[s].blocks; ++b) {
      const int64_t stride = b == 0 ? stages[s].stride : 1;
      specs.push_back("layer" + std::to_string(s + 1) + "." + std::to_string(b) +
                      ": basic_block out=" + std::to_string(stages[s].channels) +
                      " stride=" + std::to_string(stride) + " shortcut=" + shortcut);
    }
  }
  specs.push_back("avgpool: global_avg_pool2d");
  specs.push_back("linear: linear out=" + std::to_string(num_classes));
  return specs;
}

}  // namespace

std::vector<std::string> resnet_model_names() {
  return {"resnet20", "resnet32", "resnet44", "resnet56", "resnet110", "resnet18_cifar"};
}

bool is_resnet_model(const std::string& name) {
  const auto names = resnet_model_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::vector<std::string> resnet_layer_specs(const std::string& name, int64_t num_classes) {
  if (name == "resnet18_cifar") {
    return build({{64, 2, 1}, {128, 2, 2}, {256, 2, 2}, {512, 2, 2}}, 64, "auto", num_classes);
  }
  if (!is_resnet_model(name)) fail_input("unknown residual model \"", name, "\"");
  const int64_t depth = std::stoll(name.substr(6));
  const int64_t n = (depth - 2) / 6;
  // The first block of each later stage halves the image and doubles the
  // channels: "pad" zero-fills the new channels; elsewhere "auto" is identity.
  std::vector<std::string> specs =
      build({{16, n, 1}, {32, n, 2}, {64, n, 2}}, 16, "pad", num_classes);
  for (std::string& s : specs) {
    if (s.find("stride=1 shortcut=pad") != std::string::npos) {
      s.replace(s.find("shortcut=pad"), 12, "shortcut=identity");
    }
  }
  return specs;
}

}  // namespace lockstep::nn
