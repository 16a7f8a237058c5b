#include "nn/layer_spec.h"

#include <sstream>

#include "common/error.h"
#include "nn/layer_registry.h"

namespace lockstep::nn {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

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

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::string& text, const Shape& in) {
  const LayerType* type = find_layer_type(spec.type);
  if (!type) {
    fail_input("layer \"", text, "\": unknown layer type \"", spec.type,
               "\" (known: ", layer_type_names(), ")");
  }
  if (type->input == LayerInput::kImage && in.size() != 4) {
    fail_input("layer \"", text, "\": ", spec.type, " needs an image input (N, C, H, W), got ",
               shape_string(in));
  }
  if (type->input == LayerInput::kFlat && in.size() != 2) {
    fail_input("layer \"", text, "\": ", spec.type, " needs a flat input (N, F), got ",
               shape_string(in), "; add a flatten layer before it");
  }
  LayerArgs args(spec.args, text);
  std::unique_ptr<Layer> layer = type->make(args, in);
  args.done();
  return layer;
}

}  // namespace lockstep::nn
