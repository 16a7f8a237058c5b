// Model weights in and out of lockstep as safetensors files with PyTorch's
// state_dict names, shapes and layouts (Conv2d weight (out, in, kh, kw),
// Linear weight (out, in)), so `model.load_state_dict(load_file(path))`
// works on the matching PyTorch module, and a PyTorch `save_file(
// model.state_dict())` starts a lockstep run.
#pragma once

#include <string>
#include <vector>

#include "app/checkpoint/trained_model.h"
#include "app/formats/safetensors.h"
#include "nn/model.h"

namespace lockstep::app {

// __metadata__ keys: format ("pt"), lockstep_version, model, layers (JSON
// list), loss, dataset, class_names (JSON list), input_shape (JSON [C, H,
// W]), normalize_mean and normalize_std (JSON lists, pixels in [0, 1]),
// epoch.
SafetensorsFile model_weights_file(nn::Model& model, const ModelCard& card);
// Writes model_weights_file atomically to path.
void save_model_weights(const std::string& path, nn::Model& model, const ModelCard& card);

// Copies the tensors of the safetensors file at path into the model's state
// (any float dtype; F16/BF16 are widened). Model tensors whose name matches
// one of skip_patterns (shell wildcards: "fc2.*") keep their values, and file
// tensors matching them are ignored. Any other model tensor missing from the
// file, file tensor the model lacks, or shape difference is an InputError
// naming path, the tensor and both shapes; nothing is changed then.
void init_weights_from(nn::Model& model, const std::string& path,
                       const std::vector<std::string>& skip_patterns);

}  // namespace lockstep::app
