// Building models: the zoo of reference networks and sequential models
// written as a layer list in a config file.
//
// A layer is written as its type followed by key=value arguments
// ("conv2d out=10 kernel=5"); input sizes are inferred from the previous
// layer. The types and their arguments are the layer registry's
// (nn/layer_registry.h; `lockstep options --layers` lists them).
// A layer may be given a name with "name: " in front ("fc1: linear out=50");
// otherwise it is named after its type and position ("linear3").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/model.h"

namespace lockstep::nn {

// Names accepted by build_model (besides "custom").
std::vector<std::string> zoo_model_names();

// Builds a zoo model by name, or, when name is "custom", the model described
// by layer_specs. input_shape is one sample's (C, H, W). A zoo model's last
// linear layer gets num_classes outputs; a custom model's output must match
// num_classes. loss: "auto" (nll after log_softmax, else
// cross_entropy), "nll" or "cross_entropy". Throws InputError naming the
// faulty spec, layer or size.
std::unique_ptr<Model> build_model(const std::string& name,
                                   const std::vector<std::string>& layer_specs,
                                   const Shape& input_shape, int64_t num_classes,
                                   const std::string& loss = "auto");

// The layer list of a zoo model, in the syntax above (num_classes: the
// output size of the models that take it from the data set).
std::vector<std::string> zoo_layer_specs(const std::string& name, int64_t num_classes = 10);

}  // namespace lockstep::nn
