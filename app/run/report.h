// What rank 0 shows and records: one line per epoch on stdout, a live
// progress line when stdout is a terminal, and metrics.csv in the run
// directory (one row per epoch; precision and kernels say what the epoch
// computed in; the last three columns, straggler_rank, straggler_node and
// straggler_slowdown, name a straggler: EpochResult below). Other ranks
// construct a silent Report.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace lockstep::app {

struct EpochResult {
  int64_t epoch = 0;                              // 1-based
  double lr = 0.0;                                // learning rate of the epoch's last step
  double train_loss = 0.0, train_accuracy = 0.0;  // mean per sample, fraction
  int64_t train_samples = 0;                      // over all ranks
  bool evaluated = false;
  double test_loss = 0.0, test_accuracy = 0.0;
  int64_t test_samples = 0;
  double test_top_k_accuracy = 0.0;  // true class among the top_k outputs
  bool validated = false;            // evaluated on the validation split
  double val_loss = 0.0, val_accuracy = 0.0;
  double seconds = 0.0;            // whole epoch: training, evaluation, checkpoint
  double images_per_second = 0.0;  // training samples (all ranks) / training seconds
  // Where rank 0's time went (seconds).
  double compute_seconds = 0.0;    // forward, backward, optimizer (minus exposed communication)
  double comm_wait_seconds = 0.0;  // waiting for gradient allreduce (not hidden by backward)
  double data_seconds = 0.0;       // waiting for the loader
  double eval_seconds = 0.0;
  double checkpoint_seconds = 0.0;
  // Loss scaling (0 when off): the scale after the epoch, steps skipped in it.
  double loss_scale = 0.0;
  int64_t skipped_steps = 0;
  // Stragglers (distributed/stragglers.h): the slowest rank's median step
  // compute time over the median rank's (1 with one rank), and the rank named
  // when that is over straggler_threshold (-1, "" and no line: none).
  double straggler_slowdown = 1.0;
  int straggler_rank = -1;
  std::string straggler_node, straggler_line;
  std::string slow_link_line;  // rank 0: a node whose heartbeat round trips are long
};

class Report {
 public:
  // active: this rank reports (rank 0). mode: auto | plain | none.
  Report(bool active, const std::string& mode, const std::string& metrics_path, bool append);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;

  // What the run computes in, recorded in every row of metrics.csv: the
  // precision (fp32 | bf16 | fp16) and the kernels (nn::KernelChoice::label).
  void set_run_labels(const std::string& precision, const std::string& kernels);
  // A line of text (start-up banner, notes), when active and not "none".
  void line(const std::string& text);
  // Live progress within an epoch (terminal only, at most ~5 times a second,
  // and after the last step): progress_due() says whether progress() would
  // show this step, so that the caller reads the loss back only then.
  bool progress_due(int64_t step, int64_t steps) const;
  void progress(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                double images_per_second);
  // Appends the epoch's row to metrics.csv; a failed write (a full disk)
  // is an InputError naming the file.
  void epoch(const EpochResult& result, int64_t epochs);
  // The row epoch() would append for result, newline included ("" when
  // this rank writes no metrics.csv). Checkpoints keep their epoch's row.
  std::string metrics_row(const EpochResult& result) const;
  // A resumed run: drops the rows of epochs after epochs_done from
  // metrics.csv (the abandoned ones a later checkpoint had written), so that
  // the file holds each epoch of this run's history once; and when the row
  // of epoch epochs_done itself is missing (the process ended between the
  // checkpoint and its row), appends checkpoint_row, the row that
  // checkpoint kept ("": none kept).
  void resume_at(int64_t epochs_done, const std::string& checkpoint_row = "");

 private:
  void clear_progress();
  void open_metrics(bool append);
  void check_metrics_write(bool ok);
  bool active_, live_, quiet_;
  std::string metrics_path_;
  std::FILE* metrics_ = nullptr;
  std::string precision_ = "fp32", kernels_;
  bool progress_shown_ = false;
  std::chrono::steady_clock::time_point last_progress_{};
};

}  // namespace lockstep::app
