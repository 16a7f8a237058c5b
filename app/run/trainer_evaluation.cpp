// The Trainer at the end of an epoch: evaluation on the test set and the
// validation split, the checkpoints due, and the results written when
// training ends.
#include <cmath>

#include "app/checkpoint/trained_model.h"
#include "app/formats/weights_io.h"
#include "app/run/class_metrics.h"
#include "app/run/trainer.h"
#include "common/clock.h"

namespace lockstep::app {

void Trainer::finish_epoch(EpochResult& r, Clock::time_point epoch_start) {
  if (config_.eval_every > 0 && (r.epoch % config_.eval_every == 0 || r.epoch == config_.epochs)) {
    const auto eval_start = Clock::now();
    distributed::TimelineSpan span(timeline_.get(), "evaluation", "evaluation");
    const EvalResult e = evaluate();
    r.evaluated = true;
    r.test_loss = e.loss;
    r.test_accuracy = e.accuracy;
    r.test_samples = e.samples;
    r.test_top_k_accuracy = e.top_k_accuracy;
    r.eval_seconds = seconds_since(eval_start);
  }
  const bool improved = !val_.labels.empty() && r.evaluated && validate_epoch(r);
  epochs_done_ = r.epoch;
  const bool numbered =
      config_.checkpoint_every > 0 && (r.epoch % config_.checkpoint_every == 0 ||
                                       r.epoch == config_.epochs || best_.should_stop(r.epoch));
  if (numbered || (improved && config_.keep_best)) {
    const auto checkpoint_start = Clock::now();
    distributed::TimelineSpan span(timeline_.get(), "checkpoint", "checkpoint");
    // The checkpoint keeps its epoch's metrics row, for a resume to restore
    // if the process ends before the row is written (its checkpoint time
    // unknown then).
    EpochResult so_far = r;
    so_far.seconds = seconds_since(epoch_start);
    so_far.checkpoint_seconds = std::nan("");
    checkpoint_row_ = report_->metrics_row(so_far);
    save_checkpoint(numbered, improved && config_.keep_best);
    r.checkpoint_seconds = seconds_since(checkpoint_start);
  }
}

bool Trainer::validate_epoch(EpochResult& r) {
  const EvalResult v = evaluate(true);
  r.validated = true;
  r.val_loss = v.loss;
  r.val_accuracy = v.accuracy;
  return best_.update(r.epoch, v.accuracy);
}

EvalResult Trainer::evaluate(bool validation) {
  const bool first = !evaluated_once_;
  if (first) arm_stall_abort(false);  // the first evaluation may autotune: not counted
  EvalResult e = evaluate_model(*model_, *backend_, validation ? *val_batches_ : *test_batches_,
                                comm_, top_k_, config_.reproducible);
  if (first) {
    evaluated_once_ = true;
    arm_stall_abort(true);
  }
  if (!validation) last_classes_ = e.classes;
  return e;
}

void Trainer::write_results() {
  if (comm_.rank() != 0 || config_.run_dir.empty()) return;
  if (last_classes_) write_class_reports(config_.run_dir, *last_classes_, train_.class_names);
  if (config_.write_safetensors) {
    save_model_weights(config_.run_dir + "/model.safetensors", *model_,
                       model_card(config_, train_, epochs_done_));
  }
}

}  // namespace lockstep::app
