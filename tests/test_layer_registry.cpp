// The layer registry (nn/layer_registry.h): every registered type is seen by
// the spec parser, the ONNX exporter and the generated docs, and builds the
// parameters its entry names; an unknown type is refused naming the known
// ones.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "app/formats/onnx_export.h"
#include "common/error.h"
#include "nn/layer_registry.h"
#include "nn/layer_spec.h"
#include "nn/model.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep::nn {
namespace {

const Shape kImage = {2, 3, 8, 8};

// The type's usage line with every required argument ("out=", "kernel=")
// given 3: "conv2d out=3 kernel=3".
std::string minimal_spec(const LayerType& type) {
  std::istringstream words(type.usage);
  std::string word, spec;
  words >> spec;
  while (words >> word) {
    if (word.front() != '[' && word.back() == '=') spec += " " + word + "3";
  }
  return spec;
}

// The minimal layer of a type, named "l", with its parameters created.
std::unique_ptr<Layer> build(const LayerType& type, const Shape& in) {
  const std::string text = minimal_spec(type);
  auto layer = make_layer(parse_spec(text), text, in);
  layer->set_name("l");
  layer->reset_parameters(1, Device::kCpu);
  return layer;
}

// A model of one layer of the type and a flatten, in the order its input asks.
std::unique_ptr<Model> one_layer_model(const LayerType& type) {
  const bool image = type.input == LayerInput::kImage;
  auto flatten = build(*find_layer_type("flatten"), kImage);
  flatten->set_name("flat");
  std::vector<std::unique_ptr<Layer>> layers;
  if (image) layers.push_back(build(type, kImage));
  layers.push_back(std::move(flatten));
  if (!image) layers.push_back(build(type, {2, 3 * 8 * 8}));
  return std::make_unique<Model>(type.name, Shape{3, 8, 8}, std::move(layers),
                                 LossKind::kCrossEntropy);
}

TEST(LayerRegistry, TheParserBuildsEveryTypeWithTheParametersItsEntryNames) {
  ASSERT_GE(layer_types().size(), 12u);
  for (const LayerType* type : layer_types()) {
    SCOPED_TRACE(type->name);
    EXPECT_EQ(find_layer_type(type->name), type);
    const Shape in = type->input == LayerInput::kFlat ? Shape{2, 12} : kImage;
    auto layer = build(*type, in);
    std::vector<std::string> names;
    for (const Parameter* p : layer->parameters()) names.push_back(p->name);
    std::vector<std::string> expected;
    for (const std::string& p : type->parameters) expected.push_back("l." + p);
    EXPECT_EQ(names, expected);
  }
}

TEST(LayerRegistry, EachLeafLayerIsClaimedByItsOwnTypeAlone) {
  for (const LayerType* type : layer_types()) {
    if (!type->onnx) continue;
    auto layer = build(*type, type->input == LayerInput::kFlat ? Shape{2, 12} : kImage);
    for (const LayerType* other : layer_types()) {
      if (!other->onnx) continue;
      // dropout and dropout2d are one class: either entry gives its nodes.
      const bool same = other == type ||
                        (type->name.starts_with("dropout") && other->name.starts_with("dropout"));
      EXPECT_EQ(other->onnx(*layer).has_value(), same) << type->name << " by " << other->name;
    }
  }
}

TEST(LayerRegistry, AnUnknownTypeIsRefusedNamingTheKnownOnes) {
  const std::string text = "c1: convv2d out=4";
  try {
    make_layer(parse_spec(text), text, kImage);
    FAIL() << "convv2d was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("layer \"c1: convv2d out=4\": unknown layer type \"convv2d\""),
              std::string::npos)
        << what;
    for (const LayerType* type : layer_types()) {
      EXPECT_NE(what.find(type->name), std::string::npos) << type->name;
    }
  }
}

TEST(LayerRegistry, AnImageTypeOnAFlatInputSaysWhatItNeeds) {
  const std::string text = "conv2d out=4 kernel=3";
  try {
    make_layer(parse_spec(text), text, {2, 12});
    FAIL() << "conv2d took a flat input";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d needs an image input (N, C, H, W), got"),
              std::string::npos)
        << e.what();
  }
}

TEST(LayerRegistry, TheGeneratedDocsListEveryTypeWithItsUsage) {
  const std::string markdown = layer_types_markdown();
  const auto r = testing::run_lockstep("options --layers");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find(markdown), std::string::npos) << r.output;
  const std::string readme =
      testing::read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/configs/README.md");
  for (const LayerType* type : layer_types()) {
    SCOPED_TRACE(type->name);
    EXPECT_FALSE(type->summary.empty());
    EXPECT_NE(markdown.find("- `" + type->usage + "`: " + type->summary), std::string::npos);
    EXPECT_NE(readme.find("`" + type->usage + "`"), std::string::npos);
  }
}

TEST(LayerRegistry, TheOnnxExporterWritesEveryLeafTypeAsItsEntrySays) {
  if (!app::onnx_export_available()) GTEST_SKIP() << "built without libonnx-dev";
  testing::ScratchDir dir;
  for (const LayerType* type : layer_types()) {
    if (!type->onnx) continue;
    SCOPED_TRACE(type->name);
    auto model = one_layer_model(*type);
    const std::string path = dir.file(type->name + ".onnx");
    app::save_onnx(path, *model, {.model = "custom", .input_shape = {3, 8, 8}});
    const std::string bytes = testing::read_file(path);
    Layer& layer = *model->layers()[type->input == LayerInput::kImage ? 0 : 1];
    const auto nodes = type->onnx(layer);
    ASSERT_TRUE(nodes.has_value());
    for (const OnnxNode& node : *nodes) {
      EXPECT_NE(bytes.find(node.op), std::string::npos) << node.op;
      for (const std::string& name : node.initializers) {
        EXPECT_NE(bytes.find(name), std::string::npos) << name;
      }
    }
    for (const Parameter* p : layer.parameters()) {
      EXPECT_NE(bytes.find(p->name), std::string::npos) << p->name;
    }
  }
}

// A layer no registry entry claims (and no composite): the exporter names it.
class Unregistered final : public Layer {
 public:
  std::string describe() const override { return "unregistered"; }
  Shape output_shape(const Shape& input) const override { return input; }
  void forward(Backend&, const Tensor&, Tensor&, const ForwardContext&) override {}
  void backward(Backend&, const Tensor&, const Tensor&, const Tensor&, Tensor*) override {}
};

TEST(LayerRegistry, TheOnnxExporterNamesALayerWithoutAnEntry) {
  if (!app::onnx_export_available()) GTEST_SKIP() << "built without libonnx-dev";
  std::vector<std::unique_ptr<Layer>> layers;
  layers.push_back(std::make_unique<Unregistered>());
  layers.back()->set_name("odd");
  Model model("odd", {12}, std::move(layers), LossKind::kCrossEntropy);
  testing::ScratchDir dir;
  try {
    app::save_onnx(dir.file("odd.onnx"), model, {.model = "custom", .input_shape = {12}});
    FAIL() << "exported a layer without a conversion";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("layer odd (unregistered) has no ONNX conversion"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace lockstep::nn
