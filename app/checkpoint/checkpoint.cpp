// Checkpoint in memory: building one from named tensors and restoring named
// tensors from one. Files: checkpoint_write.cpp, checkpoint_read.cpp; run
// directories: checkpoint_store.cpp.
#include "app/checkpoint/checkpoint.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/error.h"

namespace lockstep::app {

const CheckpointEntry* Checkpoint::find(const std::string& name) const {
  for (const CheckpointEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void Checkpoint::add(std::string name, const nn::Tensor& tensor) {
  LOCKSTEP_CHECK(find(name) == nullptr, "checkpoint entry \"", name, "\" added twice");
  LOCKSTEP_CHECK(tensor.numel() == nn::shape_numel(tensor.shape()), "tensor \"", name,
                 "\" is unallocated");
  CheckpointEntry e{std::move(name), tensor.shape(), {}};
  if (tensor.device() == nn::Device::kCpu) {
    e.values.assign(tensor.span().begin(), tensor.span().end());
  } else {
    nn::Tensor host(tensor.shape(), nn::Device::kCpu);
    host.copy_from(tensor);
    e.values.assign(host.span().begin(), host.span().end());
  }
  entries.push_back(std::move(e));
}

Checkpoint make_checkpoint(nlohmann::json meta, const std::vector<NamedTensor>& tensors) {
  Checkpoint checkpoint;
  checkpoint.meta = std::move(meta);
  checkpoint.entries.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    LOCKSTEP_CHECK(tensor != nullptr, "tensor \"", name, "\" is null");
    checkpoint.add(name, *tensor);
  }
  return checkpoint;
}

void restore_tensors(const Checkpoint& checkpoint, const std::string& path,
                     const std::vector<NamedTensor>& targets) {
  std::unordered_map<std::string_view, const CheckpointEntry*> entries;
  for (const CheckpointEntry& e : checkpoint.entries) entries.emplace(e.name, &e);
  std::unordered_set<std::string_view> wanted;
  std::vector<std::string> problems;
  for (const auto& [name, tensor] : targets) {
    LOCKSTEP_CHECK(tensor != nullptr, "restore target \"", name, "\" is null");
    LOCKSTEP_CHECK(wanted.insert(name).second, "restore target \"", name, "\" listed twice");
    const auto it = entries.find(name);
    if (it == entries.end()) {
      problems.push_back("has no entry \"" + name + "\" (this model has it with shape " +
                         nn::shape_string(tensor->shape()) + ")");
    } else if (it->second->shape != tensor->shape()) {
      problems.push_back("has entry \"" + name + "\" with shape " +
                         nn::shape_string(it->second->shape) + ", this model expects " +
                         nn::shape_string(tensor->shape()));
    }
  }
  for (const CheckpointEntry& e : checkpoint.entries) {
    if (!wanted.contains(e.name)) {
      problems.push_back("has entry \"" + e.name + "\" with shape " + nn::shape_string(e.shape) +
                         " that this model does not have");
    }
  }
  if (!problems.empty()) {
    const auto model = checkpoint.meta.find("model");
    const std::string saved_from =
        model != checkpoint.meta.end() && model->is_string()
            ? " (it was saved from model \"" + model->get<std::string>() + "\")"
            : "";
    const std::string more =
        problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                  (problems.size() > 2 ? " more differences)" : " more difference)")
                            : "";
    fail_input("checkpoint ", path, " does not match this model: it ", problems.front(), more,
               saved_from, "; resume with the model and optimizer it was saved with");
  }
  for (const auto& [name, tensor] : targets) {
    const CheckpointEntry& e = *entries.at(name);
    if (tensor->device() == nn::Device::kCpu) {
      std::copy(e.values.begin(), e.values.end(), tensor->span().begin());
    } else {
      nn::Tensor host(e.shape, nn::Device::kCpu);
      std::copy(e.values.begin(), e.values.end(), host.span().begin());
      tensor->copy_from(host);
    }
  }
}

}  // namespace lockstep::app
