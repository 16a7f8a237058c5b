// A model rebuilt from a checkpoint for inference and export: its stored
// config, class names, input shape and normalisation, with the checkpoint's
// weights on the CPU (no optimizer, no data set is read).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app/checkpoint/checkpoint.h"
#include "app/config/config.h"
#include "data/dataset.h"
#include "data/transform.h"
#include "nn/model.h"

namespace lockstep::app {

// What travels with exported weights: enough to rebuild the model and feed
// it the inputs it was trained on.
struct ModelCard {
  std::string model;                // zoo name or "custom"
  std::vector<std::string> layers;  // custom: the layer list
  std::string loss;                 // the config's loss key
  std::string dataset;
  std::vector<std::string> class_names;
  nn::Shape input_shape;  // (C, H, W)
  data::Normalization normalization;
  int64_t epoch = 0;  // epochs trained
};

// The card of a model trained with config on train (epochs trained: epoch).
ModelCard model_card(const TrainConfig& config, const data::Dataset& train, int64_t epoch);

struct TrainedModel {
  ModelCard card;
  std::unique_ptr<nn::Model> model;  // on the CPU, weights restored
};

// Per-channel values as a JSON list of their shortest decimal forms
// ("[0.1307]", not the float's double expansion).
nlohmann::json json_floats(const std::vector<float>& values);

// The card as the string metadata exported files carry: model, dataset,
// class_names, input_shape, normalize_mean, normalize_std (JSON text where
// not a plain string) and lockstep_version.
std::map<std::string, std::string> card_metadata(const ModelCard& card);

// Throws InputError naming path when it is not a lockstep checkpoint, lacks
// the metadata (config, class_names, input_shape) or its weights do not fit.
TrainedModel load_trained_model(const std::string& path);

// The model's state as PyTorch's state_dict names it: every parameter (and
// buffer), in forward order.
std::vector<NamedTensor> model_state(nn::Model& model);

}  // namespace lockstep::app
