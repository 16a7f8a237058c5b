#include "app/run/reproducible.h"

#include "app/run/loss_scaling.h"
#include "app/run/sha256.h"
#include "common/error.h"

namespace lockstep::app {

void check_reproducible(const TrainConfig& c, const nn::Model& model, nn::Device device) {
  if (!c.reproducible) return;
  if (device != nn::Device::kCpu) {
    fail_input(origin_prefix(c, {"reproducible", "device"}),
               "config key reproducible = true runs on the CPU backend only (device = cpu): the "
               "GPU path has no exact gradient sums");
  }
  if (loss_scaling_on(c)) {
    fail_input(origin_prefix(c, {"reproducible", "loss_scaling", "precision"}),
               "config key reproducible = true needs loss_scaling = off (a skipped step depends "
               "on rounding)");
  }
  if (c.lr_scaling != nn::LrScaling::kNone) {
    fail_input(origin_prefix(c, {"reproducible", "lr_scaling"}),
               "config key reproducible = true needs lr_scaling = \"none\" (not \"",
               nn::to_string(c.lr_scaling),
               "\"): the global batch, not the number of ranks, sets the learning rate");
  }
  if (c.compression != "none") {
    fail_input(origin_prefix(c, {"reproducible", "compression"}),
               "config key reproducible = true needs compression = \"none\" (not \"", c.compression,
               "\"): gradients travel as exact 64-bit sums");
  }
  if (!model.buffers().empty() && !c.sync_batchnorm) {
    fail_input(origin_prefix(c, {"reproducible", "sync_batchnorm", "model"}),
               "config key reproducible = true: model ", c.model,
               " has BatchNorm layers, which need sync_batchnorm = true (per-rank statistics "
               "depend on the number of ranks)");
  }
}

int64_t reproducible_batches(int64_t dataset_size, int64_t batch_size, int world_size) {
  return dataset_size / (batch_size * world_size);
}

std::pair<int64_t, std::string> derive_batch_size(int64_t stored_batch, int64_t stored_ranks,
                                                  int world_size, const std::string& path) {
  const int64_t global = stored_batch * stored_ranks;
  if (global % world_size != 0) {
    fail_input(path, ": written by ", stored_ranks, " ranks at batch_size ", stored_batch,
               " (global batch ", global, "), which ", world_size,
               " ranks cannot divide: resume on a number of ranks that divides ", global);
  }
  const int64_t batch = global / world_size;
  return {batch,
          detail::concat("resume: world size changed from ", stored_ranks, " to ", world_size,
                         " ranks: per-rank batch ", batch, " = global batch ", global, " (",
                         stored_batch, " x ", stored_ranks, ") / ", world_size)};
}

std::string state_digest(const std::vector<std::pair<std::string, nn::Tensor*>>& state,
                         int64_t optimizer_steps) {
  Sha256 sha;
  for (const auto& [name, tensor] : state) {
    sha.update(name.data(), name.size() + 1);
    for (int64_t d : tensor->shape()) sha.update(&d, sizeof d);
    sha.update(tensor->data(), static_cast<size_t>(tensor->numel()) * sizeof(float));
  }
  sha.update(&optimizer_steps, sizeof optimizer_steps);
  return sha.hex();
}

std::string metrics_digest(const std::vector<EpochResult>& history) {
  Sha256 sha;
  for (const EpochResult& r : history) {
    const double values[] = {r.train_loss, r.train_accuracy, r.test_loss, r.test_accuracy,
                             r.val_loss,   r.val_accuracy,   r.lr};
    const int64_t counts[] = {r.epoch, r.train_samples, r.test_samples};
    sha.update(values, sizeof values);
    sha.update(counts, sizeof counts);
  }
  return sha.hex();
}

}  // namespace lockstep::app
