// DistributedSampler with PyTorch's semantics
// (torch/utils/data/distributed.py), and an evaluation sharding that counts
// every sample exactly once.
//
// Training mode, N samples, R ranks:
//   perm = shuffle ? permutation(N, seed + epoch) : 0..N-1   (same on all ranks)
//   drop_last = false: num_samples = ceil(N / R), total = num_samples * R,
//                      perm padded to total with perm[0], perm[1], ... (wrapping)
//   drop_last = true:  num_samples = floor(N / R), perm cut to total
//   rank r takes perm[r], perm[r + R], perm[r + 2R], ... (< total)
// Every rank gets the same num_samples, so every rank takes the same number
// of steps. Call set_epoch(e) before each epoch, or the order repeats.
//
// Evaluation mode (for_evaluation): no shuffle, no padding, no dropping: rank
// r takes r, r + R, ... < N, so ranks may differ by one sample; reduce
// metric sums and counts, not per-rank means.
#pragma once

#include <cstdint>
#include <vector>

namespace lockstep::data {

// A permutation of 0..n-1 (Fisher-Yates driven by the counter RNG), a pure
// function of (n, key): identical on every rank and machine.
std::vector<int64_t> permutation(int64_t n, uint64_t key);

class DistributedSampler {
 public:
  // Throws InputError unless 0 <= rank < world_size and dataset_size >= 0.
  DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);

  // Unpadded, unshuffled shard for evaluation: rank r takes r, r + R, ... < N.
  static DistributedSampler for_evaluation(int64_t dataset_size, int rank, int world_size);

  // Recomputes indices() for this epoch (permutation key seed + epoch).
  void set_epoch(int64_t epoch);
  int64_t epoch() const { return epoch_; }

  // This rank's dataset indices for the current epoch, in order.
  const std::vector<int64_t>& indices() const { return indices_; }
  int64_t num_samples() const { return static_cast<int64_t>(indices_.size()); }
  // num_samples * world_size in training mode (with padding, after dropping);
  // dataset_size in evaluation mode.
  int64_t total_size() const { return total_size_; }
  // Samples repeated to pad the last round (0 with drop_last or evaluation).
  int64_t padding() const { return padding_; }
  // Batches this rank takes: ceil(num_samples / batch_size), or floor when
  // drop_last_batch (the loader's drop_last, separate from the sampler's).
  int64_t steps(int64_t batch_size, bool drop_last_batch = false) const;

  int64_t dataset_size() const { return dataset_size_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }
  bool evaluation() const { return evaluation_; }

 private:
  void build();

  int64_t dataset_size_;
  int rank_, world_size_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  bool evaluation_ = false;
  int64_t epoch_ = 0;
  int64_t total_size_ = 0;
  int64_t padding_ = 0;
  std::vector<int64_t> indices_;
};

}  // namespace lockstep::data
