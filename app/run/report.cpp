#include "app/run/report.h"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "data/image_io.h"

namespace lockstep::app {

Report::Report(bool active, const std::string& mode, const std::string& metrics_path, bool append)
    : active_(active),
      live_(active && (mode == "auto" && isatty(STDOUT_FILENO))),
      quiet_(mode == "none"),
      metrics_path_(metrics_path) {
  if (!active_ || metrics_path.empty()) return;
  open_metrics(append);
}

void Report::open_metrics(bool append) {
  const bool exists = append && access(metrics_path_.c_str(), F_OK) == 0;
  metrics_ = std::fopen(metrics_path_.c_str(), exists ? "a" : "w");
  if (metrics_ == nullptr) {
    fail_input(metrics_path_, ": cannot write metrics file: ", std::strerror(errno));
  }
  if (!exists) {
    check_metrics_write(
        std::fputs("epoch,lr,train_loss,train_accuracy,train_samples,test_loss,test_accuracy,"
                   "test_samples,seconds,images_per_second,compute_s,comm_wait_s,data_s,eval_s,"
                   "checkpoint_s,test_top_k_accuracy,val_loss,val_accuracy,precision,kernels,"
                   "straggler_rank,straggler_node,straggler_slowdown\n",
                   metrics_) >= 0);
  }
}

void Report::check_metrics_write(bool ok) {
  const bool flushed = std::fflush(metrics_) == 0;
  if (!ok || !flushed || std::ferror(metrics_)) {
    fail_input(metrics_path_, ": cannot write metrics file: ", std::strerror(errno),
               "; free space or choose another run_dir");
  }
}

void Report::resume_at(int64_t epochs_done, const std::string& checkpoint_row) {
  if (metrics_ == nullptr) return;
  std::fclose(metrics_);
  metrics_ = nullptr;
  std::ifstream in(metrics_path_);
  std::string header, row, kept;
  bool has_last = false;  // the row of epoch epochs_done
  if (std::getline(in, header)) {
    kept = header + "\n";
    while (std::getline(in, row)) {
      int64_t epoch = 0;
      const auto [end, ec] = std::from_chars(row.data(), row.data() + row.size(), epoch);
      // A row cut short by a crash (no epoch, or no newline) goes too.
      if (ec != std::errc() || end == row.data() || *end != ',' || epoch > epochs_done) continue;
      kept += row + "\n";
      has_last = has_last || epoch == epochs_done;
    }
  }
  in.close();
  // Lost between the checkpoint and its row: the checkpoint's copy (its
  // checkpoint_s is nan, its seconds stop before the checkpoint).
  const bool one_row = checkpoint_row.find('\n') + 1 == checkpoint_row.size();
  if (!has_last && !kept.empty() && one_row &&
      checkpoint_row.starts_with(std::to_string(epochs_done) + ",")) {
    kept += checkpoint_row;
  }
  data::write_text_atomically(metrics_path_, kept);
  open_metrics(!kept.empty());
}

Report::~Report() {
  if (metrics_ != nullptr) std::fclose(metrics_);
}

void Report::clear_progress() {
  if (progress_shown_) {
    std::printf("\r\033[K");
    progress_shown_ = false;
  }
}

void Report::set_run_labels(const std::string& precision, const std::string& kernels) {
  precision_ = precision;
  kernels_ = kernels;
}

void Report::line(const std::string& text) {
  if (!active_ || quiet_) return;
  clear_progress();
  std::printf("%s\n", text.c_str());
  std::fflush(stdout);
}

bool Report::progress_due(int64_t step, int64_t steps) const {
  if (!live_) return false;
  return step + 1 >= steps ||
         std::chrono::steady_clock::now() - last_progress_ >= std::chrono::milliseconds(200);
}

void Report::progress(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss,
                      double images_per_second) {
  if (!progress_due(step, steps)) return;
  last_progress_ = std::chrono::steady_clock::now();
  const int width = 24;
  const int filled = static_cast<int>(width * (step + 1) / std::max<int64_t>(steps, 1));
  std::string bar(static_cast<size_t>(filled), '=');
  bar.resize(width, ' ');
  std::printf("\r\033[Kepoch %lld/%lld [%s] %lld/%lld loss %.4f %.0f img/s",
              static_cast<long long>(epoch), static_cast<long long>(epochs), bar.c_str(),
              static_cast<long long>(step + 1), static_cast<long long>(steps), loss,
              images_per_second);
  std::fflush(stdout);
  progress_shown_ = true;
}

void Report::epoch(const EpochResult& r, int64_t epochs) {
  if (!active_) return;
  if (!quiet_) {
    clear_progress();
    char test[96] = "test  -";
    if (r.evaluated) {
      std::snprintf(test, sizeof(test), "test loss %.4f acc %6.2f%%", r.test_loss,
                    100.0 * r.test_accuracy);
    }
    char val[96] = "";
    if (r.validated) {
      std::snprintf(val, sizeof(val), "val loss %.4f acc %6.2f%%  ", r.val_loss,
                    100.0 * r.val_accuracy);
    }
    std::printf("epoch %3lld/%lld  train loss %.4f acc %6.2f%%  %s%s  %6.2f s  %8.0f img/s",
                static_cast<long long>(r.epoch), static_cast<long long>(epochs), r.train_loss,
                100.0 * r.train_accuracy, val, test, r.seconds, r.images_per_second);
    if (r.loss_scale > 0) {
      std::printf("  loss scale %g, %lld steps skipped", r.loss_scale,
                  static_cast<long long>(r.skipped_steps));
    }
    std::printf("\n");
    if (!r.straggler_line.empty()) std::printf("%s\n", r.straggler_line.c_str());
    if (!r.slow_link_line.empty()) std::printf("%s\n", r.slow_link_line.c_str());
    std::fflush(stdout);
  }
  if (metrics_ != nullptr) {
    const std::string row = metrics_row(r);
    check_metrics_write(std::fputs(row.c_str(), metrics_) >= 0);
  }
}

std::string Report::metrics_row(const EpochResult& r) const {
  if (metrics_ == nullptr) return "";
  const double nan = std::nan("");
  const auto format = [&](char* out, size_t size) {
    return std::snprintf(
        out, size,
        "%lld,%.8g,%.8g,%.8g,%lld,%.8g,%.8g,%lld,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.6g,%.8g,%"
        ".8g,%.8g,%s,%s,%d,%s,%.4g\n",
        static_cast<long long>(r.epoch), r.lr, r.train_loss, r.train_accuracy,
        static_cast<long long>(r.train_samples), r.evaluated ? r.test_loss : nan,
        r.evaluated ? r.test_accuracy : nan, static_cast<long long>(r.test_samples), r.seconds,
        r.images_per_second, r.compute_seconds, r.comm_wait_seconds, r.data_seconds, r.eval_seconds,
        r.checkpoint_seconds, r.evaluated ? r.test_top_k_accuracy : nan,
        r.validated ? r.val_loss : nan, r.validated ? r.val_accuracy : nan, precision_.c_str(),
        kernels_.c_str(), r.straggler_rank, r.straggler_node.c_str(), r.straggler_slowdown);
  };
  const int n = format(nullptr, 0);
  if (n < 0) return "";
  std::string row(static_cast<size_t>(n), '\0');
  format(row.data(), row.size() + 1);  // the terminator lands on row's own
  return row;
}

}  // namespace lockstep::app
