// The training loop: data-parallel SGD over a Communicator, the Horovod
// recipe built in. Every rank holds a replica, trains on its shard, and
// averages gradients (DistributedOptimizer) before each step; rank 0 alone
// prints, writes metrics and checkpoints. With the size-1 communicator it is
// plain single-process training.
//
// Sources: trainer.cpp (construction, the epoch loop, one step),
// trainer_evaluation.cpp (the end of an epoch: evaluation, validation, the
// checkpoints due, final results), trainer_checkpoint.cpp (save, resume),
// trainer_startup.cpp (fingerprint check, banner).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app/config/config.h"
#include "app/platform/device.h"
#include "app/run/best_model.h"
#include "app/run/evaluation.h"
#include "app/run/report.h"
#include "app/run/train_batches.h"
#include "app/run/train_settings.h"
#include "common/clock.h"
#include "data/dataset.h"
#include "data/transform.h"
#include "distributed/comm_batch_stats_reducer.h"
#include "distributed/communicator.h"
#include "distributed/distributed_optimizer.h"
#include "distributed/exact_gradients.h"
#include "distributed/liveness.h"
#include "distributed/stragglers.h"
#include "distributed/timeline.h"
#include "nn/backend.h"
#include "nn/batch_stats_reducer.h"
#include "nn/grad_scaler.h"
#include "nn/lr_schedule.h"
#include "nn/model.h"
#include "nn/optimizer.h"

