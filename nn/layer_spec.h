// One layer of a layer list, parsed and built. The syntax (see
// nn/model_zoo.h): "[name: ] type key=value ...".
#pragma once

#include <map>
#include <memory>
#include <string>

#include "nn/layer.h"

namespace lockstep::nn {

struct LayerSpec {
  std::string name, type;
  std::map<std::string, std::string> args;
};

// Splits text into name, type and arguments; InputError on a malformed one.
LayerSpec parse_spec(const std::string& text);

// Builds the layer for an input of shape `in` (N, ...); InputError naming
// text on an unknown type, an unknown or bad argument, or a wrong input.
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& text, const Shape& in);

}  // namespace lockstep::nn
