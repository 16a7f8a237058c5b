#include "nn/layer_registry.h"

#include "common/error.h"

namespace lockstep::nn {

// The entries, each defined beside its layer (nn/layers/).
const LayerType& conv2d_layer_type();
const LayerType& batchnorm2d_layer_type();
const LayerType& max_pool2d_layer_type();
const LayerType& avg_pool2d_layer_type();
const LayerType& global_avg_pool2d_layer_type();
const LayerType& basic_block_layer_type();
const LayerType& relu_layer_type();
const LayerType& dropout_layer_type();
const LayerType& dropout2d_layer_type();
const LayerType& flatten_layer_type();
const LayerType& linear_layer_type();
const LayerType& log_softmax_layer_type();

const std::vector<const LayerType*>& layer_types() {
  static const std::vector<const LayerType*> all = {&conv2d_layer_type(),
                                                    &batchnorm2d_layer_type(),
                                                    &max_pool2d_layer_type(),
                                                    &avg_pool2d_layer_type(),
                                                    &global_avg_pool2d_layer_type(),
                                                    &basic_block_layer_type(),
                                                    &relu_layer_type(),
                                                    &dropout_layer_type(),
                                                    &dropout2d_layer_type(),
                                                    &flatten_layer_type(),
                                                    &linear_layer_type(),
                                                    &log_softmax_layer_type()};
  return all;
}

const LayerType* find_layer_type(const std::string& name) {
  for (const LayerType* type : layer_types()) {
    if (type->name == name) return type;
  }
  return nullptr;
}

std::vector<std::string> parameter_names(Layer& layer) {
  std::vector<std::string> names;
  for (const Parameter* p : layer.parameters()) names.push_back(p->name);
  return names;
}

std::string layer_type_names() {
  std::string names;
  for (const LayerType* type : layer_types()) {
    names += (names.empty() ? "" : ", ") + type->name;
  }
  return names;
}

std::string layer_types_markdown() {
  std::string text;
  for (const LayerType* type : layer_types()) {
    text += "- `" + type->usage + "`: " + type->summary;
    for (size_t i = 0; i < type->parameters.size(); ++i) {
      text += (i == 0 ? "; parameters `" : ", `") + type->parameters[i] + "`";
    }
    text += "\n";
  }
  return text;
}

// --- LayerArgs ----------------------------------------------------------------

namespace {

// Parses the whole of v with parse, or fails naming the spec and key.
template <typename T, typename Parse>
T parse_whole(const std::string& text, const std::string& key, const std::string& v,
              const char* what, Parse parse) {
  size_t used = 0;
  T value{};
  try {
    value = parse(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size()) fail_input("layer \"", text, "\": ", key, "=", v, " is not ", what);
  return value;
}

}  // namespace

int64_t LayerArgs::integer(const std::string& key, int64_t fallback, bool required) {
  if (required && !args_.count(key)) {
    fail_input("layer \"", text_, "\": missing required argument ", key, "=");
  }
  if (!args_.count(key)) return fallback;
  return parse_whole<int64_t>(
      text_, key, word(key, ""), "an integer",
      [](const std::string& v, size_t* used) { return std::stoll(v, used); });
}

float LayerArgs::real(const std::string& key, float fallback) {
  if (!args_.count(key)) return fallback;
  return parse_whole<float>(text_, key, word(key, ""), "a number",
                            [](const std::string& v, size_t* used) { return std::stof(v, used); });
}

bool LayerArgs::flag(const std::string& key, bool fallback) {
  const std::string v = word(key, fallback ? "true" : "false");
  if (v == "true" || v == "1") return true;
  if (v == "false" || v == "0") return false;
  fail_input("layer \"", text_, "\": ", key, "=", v, " is not true or false");
}

std::string LayerArgs::word(const std::string& key, const std::string& fallback) {
  auto it = args_.find(key);
  if (it == args_.end()) return fallback;
  std::string v = it->second;
  args_.erase(it);
  return v;
}

void LayerArgs::done() const {
  if (!args_.empty()) {
    fail_input("layer \"", text_, "\": unknown argument ", args_.begin()->first, "=");
  }
}

}  // namespace lockstep::nn
