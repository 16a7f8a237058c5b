#include "app/formats/weights_io.h"

#include <fnmatch.h>

#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace lockstep::app {
namespace {

bool skipped(const std::string& name, const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  }
  return false;
}

void copy_into(nn::Tensor& tensor, const std::vector<float>& values) {
  if (tensor.device() == nn::Device::kCpu) {
    std::copy(values.begin(), values.end(), tensor.span().begin());
    return;
  }
  nn::Tensor host(tensor.shape(), nn::Device::kCpu);
  std::copy(values.begin(), values.end(), host.span().begin());
  tensor.copy_from(host);
}

}  // namespace

SafetensorsFile model_weights_file(nn::Model& model, const ModelCard& card) {
  SafetensorsFile file;
  file.metadata = card_metadata(card);
  file.metadata["format"] = "pt";
  file.metadata["layers"] = nlohmann::json(card.layers).dump();
  file.metadata["loss"] = card.loss;
  file.metadata["epoch"] = std::to_string(card.epoch);
  Checkpoint state = make_checkpoint({}, model_state(model));
  file.tensors = std::move(state.entries);
  return file;
}

void save_model_weights(const std::string& path, nn::Model& model, const ModelCard& card) {
  std::set<std::string> int64_names;  // PyTorch's integer buffers
  const SafetensorsFile file = model_weights_file(model, card);
  for (const CheckpointEntry& e : file.tensors) {
    if (e.name.ends_with(".num_batches_tracked")) int64_names.insert(e.name);
  }
  save_safetensors(path, file, int64_names);
}

void init_weights_from(nn::Model& model, const std::string& path,
                       const std::vector<std::string>& skip_patterns) {
  const SafetensorsFile file = load_safetensors(path);
  std::map<std::string, const CheckpointEntry*> entries;
  for (const CheckpointEntry& e : file.tensors) {
    if (!skipped(e.name, skip_patterns)) entries.emplace(e.name, &e);
  }
  const std::string hint = "; leave tensors out with --init-skip PATTERN";
  std::vector<std::pair<nn::Tensor*, const CheckpointEntry*>> copies;
  for (const auto& [name, tensor] : model_state(model)) {
    if (skipped(name, skip_patterns)) continue;
    const auto it = entries.find(name);
    if (it == entries.end())
      fail_input(path, ": has no tensor \"", name, "\" (this model has it with shape ",
                 nn::shape_string(tensor->shape()), ")", hint);
    if (it->second->shape != tensor->shape())
      fail_input(path, ": tensor \"", name, "\" has shape ", nn::shape_string(it->second->shape),
                 ", this model expects ", nn::shape_string(tensor->shape()), hint);
    copies.emplace_back(tensor, it->second);
    entries.erase(it);
  }
  if (!entries.empty()) {
    const CheckpointEntry& e = *entries.begin()->second;
    fail_input(path, ": tensor \"", e.name, "\" with shape ", nn::shape_string(e.shape),
               " is not in this model (", model.name(), ")", hint);
  }
  for (auto& [tensor, entry] : copies) copy_into(*tensor, entry->values);
}

}  // namespace lockstep::app
