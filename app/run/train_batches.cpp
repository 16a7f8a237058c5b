#include "app/run/train_batches.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "app/platform/device.h"
#include "common/error.h"
#include "data/batch_loader.h"

namespace lockstep::app {
namespace {

// "7.8 MiB"; three decimals under 1 MiB (small test sets).
std::string mib_text(double mib) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(mib < 1.0 ? 3 : 1) << mib << " MiB";
  return out.str();
}

// Uploads go in pieces of at most this many bytes: the CUDA backend stages
// each upload in a pinned buffer that keeps its largest size, and a data set
// of gigabytes must not leave that much pinned memory behind.
constexpr size_t kUploadPiece = size_t{4} << 20;

void upload_in_pieces(nn::Backend& backend, const void* host, void* dst, size_t bytes) {
  const auto* from = static_cast<const uint8_t*>(host);
  auto* to = static_cast<uint8_t*>(dst);
  for (size_t done = 0; done < bytes; done += kUploadPiece) {
    backend.upload(from + done, to + done, std::min(kUploadPiece, bytes - done));
  }
}

// A backend tensor of at least `bytes` bytes.
nn::Tensor bytes_tensor(size_t bytes, nn::Device device) {
  const auto floats = static_cast<int64_t>((bytes + sizeof(float) - 1) / sizeof(float));
  return nn::Tensor({std::max<int64_t>(floats, 1)}, device);
}

class HostBatches final : public TrainBatches {
 public:
  HostBatches(const data::Dataset& train, nn::Backend& backend, TrainBatchOptions options,
              std::string why)
      : train_(train), stager_(backend), options_(std::move(options)), why_(std::move(why)) {}

  void start_epoch(std::vector<int64_t> indices, int64_t epoch) override {
    indices_ = std::move(indices);
    epoch_ = epoch;
    rewind();
  }

  void rewind() override {
    loader_.reset();
    data::BatchLoaderOptions lo;
    lo.batch_size = options_.batch_size;
    lo.normalization = options_.normalization;
    lo.augmentation = options_.augmentation;
    lo.seed = options_.seed;
    lo.epoch = epoch_;
    loader_ = std::make_unique<data::BatchLoader>(train_, indices_, lo);
  }

  StepBatch next() override {
    if (!loader_ || !loader_->next(batch_))
      throw Error("loader ended before the epoch's last step");
    StepBatch out;
    out.images = &stager_.images(batch_);
    out.labels = stager_.labels(batch_);
    out.sample_ids = batch_.sample_ids.data();
    out.host_labels = batch_.labels;
    out.size = batch_.size();
    return out;
  }

  std::string describe() const override {
    return "batches: made on the host and uploaded every step (" + why_ + ")";
  }
  bool resident() const override { return false; }

 private:
  const data::Dataset& train_;
  BatchStager stager_;
  const TrainBatchOptions options_;
  const std::string why_;
  std::vector<int64_t> indices_;  // the epoch's order
  int64_t epoch_ = 0;
  std::unique_ptr<data::BatchLoader> loader_;
  data::Batch batch_;
};

class ResidentBatches final : public TrainBatches {
 public:
  ResidentBatches(const data::Dataset& train, nn::Backend& backend, TrainBatchOptions options)
      : train_(train), backend_(backend), options_(std::move(options)) {
    for (int64_t i = 0; i < train.size(); ++i) {
      const int32_t label = train.labels[static_cast<size_t>(i)];
      if (label < 0 || label >= options_.classes) {
        fail_input(train.source, ": label ", label, " of sample ", i, " is outside the model's ",
                   options_.classes, " classes");
      }
    }
    // The loader's own table, so that the batches are its bits.
    const data::PixelTransform transform(train.channels, options_.normalization,
                                         options_.augmentation);
    std::vector<float> table(static_cast<size_t>(train.channels) * 256);
    for (int64_t c = 0; c < train.channels; ++c) {
      for (int v = 0; v < 256; ++v) {
        table[static_cast<size_t>(c * 256 + v)] = transform.value(c, static_cast<uint8_t>(v));
      }
    }
    const nn::Device device = backend.device();
    images_ = bytes_tensor(train.images.size(), device);
    labels_ = bytes_tensor(train.labels.size() * sizeof(int32_t), device);
    table_ = nn::Tensor({static_cast<int64_t>(table.size())}, device);
    ids_ = nn::Tensor({1}, device);
    batch_images_ = nn::Tensor({1}, device);
    batch_labels_ = nn::Tensor({1}, device);
    upload_in_pieces(backend, train.images.data(), images_.data(), train.images.size());
    upload_in_pieces(backend, train.labels.data(), labels_.data(),
                     train.labels.size() * sizeof(int32_t));
    upload_in_pieces(backend, table.data(), table_.data(), table.size() * sizeof(float));
  }

