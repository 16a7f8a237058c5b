// The residual networks of the zoo, as layer lists (nn/model_zoo.h syntax):
//   resnet20, resnet32, resnet44, resnet56, resnet110: the CIFAR ResNets of
//     He et al. 2016 (3 stages of (depth - 2) / 6 basic blocks with 16, 32,
//     64 channels, "option A" padding shortcuts), named as the widely used
//     PyTorch port (conv1, bn1, layer1.0.conv1, ..., linear);
//   resnet18_cifar: ResNet-18 with a 3x3 stem (4 stages of 2 blocks, 64 to
//     512 channels, 1x1 convolution + BatchNorm shortcuts), named as the
//     common PyTorch CIFAR example (layer2.0.shortcut.0.weight, ...).
// The input channels and image size come from the data set; the last layer
// has num_classes outputs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::nn {

std::vector<std::string> resnet_model_names();
bool is_resnet_model(const std::string& name);
// The layer list of a residual zoo model; InputError for another name.
std::vector<std::string> resnet_layer_specs(const std::string& name, int64_t num_classes);

}  // namespace lockstep::nn
