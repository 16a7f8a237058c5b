// Training batches as the backend reads them, one epoch at a time, in one of
// two ways:
//
//   resident (ResidentBatches): the training set is copied into the
//     backend's memory once, as uint8 pixels (S, C, H, W) and int32 labels
//     (S), with the normalisation table (C, 256); each epoch uploads this
//     rank's sample order (int64) once, and each step gathers, crops, flips
//     and normalises its batch there (Backend::gather_batch): a steady step
//     copies nothing between host and device. Uploads go in pieces of at
//     most 4 MiB (the order of 60000 samples is one).
//   host (HostBatches): the loader prepares each batch on the host
//     (data/batch_loader.h) and each step uploads its images and labels
//     (app/platform/device.h's BatchStager; on the CPU a memcpy).
//
// Both give the same batches bit for bit (the same sample order, crop/flip
// draws and normalisation table). make_train_batches picks resident when the
// data set fits in `resident_limit_mb` (config key resident_data_mb) and
// says which in describe(). Evaluation takes its batches the same way, with
// no augmentation (app/run/evaluation.h's EvalBatches).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transform.h"
#include "nn/backend.h"
#include "nn/tensor.h"

namespace lockstep::app {

// One batch of B samples, valid until the next call to next().
struct StepBatch {
  const nn::Tensor* images = nullptr;          // (B, C, H, W) normalised, backend memory
  const int32_t* labels = nullptr;             // (B) backend memory
  const int64_t* sample_ids = nullptr;         // (B) host: dataset indices
  const int64_t* device_sample_ids = nullptr;  // (B) backend memory, or null (host batches)
  // Labels for the host to check before the step (host batches); empty when
  // the whole training set's labels were checked once (resident).
  std::span<const int32_t> host_labels;
  int64_t size = 0;
};

struct TrainBatchOptions {
  int64_t batch_size = 64;
  data::Normalization normalization;
  data::Augmentation augmentation;
  uint64_t seed = 0;
  int64_t classes = 0;  // the model's outputs: labels must be in [0, classes)
};

class TrainBatches {
 public:
  virtual ~TrainBatches() = default;
  // Starts an epoch over this rank's sample order (DistributedSampler::
  // indices()): batches of batch_size, the last one maybe smaller. Throws
  // InputError naming the data set on an index outside it.
  virtual void start_epoch(std::vector<int64_t> indices, int64_t epoch) = 0;
  // The epoch's next batch; throws Error after the last one.
  virtual StepBatch next() = 0;
  // Starts the current epoch's batches again from its first, in the same
  // order, uploading nothing (an evaluation's, run again each epoch).
  virtual void rewind() = 0;
  // One line for the start-up banner: where batches are made, and why.
  virtual std::string describe() const = 0;
  // Whether the data set lives in the backend's memory (ResidentBatches).
  virtual bool resident() const = 0;
};

// The bytes the resident copy of `dataset` takes in backend memory (pixels,
// labels, table), in MiB.
double resident_mib(const data::Dataset& dataset);

// Resident when resident_limit_mb > 0 and resident_mib(train) <= it, else
// host batches. train and backend must outlive the result. Resident throws
// InputError naming the data set when a label is outside [0, classes).
std::unique_ptr<TrainBatches> make_train_batches(const data::Dataset& train, nn::Backend& backend,
                                                 const TrainBatchOptions& options,
                                                 double resident_limit_mb);

}  // namespace lockstep::app
