#include "app/checkpoint/trained_model.h"

#include <cstdio>
#include <cstdlib>

#include "app/config/data_setup.h"
#include "common/error.h"
#include "data/image_io.h"
#include "nn/model_zoo.h"

namespace lockstep::app {
namespace {

template <typename T>
T meta_value(const nlohmann::json& meta, const char* key, const std::string& path) {
  try {
    return meta.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail_input(path, ": checkpoint metadata has no valid \"", key,
               "\" (written by another program or an older lockstep?)");
  }
}

}  // namespace

std::vector<NamedTensor> model_state(nn::Model& model) {
  std::vector<NamedTensor> out;
  for (nn::Parameter* p : model.parameters()) out.emplace_back(p->name, &p->value);
  for (nn::Buffer* b : model.buffers()) out.emplace_back(b->name, &b->value);
  return out;
}

ModelCard model_card(const TrainConfig& config, const data::Dataset& train, int64_t epoch) {
  return {config.model,
          config.layers,
          config.loss,
          config.dataset,
          train.class_names,
          {train.channels, train.height, train.width},
          train_normalization(config),
          epoch};
}

nlohmann::json json_floats(const std::vector<float>& values) {
  nlohmann::json out = nlohmann::json::array();
  char buf[32];
  for (float v : values) {
    std::snprintf(buf, sizeof(buf), "%.7g", static_cast<double>(v));
    out.push_back(std::strtod(buf, nullptr));
  }
  return out;
}

std::map<std::string, std::string> card_metadata(const ModelCard& card) {
  return {{"model", card.model},
          {"dataset", card.dataset},
          {"class_names", nlohmann::json(card.class_names).dump()},
          {"input_shape", nlohmann::json(card.input_shape).dump()},
          {"normalize_mean", json_floats(card.normalization.mean).dump()},
          {"normalize_std", json_floats(card.normalization.stddev).dump()},
          {"lockstep_version", LOCKSTEP_VERSION}};
}

namespace {

// Runs f; an InputError or Error it throws is rethrown naming the checkpoint
// (what it says came from the checkpoint's own values).
template <typename F>
auto naming_checkpoint(const std::string& path, F&& f) {
  try {
    return f();
  } catch (const InputError& e) {
    const std::string what = e.what();
    if (what.rfind(path, 0) == 0) throw;
    fail_input(path, ": ", what);
  }
}

}  // namespace

TrainedModel load_trained_model(const std::string& path) {
  const Checkpoint ckpt = load_checkpoint(path);
  const TrainConfig config =
      train_config_from_json(meta_value<nlohmann::json>(ckpt.meta, "config", path), path);
  TrainedModel t;
  ModelCard& card = t.card;
  card.model = config.model;
  card.layers = config.layers;
  card.loss = config.loss;
  card.dataset = config.dataset;
  card.class_names = meta_value<std::vector<std::string>>(ckpt.meta, "class_names", path);
  if (card.class_names.empty()) fail_input(path, ": checkpoint names no classes (class_names)");
  card.input_shape = meta_value<nn::Shape>(ckpt.meta, "input_shape", path);
  card.normalization = naming_checkpoint(path, [&] { return train_normalization(config); });
  card.epoch = ckpt.meta.contains("epoch") ? meta_value<int64_t>(ckpt.meta, "epoch", path) : 0;
  const nn::Shape& shape = card.input_shape;
  if (shape.size() != 3 || (shape[0] != 1 && shape[0] != 3) || shape[1] <= 0 || shape[2] <= 0) {
    fail_input(path, ": input_shape ", nn::shape_string(shape),
               " is not (1 or 3 channels, height, width)");
  }
  // As training's image_size allows: no product below overflows.
  if (shape[1] > data::kMaxImageSide || shape[2] > data::kMaxImageSide ||
      shape[1] * shape[2] > data::kMaxImagePixels) {
    fail_input(path, ": input_shape ", nn::shape_string(shape), " is larger than ",
               data::kMaxImageSide, " x ", data::kMaxImageSide, " or ", data::kMaxImagePixels,
               " pixels");
  }
  t.model = naming_checkpoint(path, [&] {
    return nn::build_model(config.model, config.layers, shape,
                           static_cast<int64_t>(card.class_names.size()), config.loss);
  });
  t.model->reset_parameters(config.seed, nn::Device::kCpu);
  // The checkpoint's model state only (optimizer state is not needed).
  const std::vector<NamedTensor> targets = model_state(*t.model);
  Checkpoint weights;
  for (const auto& [name, tensor] : targets) {
    if (const CheckpointEntry* e = ckpt.find(name)) weights.entries.push_back(*e);
  }
  restore_tensors(weights, path, targets);
  return t;
}

}  // namespace lockstep::app
