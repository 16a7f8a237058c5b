// Evaluation of a model on a test split, shared by the trainer and
// `lockstep evaluate`, and the parts of a checkpoint a model needs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "app/checkpoint/checkpoint.h"
#include "app/platform/device.h"
#include "app/run/class_metrics.h"
#include "app/run/train_batches.h"
#include "data/dataset.h"
#include "data/transform.h"
#include "distributed/communicator.h"
#include "distributed/exact_gradients.h"
#include "nn/backend.h"
#include "nn/model.h"

namespace lockstep::app {

struct EvalResult {
  double loss = 0.0;                            // mean per sample
  double accuracy = 0.0;                        // fraction correct
  int64_t samples = 0;                          // every test sample exactly once, over all ranks
  double top_k_accuracy = 0.0;                  // true class among the top_k outputs
  std::shared_ptr<const ClassMetrics> classes;  // confusion matrix, per-class accuracy
};

// Sums of a pass over data, reduced across ranks as sums and counts so the
// means are exact whatever the shard sizes.
struct Totals {
  double loss = 0.0, correct = 0.0, count = 0.0;
  void add(const nn::LossStats& s);
  // A pass's totals as the backend accumulated them (loss, correct, count).
  void add(const nn::LossTotals& t);
  // Reproducible mode: the batch's per-sample losses (Model::sample_losses)
  // also go into exact sums, and reduce() takes the loss from them, so it
  // does not depend on the number of ranks.
  void add_exact(const std::vector<double>& sample_losses);
  // Collective: sums over the ranks of comm.
  void reduce(distributed::Communicator& comm);

 private:
  bool exact_ = false;
  distributed::ExactScalar exact_loss_;
};

// The batches of this rank's shard of a test split (DistributedSampler::
// for_evaluation: every sample once over all ranks), normalised as given,
// not augmented. Resident in the backend's memory when the split fits
// resident_limit_mb (train_batches.h): its pixels, labels and this rank's
// order are uploaded once, here, and an evaluation uploads nothing. Else
// made on the host and uploaded batch by batch. Resident throws InputError
// naming the data set when a label is outside [0, classes). split and
// backend must outlive it.
class EvalBatches {
 public:
  EvalBatches(const data::Dataset& split, nn::Backend& backend,
              const data::Normalization& normalization, int64_t batch_size, int64_t classes,
              int rank, int ranks, double resident_limit_mb);
  const data::Dataset& split() const { return split_; }
  int64_t batch_size() const { return batch_size_; }
  int64_t samples() const { return static_cast<int64_t>(indices_.size()); }  // this rank's
  // The first batch of a pass over the shard, then the next ones; next()
  // returns false after the last.
  void start();
  bool next(StepBatch& batch);
  // The MiB the split holds in the backend's memory (0: host batches).
  double resident_mib() const;
  // One line for the start-up banner (TrainBatches::describe).
  std::string describe() const { return batches_->describe(); }

 private:
  const data::Dataset& split_;
  const int64_t batch_size_;
  int64_t done_ = 0;  // samples of the pass so far
  bool started_ = false;
  std::unique_ptr<TrainBatches> batches_;
  std::vector<int64_t> indices_;
};

// Evaluates model on this rank's shard (batches), reduced over all ranks of
// comm, with top-k accuracy and per-class counts. Collective.
EvalResult evaluate_model(nn::Model& model, nn::Backend& backend, EvalBatches& batches,
                          distributed::Communicator& comm, int64_t top_k = 5,
                          bool exact_loss = false);

// Copies the checkpoint's weights into model's parameters and buffers
// (BatchNorm running statistics; optimizer state is not needed). Throws
// InputError naming path when one is missing or has another shape.
void load_weights(const Checkpoint& checkpoint, const std::string& path, nn::Model& model);

}  // namespace lockstep::app
