// What the ONNX exporter's layer conversions share (built only with
// libonnx-dev): the graph under construction and a convert() that appends
// one layer's nodes. A leaf layer's nodes come from its registry entry
// (nn/layer_registry.h: LayerType::onnx); the composites (Sequential,
// ResidualBlock) are converted here, in onnx_residual_layers.cpp.
#pragma once

#include <onnx/onnx_pb.h>

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
  // A float initializer with the tensor's values (any device).
  void initializer(const std::string& name, const nn::Tensor& value);
  // An int64 initializer (for Slice and Pad operands).
  void int64_initializer(const std::string& name, const std::vector<int64_t>& values);
};

void ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& values);
void integer(onnx::NodeProto* n, const char* name, int64_t value);
void real(onnx::NodeProto* n, const char* name, float value);

// Appends layer's nodes and moves g.shape to its output shape; throws
// InputError naming a layer type without a conversion. Composite layers'
// conversions call it for their children.
void convert(nn::Layer& layer, GraphBuilder& g);

// Appends a composite's nodes (its children through convert()); false when
// layer is no composite (onnx_residual_layers.cpp).
bool convert_composite(nn::Layer& layer, GraphBuilder& g);

}  // namespace lockstep::app::onnx_export
