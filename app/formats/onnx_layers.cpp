// ONNX conversions of the plain layers (pooling included), and the graph
// helpers they share.
#include "app/formats/onnx_graph.h"

#include "common/error.h"
#include "nn/layers/activations.h"
#include "nn/layers/avg_pool2d.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/pool2d.h"

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

onnx::NodeProto* GraphBuilder::node(const std::string& op, const nn::Layer& layer,
                                    const std::vector<std::string>& extra_inputs) {
  std::vector<std::string> inputs = {current};
  inputs.insert(inputs.end(), extra_inputs.begin(), extra_inputs.end());
  current = layer.name() + ".out";
  return add(op, layer.name(), inputs, current);
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

std::vector<std::string> GraphBuilder::weights(nn::Layer& layer) {
  std::vector<std::string> names;
  for (const nn::Parameter* p : layer.parameters()) {
    initializer(p->name, p->value);
    names.push_back(p->name);
  }
  return names;
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

void convert(nn::Layer& layer, GraphBuilder& g) {
  const nn::Shape in = g.shape;
  for (const auto* list : {&basic_conversions(), &residual_conversions()}) {
    for (const Conversion& c : *list) {
      if (!c(layer, g)) continue;
      g.shape = layer.output_shape(in);
      return;
    }
  }
  fail_input("ONNX export: layer ", layer.name(), " (", layer.describe(),
             ") has no ONNX conversion yet");
}

namespace {

bool conv2d(nn::Layer& layer, GraphBuilder& g) {
  auto* c = dynamic_cast<nn::Conv2d*>(&layer);
  if (!c) return false;
  onnx::NodeProto* n = g.node("Conv", layer, g.weights(layer));  // weight[, bias]
  ints(n, "kernel_shape", {c->kernel(), c->kernel()});
  ints(n, "strides", {c->stride(), c->stride()});
  ints(n, "pads", {c->pad(), c->pad(), c->pad(), c->pad()});
  return true;
}

bool linear(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::Linear*>(&layer)) return false;
  integer(g.node("Gemm", layer, g.weights(layer)), "transB", 1);  // y = x W^T + b
  return true;
}

// MaxPool or AveragePool (op) of a square window: Pool has kernel() and
// stride().
template <typename Pool>
bool pool2d(nn::Layer& layer, GraphBuilder& g, const char* op) {
  auto* p = dynamic_cast<Pool*>(&layer);
  if (!p) return false;
  onnx::NodeProto* n = g.node(op, layer);
  ints(n, "kernel_shape", {p->kernel(), p->kernel()});
  ints(n, "strides", {p->stride(), p->stride()});
  return true;
}

bool max_pool2d(nn::Layer& layer, GraphBuilder& g) {
  return pool2d<nn::MaxPool2d>(layer, g, "MaxPool");
}

bool avg_pool2d(nn::Layer& layer, GraphBuilder& g) {
  return pool2d<nn::AvgPool2d>(layer, g, "AveragePool");
}

bool relu(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::ReLU*>(&layer)) return false;
  g.node("Relu", layer);
  return true;
}

bool flatten(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::Flatten*>(&layer)) return false;
  integer(g.node("Flatten", layer), "axis", 1);
  return true;
}

bool log_softmax(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::LogSoftmax*>(&layer)) return false;
  integer(g.node("LogSoftmax", layer), "axis", 1);
  return true;
}

// Inference: dropout is the identity and leaves no node.
bool dropout(nn::Layer& layer, GraphBuilder&) {
  return dynamic_cast<nn::Dropout*>(&layer) != nullptr;
}

}  // namespace

const std::vector<Conversion>& basic_conversions() {
  static const std::vector<Conversion> all = {conv2d, linear,  max_pool2d,  avg_pool2d,
                                              relu,   flatten, log_softmax, dropout};
  return all;
}

}  // namespace lockstep::app::onnx_export
