#include "app/formats/onnx_export.h"

#include "common/error.h"

#if LOCKSTEP_HAVE_ONNX
#include <nlohmann/json.hpp>

#include "app/formats/onnx_graph.h"
#include "data/image_io.h"
#endif

namespace lockstep::app {

#if LOCKSTEP_HAVE_ONNX
namespace {

void value_info(onnx::ValueInfoProto* v, const std::string& name, const nn::Shape& dims) {
  v->set_name(name);
  auto* type = v->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = type->mutable_shape();
  shape->add_dim()->set_dim_param("N");
  for (int64_t d : dims) shape->add_dim()->set_dim_value(d);
}

void metadata(onnx::ModelProto& m, const ModelCard& card) {
  std::map<std::string, std::string> props = card_metadata(card);
  props["normalization"] = "input = (pixel / 255 - normalize_mean[c]) / normalize_std[c], NCHW";
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
  nn::Shape shape = {1};
  shape.insert(shape.end(), card.input_shape.begin(), card.input_shape.end());
  onnx_export::GraphBuilder g{graph, "input", shape};
  for (const auto& layer : model.layers()) onnx_export::convert(*layer, g);
  // The last node's output is renamed "output".
  if (graph->node_size() == 0) fail_input("ONNX export: model ", card.model, " has no layers");
  graph->mutable_node(graph->node_size() - 1)->set_output(0, "output");
  value_info(graph->add_output(), "output", {model.output_size()});
  std::string bytes;
  if (!m.SerializeToString(&bytes)) fail_input("ONNX export: cannot serialise the model");
  data::write_text_atomically(path, bytes);
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
