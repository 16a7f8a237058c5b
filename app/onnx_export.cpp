#include "app/onnx_export.h"

#include "nn/error.h"

#if LOCKSTEP_HAVE_ONNX
#include <onnx/onnx_pb.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "data/image_io.h"
#include "nn/layers/activations.h"
#include "nn/layers/conv2d.h"
#include "nn/layers/dropout.h"
#include "nn/layers/linear.h"
#include "nn/layers/max_pool2d.h"
#endif

namespace lockstep::app {

#if LOCKSTEP_HAVE_ONNX
namespace {

// The graph being built and the name of the value the next node reads.
struct GraphBuilder {
  onnx::GraphProto* graph;
  std::string current;

  onnx::NodeProto* node(const std::string& op, const nn::Layer& layer,
                        std::vector<std::string> extra_inputs = {}) {
    onnx::NodeProto* n = graph->add_node();
    n->set_op_type(op);
    n->set_name(layer.name());
    n->add_input(current);
    for (const std::string& in : extra_inputs) n->add_input(in);
    current = layer.name() + ".out";
    n->add_output(current);
    return n;
  }
  void weights(nn::Layer& layer) {
    for (const nn::Parameter* p : layer.parameters()) {
      onnx::TensorProto* t = graph->add_initializer();
      t->set_name(p->name);
      t->set_data_type(onnx::TensorProto::FLOAT);
      for (int64_t d : p->value.shape()) t->add_dims(d);
      nn::Tensor host(p->value.shape(), nn::Device::kCpu);
      host.copy_from(p->value);
      t->set_raw_data(host.data(), sizeof(float) * static_cast<size_t>(host.numel()));
    }
  }
};

void ints(onnx::NodeProto* n, const char* name, std::vector<int64_t> values) {
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

// One conversion per layer type: true when it took the layer. A new layer
// type adds one function here and one entry in conversions().
using Conversion = std::function<bool(nn::Layer&, GraphBuilder&)>;

bool conv2d(nn::Layer& layer, GraphBuilder& g) {
  auto* c = dynamic_cast<nn::Conv2d*>(&layer);
  if (!c) return false;
  g.weights(layer);
  onnx::NodeProto* n = g.node("Conv", layer, {layer.name() + ".weight", layer.name() + ".bias"});
  ints(n, "kernel_shape", {c->kernel(), c->kernel()});
  ints(n, "strides", {c->stride(), c->stride()});
  ints(n, "pads", {c->pad(), c->pad(), c->pad(), c->pad()});
  return true;
}

bool linear(nn::Layer& layer, GraphBuilder& g) {
  if (!dynamic_cast<nn::Linear*>(&layer)) return false;
  g.weights(layer);
  onnx::NodeProto* n = g.node("Gemm", layer, {layer.name() + ".weight", layer.name() + ".bias"});
  integer(n, "transB", 1);  // y = x W^T + b
  return true;
}

bool max_pool2d(nn::Layer& layer, GraphBuilder& g) {
  auto* p = dynamic_cast<nn::MaxPool2d*>(&layer);
  if (!p) return false;
  onnx::NodeProto* n = g.node("MaxPool", layer);
  ints(n, "kernel_shape", {p->kernel(), p->kernel()});
  ints(n, "strides", {p->stride(), p->stride()});
  return true;
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

const std::vector<Conversion>& conversions() {
  static const std::vector<Conversion> all = {conv2d,  linear,      max_pool2d, relu,
                                              flatten, log_softmax, dropout};
  return all;
}

// Appends layer's nodes (a composite's conversion calls this for each child).
void convert(nn::Layer& layer, GraphBuilder& g) {
  for (const Conversion& c : conversions()) {
    if (c(layer, g)) return;
  }
  fail_input("ONNX export: layer ", layer.name(), " (", layer.describe(),
             ") has no ONNX conversion yet");
}

void value_info(onnx::ValueInfoProto* v, const std::string& name, const nn::Shape& dims) {
  v->set_name(name);
  auto* type = v->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("N");
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void metadata(onnx::ModelProto& m, const ModelCard& card) {
  const std::vector<std::pair<std::string, std::string>> props = {
      {"model", card.model},
      {"dataset", card.dataset},
      {"class_names", nlohmann::json(card.class_names).dump()},
      {"input_shape", nlohmann::json(card.input_shape).dump()},
      {"normalize_mean", json_floats(card.normalization.mean).dump()},
      {"normalize_std", json_floats(card.normalization.stddev).dump()},
      {"normalization", "input = (pixel / 255 - normalize_mean[c]) / normalize_std[c], NCHW"},
      {"lockstep_version", LOCKSTEP_VERSION}};
  for (const auto& [k, v] : props) {
    auto* p = m.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
}

}  // namespace

bool onnx_export_available() {
  return true;
}

void save_onnx(const std::string& path, nn::Model& model, const ModelCard& card) {
  onnx::ModelProto m;
  m.set_ir_version(7);  // the IR version of opset 13
  m.set_producer_name("lockstep");
  m.set_producer_version(LOCKSTEP_VERSION);
  m.set_doc_string("lockstep " + card.model + " trained on " + card.dataset);
  m.add_opset_import()->set_version(kOnnxOpset);
  metadata(m, card);
  onnx::GraphProto* graph = m.mutable_graph();
  graph->set_name(card.model);
  value_info(graph->add_input(), "input", card.input_shape);
  GraphBuilder g{graph, "input"};
  for (const auto& layer : model.layers()) convert(*layer, g);
  // The last node's output is renamed "output".
  if (graph->node_size() == 0) fail_input("ONNX export: model ", card.model, " has no layers");
  graph->mutable_node(graph->node_size() - 1)->set_output(0, "output");
  value_info(graph->add_output(), "output", {model.output_size()});
  std::string bytes;
  if (!m.SerializeToString(&bytes)) fail_input("ONNX export: cannot serialise the model");
  data::write_file_atomically(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

#else

bool onnx_export_available() {
  return false;
}

void save_onnx(const std::string& path, nn::Model&, const ModelCard&) {
  fail_input("cannot write ", path,
             ": this lockstep was built without ONNX support; install libonnx-dev and "
             "libprotobuf-dev (scripts/setup.sh) and rebuild");
}

#endif

}  // namespace lockstep::app