namespace lockstep::app {

class TensorBoardLog;

// The per-epoch step-count check, collective: throws DistributedError on
// every rank unless every rank has `batches` batches in this epoch, naming
// the range over the ranks and this rank's count.
void check_batch_count(distributed::Communicator& comm, int64_t epoch_number, int64_t batches);

// Seams for tests, empty in a run: wrap_backend receives the backend the
// configuration chose and returns the one the trainer uses (a counting
// wrapper: tests/support/counting_backend.h); after_step runs after each
// training step (epoch and step 0-based).
struct TrainerHooks {
  std::function<std::unique_ptr<nn::Backend>(std::unique_ptr<nn::Backend>)> wrap_backend;
  std::function<void(int64_t epoch, int64_t step)> after_step;
};

// Host round trips: a training step queues its work, reads nothing back and,
// with the training set resident in the backend's memory (app/run/
// train_batches.h; config key resident_data_mb), copies nothing to it
// either: the epoch's sample order is uploaded once and each batch is
// gathered there.
// The loss, correct count and sample count of the epoch accumulate in the
// backend's memory (nn/loss_totals.h) and are read back once at the end of
// the epoch (with device copies taken at TensorBoard's log steps, whose
// step/train_loss records are written then), and besides only at a live
// progress update on a terminal. A non-finite loss is therefore found at that read
// (the error still names the epoch and the step it happened in, and no
// checkpoint of those weights is written); labels are checked on the host
// before they are staged (resident: the whole training set's, once). BatchNorm keeps its statistics
// on the device (Backend::batchnorm_train_forward). Off this default path, with reads in every
// step: loss scaling's overflow check (scaler_, one), the reproducible mode's per-sample losses and
// exact sums (exact_), and SyncBatchNorm's statistics, summed over the ranks on the host.
class Trainer {
 public:
  // Loads data, builds the model, checks that all ranks agree, broadcasts
  // rank 0's initial weights (or resumes from a checkpoint).
  Trainer(TrainConfig config, distributed::Communicator& comm, TrainerHooks hooks = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains from the current epoch to config.epochs.
  void run();
  // Evaluates on this rank's shard of the test set (or of the validation
  // split), reduced over all ranks: every sample counts once.
  EvalResult evaluate(bool validation = false);

  nn::Model& model() { return *model_; }
  int64_t epochs_done() const { return epochs_done_; }
  const std::vector<EpochResult>& history() const { return history_; }
  const TrainConfig& config() const { return config_; }
  const std::vector<std::string>& class_names() const { return train_.class_names; }
  // The validation split this rank holds (the whole split; empty without
  // val_fraction).
  const data::Dataset& validation_set() const { return val_; }

 private:
  EpochResult train_epoch(int64_t epoch);
  // One optimizer step over `passes` batches of batches_; adds to totals and
  // data_seconds (time spent waiting for batches), and its own time (all but
  // the reduction waits) to compute_steps_.
  void train_step(int64_t epoch, int64_t passes, double lr, Totals& totals, double& data_seconds);
  // The first `slots` LossTotals of loss_totals_, read back from the
  // backend (one host wait).
  std::vector<nn::LossTotals> read_loss_totals(size_t slots);
  // Collective: every rank's compute figures of the epoch (compute_steps_)
  // to every rank; the straggler, if any, into r (distributed/stragglers.h).
  void name_straggler(EpochResult& r);
  // Evaluation and checkpoint due after epoch r.epoch, timed into r.
  void finish_epoch(EpochResult& r, Clock::time_point epoch_start);
  // Evaluates the validation split into r; true for a new best accuracy.
  bool validate_epoch(EpochResult& r);
  // At the end of run(): rank 0's class reports and model.safetensors.
  void write_results();
  // batches_ for config_.batch_size (again when a resume changes it).
  void make_batches();
  void resume();
  void discard_later_checkpoints(int64_t epoch, int64_t step, const std::string& path);
  void resume_world_size(int64_t stored_ranks, int64_t stored_batch, const std::string& path);
  // numbered: the next numbered checkpoint; best: run_dir/best.lsck.
  void save_checkpoint(bool numbered = true, bool best = false);
  std::vector<std::pair<std::string, nn::Tensor*>> state_tensors();
  void check_config_fingerprint();  // before the device plan
  void check_fingerprint();         // model and data, before the first epoch
  void use_exact_sums(distributed::DistributedOptimizerConfig& dconfig);
  void banner();
  // Long local phases (start-up with data decoding, the first step and the
  // first evaluation with cuDNN autotuning) do not count towards
  // stall_abort_s: armed false lifts the abort limit, true restores it.
  void arm_stall_abort(bool armed);

  TrainConfig config_;
  distributed::Communicator& comm_;
  TrainerHooks hooks_;
  std::unique_ptr<distributed::LivenessMonitor> liveness_;  // null: one rank, or turned off
  data::Dataset train_, test_, val_;                        // val_: empty without val_fraction
  data::Normalization normalization_;
  data::Augmentation augmentation_;
  DevicePlan device_plan_;
  std::unique_ptr<nn::Backend> backend_;
  nn::Tensor loss_totals_;  // nn::LossTotals in the backend's memory (train_epoch)
  // The test set's and the validation split's batches (null: no split).
  std::unique_ptr<EvalBatches> test_batches_, val_batches_;
  std::unique_ptr<TrainBatches> batches_;
  std::unique_ptr<nn::Model> model_;
  std::unique_ptr<nn::Optimizer> optimizer_;
  std::unique_ptr<distributed::Timeline> timeline_;
  // NCCL for gradient buckets on GPUs (null: comm_); outlives dopt_.
  std::unique_ptr<distributed::Communicator> gradient_comm_;
  std::unique_ptr<distributed::DistributedOptimizer> dopt_;
  std::unique_ptr<distributed::CommBatchStatsReducer> batch_stats_;  // sync_batchnorm only
  // reproducible only: exact gradient sums, and the size-1 communicator
  // that makes the DistributedOptimizer a local step on their result.
  std::unique_ptr<distributed::ExactGradients> exact_;
  std::unique_ptr<distributed::Communicator> local_comm_;
  std::unique_ptr<nn::LrSchedule> schedule_;
  std::unique_ptr<nn::GradScaler> scaler_;  // loss scaling (fp16); null when off
  std::unique_ptr<Report> report_;
  std::unique_ptr<TensorBoardLog> tensorboard_;       // rank 0, when config.tensorboard
  std::shared_ptr<const ClassMetrics> last_classes_;  // of the last test evaluation
  BestModelTracker best_{0};
  int64_t top_k_ = 1;  // of test accuracy: top_k for the data's classes (top_k_for)
  int threads_ = 1;
  // The backend's kernels as checkpoints keep them and reproducible ranks
  // compare them (nn::KernelChoice::description).
  std::string kernels_;
  int64_t epochs_done_ = 0;
  int64_t global_step_ = 0;
  bool stall_abort_armed_ = false;
  bool evaluated_once_ = false;
  std::vector<EpochResult> history_;
  std::string checkpoint_row_;    // rank 0: the metrics row the next checkpoint keeps
  nlohmann::json data_identity_;  // app/checkpoint/resume_policy.h (check_fingerprint)
  // This epoch's seconds per step on this rank, without reduction waits.
  distributed::ComputeRecorder compute_steps_;
};

}  // namespace lockstep::app
