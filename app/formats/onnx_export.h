// The inference graph of a trained model as an ONNX file (opset
// kOnnxOpset), built with the protobuf classes Debian's libonnx-dev
// generates from onnx.proto.
//
// Graph: input "input" (N, C, H, W) float, already normalised as in
// training; output "output" (N, classes): what the model computes in
// evaluation mode (logits, or log-probabilities for models that end in
// log_softmax). Dropout is left out. Weights are initializers named like
// the state_dict. metadata_props: model, dataset, class_names, input_shape,
// normalize_mean, normalize_std (x = (pixel / 255 - mean[c]) / std[c]),
// lockstep_version.
#pragma once

#include <string>

#include "app/checkpoint/trained_model.h"

namespace lockstep::app {

inline constexpr int kOnnxOpset = 13;

// False when lockstep was built without libonnx-dev.
bool onnx_export_available();

// Writes the ONNX file atomically. Throws InputError naming the layer when
// the model has a layer type without an ONNX conversion, and when lockstep
// was built without ONNX support.
void save_onnx(const std::string& path, nn::Model& model, const ModelCard& card);

}  // namespace lockstep::app
