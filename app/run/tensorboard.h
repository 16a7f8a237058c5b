// TensorBoard event files written by rank 0 under run_dir/tensorboard/:
// one file, events.out.tfevents.lockstep, of TFRecord-framed Event protos
// (tensorflow/core/util/event.proto: wall_time = 1, step = 2,
// file_version = 3, summary = 5; Summary.value = 1; Value.tag = 1,
// simple_value = 2), encoded here by hand. Every record is flushed as it is
// written, so a crash leaves a readable file (at worst without its last
// record).
//
// Tags "epoch/..." are indexed by epoch (1-based), tags "step/..." by the
// global optimizer step. On resume the file keeps the records up to the
// resumed epoch and step and drops later ones (written by a run that ended
// after its last checkpoint), so nothing is repeated.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "nn/model.h"

namespace lockstep::app {

struct EpochResult;

// One scalar of an event file (for tests and resume).
struct ScalarEvent {
  std::string tag;
  int64_t step = 0;
  float value = 0.0f;
  bool is_scalar = true;  // false: a histogram (value unused)
};

// The Event proto bytes of one scalar (wall_time in seconds since 1970).
std::string scalar_event(const std::string& tag, int64_t step, float value, double wall_time);
// The Event proto bytes of a histogram of values (Summary.Value.histo = 5:
// HistogramProto min = 1, max = 2, num = 3, sum = 4, sum_squares = 5,
// bucket_limit = 6, bucket = 7) in `buckets` equal-width buckets.
std::string histogram_event(const std::string& tag, int64_t step, const std::vector<float>& values,
                            int buckets, double wall_time);
// The scalars of an event file's bytes (histograms, other events and a
// damaged tail are skipped).
std::vector<ScalarEvent> read_scalar_events(const std::string& bytes);

class TensorBoardLog {
 public:
  // Creates dir. Fresh (resume false): starts an empty file. Resume: keeps
  // the records of epochs <= epochs_done and steps <= global_step.
  // Throws InputError naming the file when it cannot be written.
  // log_every: write step/train_loss every that many steps (0: never).
  TensorBoardLog(const std::string& dir, bool resume, int64_t epochs_done, int64_t global_step,
                 int64_t log_every);
  ~TensorBoardLog();
  TensorBoardLog(const TensorBoardLog&) = delete;
  TensorBoardLog& operator=(const TensorBoardLog&) = delete;

  void scalar(const std::string& tag, int64_t step, double value);
  // A histogram of values under tag (indexed by epoch when the tag starts
  // with "epoch/").
  void histogram(const std::string& tag, int64_t step, const std::vector<float>& values);
  // epoch/weights/<parameter name>: a histogram of every parameter.
  void weight_histograms(const nn::Model& model, int64_t epoch);
  // epoch/train_loss, train_accuracy, test_loss, test_accuracy and
  // test_top_k_accuracy (when evaluated), val_loss and val_accuracy (with
  // a validation split), lr, images_per_second,
  // allreduce_wait_s: the values of metrics.csv.
  void epoch(const EpochResult& r);
  // Adds the loss sum and sample count (this rank's) of the steps since the
  // last call; at every log_every-th global step it writes step/train_loss,
  // the mean since the last write. step_due(): global_step is such a step
  // (the caller reads the loss back from the device then).
  void step_loss(int64_t global_step, double loss_sum, double count);
  bool step_due(int64_t global_step) const {
    return log_every_ > 0 && global_step % log_every_ == 0;
  }
  const std::string& path() const { return path_; }

 private:
  void write(const std::string& record);
  std::string path_;
  std::FILE* file_ = nullptr;
  int64_t log_every_ = 0;
  double loss_sum_ = 0.0, count_ = 0.0;
};

}  // namespace lockstep::app
