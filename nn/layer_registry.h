// The layer types a spec may name ("conv1: conv2d out=16 kernel=3"): one
// LayerType entry per type, defined beside the layer's code. The spec parser
// (nn/layer_spec.h), the ONNX exporter (app/formats/onnx_export.h) and the
// generated config docs (`lockstep options --layers`) read this registry and
// nothing else.
//
// Adding a layer type, say depthwise_conv2d:
//   1. nn/layers/depthwise_conv2d.h and .cpp: the Layer, forward and backward
//      side by side on Backend ops. Prefer a field of an existing primitive
//      (Conv2dGeometry, as cuDNN takes a group count) over a new Backend op;
//      a new op goes to nn/backend.h, nn/cpu/ and nn/cuda/ (the mirror is per
//      op), and tests/support/forwarding_backend.h forwards it.
//   2. At the bottom of the .cpp, its entry: a function returning a static
//      LayerType (name, usage line, parameter names, factory, ONNX nodes).
//   3. Its declaration and its place in the list, in nn/layer_registry.cpp.
//   4. tests/test_<layer>.cpp: the gradient checker (tests/support/
//      gradient_check.h) and the CPU/CUDA comparison; the registry tests
//      (tests/test_layer_registry.cpp) check every entry against its layer.
//   5. scripts/gen_config_docs.sh regenerates configs/README.md.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/layer.h"

namespace lockstep::nn {

// The key=value arguments of one spec, read and removed one at a time;
// InputError naming the spec on a bad value, a missing required one, or
// (done()) one that no reader took.
class LayerArgs {
 public:
  LayerArgs(std::map<std::string, std::string> args, std::string text)
      : args_(std::move(args)), text_(std::move(text)) {}
  int64_t integer(const std::string& key, int64_t fallback, bool required = false);
  float real(const std::string& key, float fallback);
  bool flag(const std::string& key, bool fallback);
  std::string word(const std::string& key, const std::string& fallback);
  void done() const;
  // The spec as written, for error messages.
  const std::string& text() const { return text_; }

 private:
  std::map<std::string, std::string> args_;
  std::string text_;
};

// One ONNX node of a leaf layer's inference graph, described without
// protobuf. The exporter feeds it the previous node's output (the layer's
// input for the first node), then the initializers named here.
struct OnnxNode {
  std::string op;                         // "Conv"
  std::vector<std::string> initializers;  // full names of the layer's parameters or buffers
  std::vector<std::pair<std::string, std::vector<int64_t>>> ints;  // "kernel_shape": {3, 3}
  std::vector<std::pair<std::string, int64_t>> integers;           // "axis": 1
  std::vector<std::pair<std::string, float>> reals;                // "epsilon": 1e-5
};

// What input a type takes; make_layer refuses another with a clear message.
enum class LayerInput { kAny, kImage, kFlat };

struct LayerType {
  std::string name;                     // as written in a spec: "conv2d"
  std::string usage;                    // "conv2d out= kernel= [stride=1] [pad=0] [bias=true]"
  std::string summary;                  // its docs line: "a 2-D convolution"
  std::vector<std::string> parameters;  // state_dict suffixes, in order: {"weight", "bias"}
  LayerInput input = LayerInput::kAny;
  // Builds the layer for an input of shape `in`, reading args (the caller
  // checks that none are left).
  std::function<std::unique_ptr<Layer>(LayerArgs& args, const Shape& in)> make;
  // The layer's inference nodes (empty: the identity, no node), or nullopt
  // when `layer` is not of this type. Empty function: the type is a
  // composite that the exporter converts itself (basic_block).
  std::function<std::optional<std::vector<OnnxNode>>(Layer& layer)> onnx;
};

// onnx_for<Conv2d>(fn): a LayerType::onnx that takes the layers of class L
// and passes the others; fn(L&) returns the nodes.
template <typename L, typename Fn>
auto onnx_for(Fn fn) {
  return [fn](Layer& layer) -> std::optional<std::vector<OnnxNode>> {
    auto* typed = dynamic_cast<L*>(&layer);
    if (!typed) return std::nullopt;
    return std::vector<OnnxNode>(fn(*typed));
  };
}

// The full names of layer's parameters, in order: a node's initializers.
std::vector<std::string> parameter_names(Layer& layer);

// Every registered type, in the order of the docs.
const std::vector<const LayerType*>& layer_types();
// The type named `name`, or null.
const LayerType* find_layer_type(const std::string& name);
// "conv2d, batchnorm2d, ...": for error messages.
std::string layer_type_names();
// The markdown list of the types, one usage line each, for configs/README.md.
std::string layer_types_markdown();

}  // namespace lockstep::nn
