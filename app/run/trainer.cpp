#include "app/run/trainer.h"

#include <algorithm>
#include <filesystem>

#include "app/checkpoint/run_dir.h"
#include "app/config/data_setup.h"
#include "app/formats/weights_io.h"
#include "app/platform/cpu_isa_env.h"
#include "app/platform/device.h"
#include "app/run/loss_scaling.h"
#include "app/run/model_buffers.h"
#include "app/run/reproducible.h"
#include "app/run/tensorboard.h"
#include "app/run/train_settings.h"
#include "app/run/training_guard.h"
#include "common/clock.h"
#include "common/error.h"
#include "data/atomic_file.h"
#include "data/catalog.h"
#include "data/sampler.h"
#include "data/validation_split.h"
#include "distributed/comm_batch_stats_reducer.h"
#include "distributed/exact_gradients.h"
#include "distributed/stragglers.h"
#include "nn/model_zoo.h"

namespace lockstep::app {

Trainer::Trainer(TrainConfig config, distributed::Communicator& comm, TrainerHooks hooks)
    : config_(std::move(config)), comm_(comm), hooks_(std::move(hooks)) {
  validate(config_);
  liveness_ = distributed::start_liveness(comm_, liveness_policy(config_));
  const bool root = comm_.rank() == 0;
  // An empty run_dir (evaluation of a checkpoint) writes no files.
  const bool files = !config_.run_dir.empty();

  threads_ = compute_threads(config_, comm_);
  const data::FolderOptions folder = folder_options(config_, threads_);
  std::vector<std::string> notes;  // image folders: skipped files, cache trouble
  check_input_path(config_, "data_dir");
  train_ = take_subset(data::load_dataset(config_.dataset, config_.data_dir, true, folder, &notes),
                       config_, true);
  test_ = take_subset(data::load_dataset(config_.dataset, config_.data_dir, false, folder, &notes),
                      config_, false);
  val_ = take_validation(train_, config_, notes);
  top_k_ = top_k_for(config_, train_.num_classes);
  best_ = BestModelTracker(config_.patience);
  normalization_ = train_normalization(config_);
  augmentation_ = train_augmentation(config_);

  check_config_fingerprint();
  device_plan_ = plan_device(config_, comm_);
  backend_ = make_backend(config_, device_plan_, threads_);
  if (hooks_.wrap_backend) backend_ = hooks_.wrap_backend(std::move(backend_));
  loss_totals_ = nn::Tensor({nn::kLossTotalsFloats}, backend_->device());
  const nn::KernelChoice choice = backend_->kernels();
  const std::string kernels = choice.label;
  kernels_ = choice.description();
  model_ =
      nn::build_model(config_.model, config_.layers, {train_.channels, train_.height, train_.width},
                      train_.num_classes, config_.loss);
  model_->reset_parameters(config_.seed, backend_->device());
  model_->set_label_smoothing(static_cast<float>(config_.label_smoothing));
  make_batches();
  // The evaluation sets take what the training set left of resident_data_mb.
  double left = config_.resident_data_mb - (batches_->resident() ? resident_mib(train_) : 0.0);
  for (auto [set, batches] : {std::pair{&test_, &test_batches_}, std::pair{&val_, &val_batches_}}) {
    if (set->size() == 0 && set == &val_) continue;
    *batches =
        std::make_unique<EvalBatches>(*set, *backend_, normalization_, config_.test_batch_size,
                                      model_->output_size(), comm_.rank(), comm_.size(), left);
    left -= (*batches)->resident_mib();
  }
  // Rank 0 alone reads the initial weights and the checkpoint to resume:
  // they reach every rank with the broadcasts below.
  if (root) {
    check_input_path(config_, "init_from");
    check_input_path(config_, "resume");
  }
  if (!config_.init_from.empty() && root)
    init_weights_from(*model_, config_.init_from, config_.init_skip);
  optimizer_ =
      nn::make_optimizer(optimizer_config(config_), model_->parameters(), backend_->device());
  schedule_ = std::make_unique<nn::LrSchedule>(schedule_config(config_), comm_.size());
  scaler_ = make_grad_scaler(config_);
  // The run directory is touched only now that the data, the model and its
  // initial weights are known good: a typo under --overwrite must not have
  // deleted the previous run before it is reported.
  if (root && files) {
    prepare_run_dir(config_);  // refuses to mix a fresh run with another run's checkpoints
    data::create_folders_durably(config_.run_dir, "run directory", "choose a writable run_dir");
  }
  report_ = std::make_unique<Report>(root, config_.progress,
                                     files ? config_.run_dir + "/metrics.csv" : "",
                                     !config_.resume.empty());
  for (const std::string& note : notes) report_->line(note);
  report_->set_run_labels(nn::to_string(config_.precision), kernels);
  if (!config_.timeline.empty()) {
    timeline_ = distributed::make_timeline(config_.timeline, comm_);
    timeline_->label_process("node " + comm_.host_name() + ", precision " +
                             nn::to_string(config_.precision) + ", kernels " + kernels);
  }
  gradient_comm_ = make_gradient_communicator(device_plan_, comm_, config_);
  auto dconfig = dopt_config(config_);
  dconfig.timeline = timeline_.get();
  dconfig.gradient_comm = gradient_comm_.get();
  dconfig.grad_scaler = scaler_.get();
  if (config_.reproducible) use_exact_sums(dconfig);
  dopt_ = std::make_unique<distributed::DistributedOptimizer>(
      comm_, *backend_, model_->parameters(), *optimizer_, dconfig);
  arm_stall_abort(false);

  check_fingerprint();
  resume();
  if (root && files && config_.tensorboard) {
    tensorboard_ =
        std::make_unique<TensorBoardLog>(config_.run_dir + "/tensorboard", !config_.resume.empty(),
                                         epochs_done_, global_step_, config_.log_every);
  }
  // Every rank starts from rank 0's weights and optimizer state: never from
  // independently initialised ones.
  dopt_->broadcast_parameters(0);
  broadcast_buffers(comm_, *model_, 0);
  if (config_.sync_batchnorm) {
    batch_stats_ = std::make_unique<distributed::CommBatchStatsReducer>(comm_, timeline_.get());
  }
  banner();
}

Trainer::~Trainer() = default;

void Trainer::make_batches() {
  batches_.reset();  // a resident training set is held once
  TrainBatchOptions options;
  options.batch_size = config_.batch_size;
  options.normalization = normalization_;
  options.augmentation = augmentation_;
  options.seed = config_.seed;
  options.classes = model_->output_size();
  batches_ = make_train_batches(train_, *backend_, options, config_.resident_data_mb);
}

void Trainer::arm_stall_abort(bool armed) {
  distributed::StallPolicy stall;
  stall.warning_seconds = config_.stall_warning_s;
  stall.abort_seconds = armed ? config_.stall_abort_s : 0.0;
  comm_.set_stall_policy(stall);
  if (gradient_comm_) gradient_comm_->set_stall_policy(stall);
  if (batch_stats_) batch_stats_->set_stall_policy(stall);  // SyncBatchNorm's duplicate
  stall_abort_armed_ = armed;
}

void Trainer::run() {
  if (epochs_done_ >= config_.epochs) {
    report_->line("run in " + config_.run_dir + " already complete: " +
                  std::to_string(epochs_done_) + " of " + std::to_string(config_.epochs) +
                  " epochs trained; nothing to train (raise epochs to train more)");
  }
  bool stopped_early = false;
  for (int64_t epoch = epochs_done_; epoch < config_.epochs; ++epoch) {
    // Also true at once for a resumed run that had already stopped.
    if (best_.should_stop(epochs_done_)) {
      stopped_early = true;
      report_->line(detail::concat("early stop after epoch ", epochs_done_,
                                   ": validation accuracy has not improved for ", config_.patience,
                                   " epochs (best ", 100.0 * best_.best_accuracy(), "% at epoch ",
                                   best_.best_epoch(), ")"));
      break;
    }
    history_.push_back(train_epoch(epoch));
    report_->epoch(history_.back(), config_.epochs);
    if (tensorboard_) tensorboard_->epoch(history_.back());
    if (tensorboard_ && config_.tensorboard_histograms)
      tensorboard_->weight_histograms(*model_, epochs_done_);
  }
  write_results();
  if (exact_) {
    report_->line("reproducible: state sha256 " +
                  state_digest(state_tensors(), optimizer_->steps()) + ", metrics sha256 " +
                  metrics_digest(history_));
  }
  if (timeline_) {
    for (const std::string& lost : distributed::finish_timeline(*timeline_, comm_)) {
      report_->line("timeline: could not merge " + lost);
    }
  }
  // A run that patience stopped is finished too: a job script resubmitting
  // it for want of the marker would stop again at once, for ever.
  if (comm_.rank() == 0 && !config_.run_dir.empty() &&
      (epochs_done_ >= config_.epochs || stopped_early)) {
    mark_run_complete(config_.run_dir, epochs_done_, config_.epochs, stopped_early);
  }
  // Every rank waits here for rank 0's last writes, under the stall abort
  // limit and with the liveness monitor still running: after this the job's
  // end (MPI's) waits without a limit, so a rank 0 stuck writing, or its
  // node lost, would otherwise leave the other ranks waiting for ever.
  comm_.set_stall_label("end of training: rank 0 writing its results");
  comm_.barrier();
}

EpochResult Trainer::train_epoch(int64_t epoch) {
  const auto epoch_start = Clock::now();
  EpochResult r;
  r.epoch = epoch + 1;
  data::DistributedSampler sampler(train_.size(), comm_.rank(), comm_.size(), true, config_.seed,
                                   config_.drop_last);
  sampler.set_epoch(epoch);
  // k batches per step; when k does not divide the epoch's batches, the last
  // step takes the rest (fewer passes, each scaled for a mean over them), so
  // every sample of the epoch is used.
  const int64_t k = config_.backward_passes_per_step;
  const int64_t batches =
      exact_ ? reproducible_batches(train_.size(), config_.batch_size, comm_.size())
             : sampler.steps(config_.batch_size);
  const int64_t steps = (batches + k - 1) / k;
  check_batch_count(comm_, r.epoch, batches);
  if (steps == 0) fail_input("epoch ", r.epoch, ": no batch (batch_size too large?)");

  batches_->start_epoch(sampler.indices(), epoch);
  Totals totals;
  dopt_->reset_stats();
  if (scaler_) scaler_->reset_skipped();
  double data_seconds = 0.0;
  compute_steps_.clear();
  // Slot 0: the epoch's running totals; slot i > 0: a device copy of them at
  // the i-th TensorBoard log step, read back with the totals at the end.
  const int64_t logs = tensorboard_ && config_.log_every > 0 ? steps / config_.log_every + 1 : 0;
  loss_totals_.resize({(1 + logs) * nn::kLossTotalsFloats});
  backend_->fill(nn::kLossTotalsFloats, 0.0f, loss_totals_.data());
  std::vector<int64_t> log_steps;
  const int64_t first_step = global_step_;
  const auto check = [&](const nn::LossTotals& t) {
    check_loss_totals(t, r.epoch, first_step, k,
                      [&](int64_t step) { return schedule_->at(epoch, step, steps); });
  };
  const auto train_start = Clock::now();
  for (int64_t step = 0; step < steps; ++step) {
    r.lr = schedule_->at(epoch, step, steps);
    train_step(epoch, std::min(k, batches - step * k), r.lr, totals, data_seconds);
    if (tensorboard_ && tensorboard_->step_due(global_step_)) {
      log_steps.push_back(global_step_);
      backend_->copy(
          nn::kLossTotalsFloats, loss_totals_.data(),
          loss_totals_.data() + static_cast<int64_t>(log_steps.size()) * nn::kLossTotalsFloats);
    }
    if (report_->progress_due(step, steps)) {  // a live terminal only: one read
      const nn::LossTotals now = read_loss_totals(1).front();
      check(now);
      report_->progress(r.epoch, config_.epochs, step, steps, now.loss_sum / now.count,
                        now.count * comm_.size() / seconds_since(train_start));
    }
    if (hooks_.after_step) hooks_.after_step(epoch, step);
  }
  const std::vector<nn::LossTotals> read = read_loss_totals(1 + log_steps.size());
  const nn::LossTotals& sums = read.front();
  check(sums);
  if (tensorboard_) {
    nn::LossTotals seen;
    for (size_t i = 0; i < log_steps.size(); ++i) {
      const nn::LossTotals& at = read[i + 1];
      tensorboard_->step_loss(log_steps[i], at.loss_sum - seen.loss_sum, at.count - seen.count);
      seen = at;
    }
    // The rest counts towards the next log step.
    tensorboard_->step_loss(global_step_, sums.loss_sum - seen.loss_sum, sums.count - seen.count);
  }
  totals.add(sums);
  const double train_seconds = seconds_since(train_start);
  // Per-rank BatchNorm statistics: evaluation and checkpoints use their mean.
  if (!config_.sync_batchnorm) average_running_statistics(comm_, *model_);
  comm_.set_stall_label("epoch " + std::to_string(r.epoch) + " training metrics");
  totals.reduce(comm_);
  name_straggler(r);
  const auto stats = dopt_->stats();
  r.train_loss = totals.loss / totals.count;
  r.train_accuracy = totals.correct / totals.count;
  r.train_samples = static_cast<int64_t>(totals.count);
  r.images_per_second = totals.count / train_seconds;
  r.data_seconds = data_seconds;
  r.comm_wait_seconds = stats.exposed_seconds;
  r.compute_seconds = train_seconds - data_seconds - stats.exposed_seconds;
  if (scaler_) r.loss_scale = scaler_->scale(), r.skipped_steps = scaler_->skipped();
  finish_epoch(r, epoch_start);
  r.seconds = seconds_since(epoch_start);
  return r;
}

std::vector<nn::LossTotals> Trainer::read_loss_totals(size_t slots) {
  std::vector<nn::LossTotals> t(slots);
  backend_->download(loss_totals_.data(), t.data(), slots * sizeof(nn::LossTotals));
  return t;
}

void Trainer::name_straggler(EpochResult& r) {
  if (liveness_) r.slow_link_line = distributed::slow_link_line(liveness_->take_link_times());
  const auto ranks = distributed::gather_compute(comm_, compute_steps_);
  const auto verdict = distributed::find_straggler(ranks, config_.straggler_threshold);
  if (verdict.slowest >= 0) r.straggler_slowdown = verdict.slowdown;
  if (verdict.rank < 0) return;
  r.straggler_rank = verdict.rank;
  r.straggler_node = ranks[static_cast<size_t>(verdict.rank)].node;
  r.straggler_line =
      distributed::straggler_line(verdict, r.straggler_node, config_.straggler_threshold);
}

// Every rank must take the same number of steps; the sampler guarantees it,
// and one small collective checks it rather than trusting it.
void check_batch_count(distributed::Communicator& comm, int64_t epoch_number, int64_t batches) {
  comm.set_stall_label("epoch " + std::to_string(epoch_number) + " step-count check");
  int64_t range[2] = {batches, -batches};
  comm.allreduce(std::span<int64_t>(range, 2), distributed::ReduceOp::kMax);
  if (range[0] != batches || -range[1] != batches) {
    throw DistributedError(
        detail::concat("ranks disagree on the number of batches in epoch ", epoch_number, ": from ",
                       -range[1], " to ", range[0], " across ranks, rank ", comm.rank(), " has ",
                       batches, " (every rank must see the same data set and batch size)"));
  }
}

void Trainer::train_step(int64_t epoch, int64_t passes, double lr, Totals& totals,
                         double& data_seconds) {
  // The rank's own time: the step less its waits for gradient reductions
  // (a loader starved of CPU counts, as the rank's own slowness).
  const auto step_start = Clock::now();
  const double waits_before = dopt_->stats().exposed_seconds;
  if (passes != config_.backward_passes_per_step && !exact_)
    dopt_->set_step_passes(static_cast<int>(passes));
  StepBatch batch;
  for (int64_t pass = 0; pass < passes; ++pass) {
    const auto wait_start = Clock::now();
    {
      distributed::TimelineSpan span(timeline_.get(), "data wait", "data");
      batch = batches_->next();
    }
    if (!batch.host_labels.empty())
      check_batch_labels(batch.host_labels, model_->output_size(), epoch + 1, global_step_ + 1);
    data_seconds += seconds_since(wait_start);
    nn::ForwardContext ctx{.training = true,
                           .seed = config_.seed,
                           .epoch = static_cast<uint64_t>(epoch),
                           .sample_ids = batch.sample_ids,
                           .device_sample_ids = batch.device_sample_ids,
                           .batch_stats = batch_stats_.get()};
    {
      distributed::TimelineSpan span(timeline_.get(), "forward", "compute");
      model_->forward(*backend_, *batch.images, ctx);
      // Reproducible: per-sample gradients of the loss, averaged exactly by exact_.
      const float mean = exact_ ? 1.0f : 1.0f / static_cast<float>(passes * batch.size);
      model_->accumulate_loss(*backend_, batch.labels,
                              scaler_ ? scaler_->loss_factor() * mean : mean,
                              reinterpret_cast<nn::LossTotals*>(loss_totals_.data()));
      if (exact_) totals.add_exact(model_->sample_losses(*backend_, batch.labels));
    }
    distributed::TimelineSpan span(timeline_.get(), "backward", "compute");
    model_->backward(*backend_,
                     exact_ ? std::function<void(size_t)>{} : dopt_->grad_ready_callback());
  }
  if (exact_) {
    distributed::TimelineSpan span(timeline_.get(), "exact gradient sums", "communication");
    comm_.set_stall_label("step " + std::to_string(global_step_ + 1) + " exact gradient sums");
    exact_->reduce(comm_, 1.0 / static_cast<double>(passes * batch.size * comm_.size()));
  }
  {
    distributed::TimelineSpan span(timeline_.get(), "optimizer step", "compute");
    dopt_->step(lr);
  }
  compute_steps_.add(seconds_since(step_start) - (dopt_->stats().exposed_seconds - waits_before));
  ++global_step_;
  if (!stall_abort_armed_) arm_stall_abort(true);  // the first step of this launch is done
}

}  // namespace lockstep::app
