#include "data/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "common/error.h"
#include "nn/counter_rng.h"

namespace lockstep::data {
namespace {

constexpr uint64_t kSamplerStream = 0x73616d706c657231ULL;  // "sampler1"

}  // namespace

std::vector<int64_t> permutation(int64_t n, uint64_t key) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  const uint64_t stream = nn::hash_combine(kSamplerStream, key);
  for (int64_t i = n - 1; i > 0; --i) {
    // 64 random bits reduced to [0, i]: the modulo bias is below 2^-32 for
    // any dataset that fits in memory.
    const uint64_t bits = nn::mix64(nn::hash_combine(stream, static_cast<uint64_t>(i)));
    const auto j = static_cast<int64_t>(bits % static_cast<uint64_t>(i + 1));
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
  }
  return perm;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  if (world_size < 1) fail_input("sampler: world size ", world_size, " must be at least 1");
  if (rank < 0 || rank >= world_size) {
    fail_input("sampler: rank ", rank, " is outside [0, ", world_size, ")");
  }
  if (dataset_size < 0) fail_input("sampler: dataset size ", dataset_size, " is negative");
  build();
}

DistributedSampler DistributedSampler::for_evaluation(int64_t dataset_size, int rank,
                                                      int world_size) {
  DistributedSampler sampler(dataset_size, rank, world_size, false, 0, false);
  sampler.evaluation_ = true;
  sampler.build();
  return sampler;
}

void DistributedSampler::set_epoch(int64_t epoch) {
  if (epoch == epoch_) return;
  epoch_ = epoch;
  build();
}

void DistributedSampler::build() {
  const int64_t n = dataset_size_;
  const int64_t r = world_size_;
  indices_.clear();
  if (evaluation_) {
    total_size_ = n;
    padding_ = 0;
    for (int64_t i = rank_; i < n; i += r) indices_.push_back(i);
    return;
  }
  const int64_t per_rank = drop_last_ ? n / r : (n + r - 1) / r;
  total_size_ = per_rank * r;
  padding_ = std::max<int64_t>(total_size_ - n, 0);
  if (per_rank == 0) return;
  std::vector<int64_t> order;
  if (shuffle_) {
    order = permutation(n, seed_ + static_cast<uint64_t>(epoch_));
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Padding repeats the order from its start (wrapping): element i of the
  // padded order is order[i % n]. Only this rank's stride is materialised.
  indices_.reserve(static_cast<size_t>(per_rank));
  for (int64_t i = rank_; i < total_size_; i += r) indices_.push_back(order[i % n]);
}

int64_t DistributedSampler::steps(int64_t batch_size, bool drop_last_batch) const {
  if (batch_size < 1) fail_input("sampler: batch size ", batch_size, " must be at least 1");
  const int64_t n = num_samples();
  return drop_last_batch ? n / batch_size : (n + batch_size - 1) / batch_size;
}

}  // namespace lockstep::data
