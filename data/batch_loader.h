// BatchLoader: turns one rank's index list for one epoch into normalised
// float batches, preparing the next batch on one background thread.
//
//   images is (B, C, H, W) float on the host, B = batch_size except maybe
//   the last batch; labels and sample_ids have B entries.
//
// One worker thread per loader (one loader per epoch), double buffered: the
// worker fills a batch while the consumer uses the previous one, and next()
// swaps storage with the caller's Batch, so nothing is allocated in the
// steady state. An exception on the worker (a bad index) is rethrown by
// next(). The destructor stops and joins the worker even when the consumer
// stops early.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "data/dataset.h"
#include "data/transform.h"
#include "nn/tensor.h"

namespace lockstep::data {

struct Batch {
  nn::Tensor images;                // (B, C, H, W) normalised
  std::vector<int32_t> labels;      // B
  std::vector<int64_t> sample_ids;  // B dataset indices
  int64_t index = -1;               // batch number within the epoch
  int64_t size() const { return static_cast<int64_t>(labels.size()); }
};

struct BatchLoaderOptions {
  int64_t batch_size = 64;
  Normalization normalization;
  Augmentation augmentation;  // keyed by (seed, epoch, sample id)
  uint64_t seed = 0;
  int64_t epoch = 0;
  int64_t start_batch = 0;       // resume mid-epoch: skip this many batches
  bool drop_last_batch = false;  // drop a last, smaller batch
  int64_t prefetch = 2;          // batches prepared ahead (>= 1)
};

// Fills out with the samples `ids` of dataset, synchronously (the worker's
// body; also handy for evaluation or tests). Throws InputError on an index
// outside the dataset.
void fill_batch(const Dataset& dataset, std::span<const int64_t> ids,
                const PixelTransform& transform, uint64_t seed, int64_t epoch, Batch& out);

class BatchLoader {
 public:
  // dataset must outlive the loader. indices is this rank's order for the
  // epoch (DistributedSampler::indices()). Throws InputError on bad options.
  BatchLoader(const Dataset& dataset, std::vector<int64_t> indices, BatchLoaderOptions options);
  ~BatchLoader();
  BatchLoader(const BatchLoader&) = delete;
  BatchLoader& operator=(const BatchLoader&) = delete;

  // The next batch, swapped into out (out's old storage is reused). Returns
  // false at the end of the epoch. Rethrows an exception from the worker.
  bool next(Batch& out);

  // Batches in the whole epoch (including those skipped by start_batch).
  int64_t num_batches() const { return num_batches_; }

 private:
  void run();

  const Dataset& dataset_;
  const std::vector<int64_t> indices_;
  const BatchLoaderOptions options_;
  const PixelTransform transform_;
  int64_t num_batches_ = 0;

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> ready_;  // filled, in order
  std::vector<Batch> free_;  // storage for the worker to fill
  bool stop_ = false;
  bool done_ = false;  // worker finished (or failed)
  std::exception_ptr error_;
  std::thread worker_;
};

}  // namespace lockstep::data
