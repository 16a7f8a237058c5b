// What the ONNX exporter's layer conversions share (built only with
// libonnx-dev): the graph under construction and a convert() that appends
// one layer's nodes. Each layer type has one conversion function; a new
// type adds a function and an entry in its file's list.
#pragma once

#include <onnx/onnx_pb.h>

#include <functional>
#include <string>
#include <vector>

#include "nn/layer.h"

namespace lockstep::app::onnx_export {

// The graph being built, the value the next node reads, and its shape
// (N, ...) with N = 1.
struct GraphBuilder {
  onnx::GraphProto* graph;
  std::string current;
  nn::Shape shape;

  // A node reading inputs, writing output.
  onnx::NodeProto* add(const std::string& op, const std::string& name,
                       const std::vector<std::string>& inputs, const std::string& output);
  // A node of layer reading current (then extra_inputs); its output,
  // "<layer>.out", becomes current.
  onnx::NodeProto* node(const std::string& op, const nn::Layer& layer,
                        const std::vector<std::string>& extra_inputs = {});
  // A float initializer with the tensor's values (any device).
  void initializer(const std::string& name, const nn::Tensor& value);
  // An int64 initializer (for Slice and Pad operands).
  void int64_initializer(const std::string& name, const std::vector<int64_t>& values);
  // Initializers for every parameter of layer; returns their names in order.
  std::vector<std::string> weights(nn::Layer& layer);
};

void ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& values);
void integer(onnx::NodeProto* n, const char* name, int64_t value);
void real(onnx::NodeProto* n, const char* name, float value);

// True when the conversion took the layer (appended its nodes).
using Conversion = std::function<bool(nn::Layer&, GraphBuilder&)>;

// Appends layer's nodes and moves g.shape to its output shape; throws
// InputError naming a layer type without a conversion. Composite layers'
// conversions call it for their children.
void convert(nn::Layer& layer, GraphBuilder& g);

// The lists convert() tries: onnx_layers.cpp and onnx_residual_layers.cpp.
const std::vector<Conversion>& basic_conversions();
const std::vector<Conversion>& residual_conversions();

}  // namespace lockstep::app::onnx_export
