#include "data/batch_loader.h"

#include <algorithm>
#include <utility>

#include "common/error.h"

namespace lockstep::data {

void fill_batch(const Dataset& dataset, std::span<const int64_t> ids,
                const PixelTransform& transform, uint64_t seed, int64_t epoch, Batch& out) {
  const auto b = static_cast<int64_t>(ids.size());
  const int64_t pixels = dataset.image_bytes();
  out.images.resize({b, dataset.channels, dataset.height, dataset.width});
  out.labels.resize(ids.size());
  out.sample_ids.assign(ids.begin(), ids.end());
  float* dst = out.images.data();
  for (int64_t i = 0; i < b; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    if (id < 0 || id >= dataset.size()) {
      fail_input(dataset.name, ": sample index ", id, " is outside the dataset's ", dataset.size(),
                 " samples");
    }
    out.labels[static_cast<size_t>(i)] = dataset.labels[static_cast<size_t>(id)];
    transform.apply(dataset.image(id), dataset.height, dataset.width, seed, epoch, id,
                    dst + i * pixels);
  }
}

namespace {

const BatchLoaderOptions& checked(const BatchLoaderOptions& options) {
  if (options.batch_size < 1) fail_input("loader: batch size ", options.batch_size, " < 1");
  if (options.prefetch < 1) fail_input("loader: prefetch ", options.prefetch, " < 1");
  if (options.start_batch < 0) fail_input("loader: start batch ", options.start_batch, " < 0");
  return options;
}

}  // namespace

BatchLoader::BatchLoader(const Dataset& dataset, std::vector<int64_t> indices,
                         BatchLoaderOptions options)
    : dataset_(dataset),
      indices_(std::move(indices)),
      options_(checked(options)),
      transform_(dataset.channels, options_.normalization, options_.augmentation) {
  const auto n = static_cast<int64_t>(indices_.size());
  const int64_t b = options_.batch_size;
  num_batches_ = options_.drop_last_batch ? n / b : (n + b - 1) / b;
  if (options_.start_batch > num_batches_) {
    fail_input("loader: start batch ", options_.start_batch, " is past the epoch's ", num_batches_,
               " batches");
  }
  free_.resize(static_cast<size_t>(options_.prefetch));
  worker_ = std::thread([this] { run(); });
}

BatchLoader::~BatchLoader() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void BatchLoader::run() {
  try {
    const auto n = static_cast<int64_t>(indices_.size());
    for (int64_t k = options_.start_batch; k < num_batches_; ++k) {
      Batch batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !free_.empty(); });
        if (stop_) return;
        batch = std::move(free_.back());
        free_.pop_back();
      }
      const int64_t first = k * options_.batch_size;
      const int64_t count = std::min(options_.batch_size, n - first);
      fill_batch(dataset_,
                 std::span<const int64_t>(indices_).subspan(static_cast<size_t>(first),
                                                            static_cast<size_t>(count)),
                 transform_, options_.seed, options_.epoch, batch);
      batch.index = k;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(batch));
      }
      cv_.notify_all();
    }
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    error_ = std::current_exception();
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
}

bool BatchLoader::next(Batch& out) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return !ready_.empty() || done_; });
  if (ready_.empty()) {
    if (error_) std::rethrow_exception(error_);
    return false;
  }
  std::swap(out, ready_.front());
  free_.push_back(std::move(ready_.front()));
  ready_.pop_front();
  lock.unlock();
  cv_.notify_all();
  return true;
}

}  // namespace lockstep::data
