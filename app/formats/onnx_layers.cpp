// The graph helpers, and convert(): a leaf layer's nodes as its registry
// entry describes them (nn/layer_registry.h), a composite's from
// onnx_residual_layers.cpp.
#include "app/formats/onnx_graph.h"

#include <cctype>

#include "common/error.h"
#include "nn/layer_registry.h"

namespace lockstep::app::onnx_export {

onnx::NodeProto* GraphBuilder::add(const std::string& op, const std::string& name,
                                   const std::vector<std::string>& inputs,
                                   const std::string& output) {
  onnx::NodeProto* n = graph->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& in : inputs) n->add_input(in);
  n->add_output(output);
  return n;
}

void GraphBuilder::initializer(const std::string& name, const nn::Tensor& value) {
  onnx::TensorProto* t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : value.shape()) t->add_dims(d);
  nn::Tensor host(value.shape(), nn::Device::kCpu);
  host.copy_from(value);
  t->set_raw_data(host.data(), sizeof(float) * static_cast<size_t>(host.numel()));
}

void GraphBuilder::int64_initializer(const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto* t = graph->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

void ints(onnx::NodeProto* n, const char* name, const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void integer(onnx::NodeProto* n, const char* name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void real(onnx::NodeProto* n, const char* name, float value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

namespace {

// The parameter or buffer of layer named name.
const nn::Tensor& tensor_named(nn::Layer& layer, const std::string& name) {
  for (const nn::Parameter* p : layer.parameters()) {
    if (p->name == name) return p->value;
  }
  for (const nn::Buffer* b : layer.buffers()) {
    if (b->name == name) return b->value;
  }
  fail_input("ONNX export: layer ", layer.name(), " has no tensor ", name);
}

// Appends a leaf's nodes, each reading the one before: the first is named
// after the layer, the others "<layer>.<op>"; the last writes "<layer>.out".
void emit(const std::vector<nn::OnnxNode>& nodes, nn::Layer& layer, GraphBuilder& g) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    const nn::OnnxNode& d = nodes[i];
    std::vector<std::string> inputs = {g.current};
    for (const std::string& name : d.initializers) {
      g.initializer(name, tensor_named(layer, name));
      inputs.push_back(name);
    }
    std::string op = d.op;
    for (char& c : op) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const std::string name = i == 0 ? layer.name() : layer.name() + "." + op;
    const std::string output = i + 1 == nodes.size() ? layer.name() + ".out" : name + ".y";
    onnx::NodeProto* n = g.add(d.op, name, inputs, output);
    for (const auto& [key, values] : d.ints) ints(n, key.c_str(), values);
    for (const auto& [key, value] : d.integers) integer(n, key.c_str(), value);
    for (const auto& [key, value] : d.reals) real(n, key.c_str(), value);
    g.current = output;
  }
}

// A leaf of a registered type: true when one took it.
bool convert_registered(nn::Layer& layer, GraphBuilder& g) {
  for (const nn::LayerType* type : nn::layer_types()) {
    if (!type->onnx) continue;
    if (auto nodes = type->onnx(layer)) {
      emit(*nodes, layer, g);
      return true;
    }
  }
  return false;
}

}  // namespace

void convert(nn::Layer& layer, GraphBuilder& g) {
  const nn::Shape in = g.shape;
  if (!convert_registered(layer, g) && !convert_composite(layer, g)) {
    fail_input("ONNX export: layer ", layer.name(), " (", layer.describe(),
               ") has no ONNX conversion yet");
  }
  g.shape = layer.output_shape(in);
}

}  // namespace lockstep::app::onnx_export