  void start_epoch(std::vector<int64_t> indices, int64_t epoch) override {
    for (const int64_t id : indices) {
      if (id < 0 || id >= train_.size()) {
        fail_input(train_.name, ": sample index ", id, " is outside the dataset's ", train_.size(),
                   " samples");
      }
    }
    ids_host_ = std::move(indices);
    static_assert(sizeof(int64_t) == 2 * sizeof(float));
    ids_.resize({std::max<int64_t>(1, 2 * static_cast<int64_t>(ids_host_.size()))});
    upload_in_pieces(backend_, ids_host_.data(), ids_.data(), ids_host_.size() * sizeof(int64_t));
    epoch_ = epoch;
    next_ = 0;
  }

  void rewind() override { next_ = 0; }

  StepBatch next() override {
    const auto n = static_cast<int64_t>(ids_host_.size());
    const int64_t first = next_ * options_.batch_size;
    if (first >= n) throw Error("resident batches ended before the epoch's last step");
    nn::GatherGeometry g;
    g.batch = std::min(options_.batch_size, n - first);
    g.samples = train_.size();
    g.channels = train_.channels, g.height = train_.height, g.width = train_.width;
    g.crop_padding = options_.augmentation.crop_padding;
    g.horizontal_flip = options_.augmentation.horizontal_flip;
    g.seed = options_.seed;
    g.epoch = epoch_;
    batch_images_.resize({g.batch, g.channels, g.height, g.width});
    batch_labels_.resize({g.batch});
    const int64_t* ids = reinterpret_cast<const int64_t*>(ids_.data()) + first;
    auto* labels = reinterpret_cast<int32_t*>(batch_labels_.data());
    backend_.gather_batch(g, ids, reinterpret_cast<const uint8_t*>(images_.data()),
                          reinterpret_cast<const int32_t*>(labels_.data()), table_.data(),
                          batch_images_.data(), labels);
    ++next_;
    StepBatch out;
    out.images = &batch_images_;
    out.labels = labels;
    out.sample_ids = ids_host_.data() + first;
    out.device_sample_ids = ids;
    out.size = g.batch;
    return out;
  }

  std::string describe() const override {
    return "batches: gathered in the backend's memory from the resident data set (" +
           mib_text(resident_mib(train_)) + ", uint8), one index upload per epoch";
  }
  bool resident() const override { return true; }

 private:
  const data::Dataset& train_;
  nn::Backend& backend_;
  const TrainBatchOptions options_;
  // Backend memory: pixels (S, C, H, W) uint8, labels (S) int32, table
  // (C, 256), the epoch's ids int64, and the batch being trained on.
  nn::Tensor images_, labels_, table_, ids_, batch_images_, batch_labels_;
  std::vector<int64_t> ids_host_;
  int64_t epoch_ = 0;
  int64_t next_ = 0;  // next batch of the epoch
};

}  // namespace

double resident_mib(const data::Dataset& dataset) {
  const double bytes = static_cast<double>(dataset.images.size()) +
                       static_cast<double>(dataset.size()) * (sizeof(int32_t) + sizeof(int64_t)) +
                       static_cast<double>(dataset.channels) * 256 * sizeof(float);
  return bytes / (1024.0 * 1024.0);
}

std::unique_ptr<TrainBatches> make_train_batches(const data::Dataset& train, nn::Backend& backend,
                                                 const TrainBatchOptions& options,
                                                 double resident_limit_mb) {
  if (resident_limit_mb <= 0) {
    return std::make_unique<HostBatches>(train, backend, options, "resident_data_mb = 0");
  }
  const double mib = resident_mib(train);
  if (mib > resident_limit_mb) {
    return std::make_unique<HostBatches>(train, backend, options,
                                         train.name + ": " + mib_text(mib) + " is over the " +
                                             mib_text(resident_limit_mb) +
                                             " left of resident_data_mb");
  }
  return std::make_unique<ResidentBatches>(train, backend, options);
}

}  // namespace lockstep::app
