// The reproducible mode (config key `reproducible`, docs/reproducible.md)
// at the trainer's edge: what it refuses, how many steps an epoch takes,
// how a resume on another world size derives the per-rank batch, and the
// digests that runs on different numbers of ranks compare.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "app/config/config.h"
#include "app/run/report.h"
#include "nn/model.h"

namespace lockstep::app {

// InputError (one line, naming the key) for what the mode cannot keep
// bit-identical across world sizes: a GPU backend, loss scaling, lr
// scaling by the number of ranks, 16-bit wire compression, BatchNorm
// without sync_batchnorm.
void check_reproducible(const TrainConfig& config, const nn::Model& model, nn::Device device);

// Steps of an epoch: only whole global batches (batch_size x ranks), so
// every step sees the same samples on any number of ranks (the sampler's
// padding, which depends on the world size, is never reached).
int64_t reproducible_batches(int64_t dataset_size, int64_t batch_size, int world_size);

// Per-rank batch on resume: the checkpoint's global batch (stored batch x
// stored ranks) over the current ranks. Returns the batch and a line that
// says how it was derived; InputError when the ranks do not divide it.
std::pair<int64_t, std::string> derive_batch_size(int64_t stored_batch, int64_t stored_ranks,
                                                  int world_size, const std::string& path);

// SHA-256 of the state: every tensor's name, shape and bytes (host
// tensors), and the optimizer's step count.
std::string state_digest(const std::vector<std::pair<std::string, nn::Tensor*>>& state,
                         int64_t optimizer_steps);
// SHA-256 of the per-epoch losses, accuracies and sample counts (bits).
std::string metrics_digest(const std::vector<EpochResult>& history);

}  // namespace lockstep::app
