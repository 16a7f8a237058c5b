// The MPI communicator's polled waits: the stall watchdog's ticks, wait
// reports posted to ranks 0 and 1 on the side communicator, and stall reports.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator_impl.h"

namespace lockstep::distributed::mpi_detail {

MpiCommunicator::Collective::Collective(MpiCommunicator& owner, Operation operation)
    : owner_(owner), operation_(operation) {
  if (owner_.busy_.exchange(true, std::memory_order_acquire)) {
    throw Error(detail::concat(
        "internal error: a ", operation_name(operation),
        " started while another collective was in flight on the same communicator (two threads "
        "share one communicator: give each its own)"));
  }
  sequence_ = owner_.sequence_++;
  {
    std::lock_guard lock(owner_.settings_mutex_);
    polled_ = owner_.size_ > 1 && owner_.policy_.enabled();
    warning_ = owner_.policy_.warning_seconds;
    spin_ = owner_.policy_.spin_seconds;
    // Rank 0 names the missing ranks every period; the others repeat
    // themselves less often (at 1, 2, 4, 8... periods).
    schedule_ = StallSchedule(owner_.policy_, owner_.rank_ == 0 ? StallSchedule::Repeat::kEvery
                                                                : StallSchedule::Repeat::kDoubling);
  }
  if (polled_) {
    start_ = Clock::now();
    next_tick_ = 1e-3;
  }
}

void MpiCommunicator::Collective::wait(MPI_Request& request) {
  int done = 0;
  const Clock::time_point issued = Clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
    }
    const Clock::time_point now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start_).count();
    if (waited >= next_tick_) on_tick(waited);
    const double this_request = std::chrono::duration<double>(now - issued).count();
    // Leave the core to compute threads once the request is no longer new.
    if (const double pause = StallSchedule::pause_seconds(this_request, spin_)) {
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    }
  }
}

// Called about every millisecond while a polled collective waits.
void MpiCommunicator::Collective::on_tick(double waited) {
  next_tick_ = waited + 1e-3;
  const StallSchedule::Action action = schedule_.at(waited);
  if (warning_ > 0.0 && owner_.size_ > 1) {
    if (owner_.rank_ < kRankNamers) owner_.receive_wait_reports();
    if (!posted_ && waited >= warning_ / 2) {
      owner_.post_wait_report(operation_, sequence_, waited);
      posted_ = true;
    }
    if (action == StallSchedule::Action::kWarn) {
      owner_.report_stall(operation_, sequence_, waited, false);
    }
  }
  if (action == StallSchedule::Action::kAbort) {
    if (owner_.rank_ < kRankNamers) owner_.receive_wait_reports();
    owner_.report_stall(operation_, sequence_, waited, true);
    owner_.abort(1);
  }
}

void MpiCommunicator::post_wait_report(Operation operation, uint64_t sequence, double waited) {
  // Forget reports ranks 0 and 1 have received (or that MPI has buffered).
  for (auto it = posted_.begin(); it != posted_.end();) {
    int done = 0;
    MPI_CHECK(MPI_Test(&it->first, &done, MPI_STATUS_IGNORE));
    it = done ? posted_.erase(it) : std::next(it);
  }
  WaitReport report;
  report.rank = rank_;
  report.operation = operation;
  report.sequence = sequence;
  report.waited_seconds = waited;
  {
    std::lock_guard lock(settings_mutex_);
    std::strncpy(report.label, label_.c_str(), sizeof(report.label) - 1);
  }
  for (int namer = 0; namer < std::min(kRankNamers, size_); ++namer) {
    if (namer == rank_) continue;
    auto& [request, stored] = posted_.emplace_back(MPI_REQUEST_NULL, report);
    MPI_CHECK(MPI_Isend(&stored, sizeof(WaitReport), MPI_BYTE, namer, kWaitReportTag,
                        side_comm_.handle, &request));
  }
}

void MpiCommunicator::receive_wait_reports() {
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    MPI_CHECK(
        MPI_Improbe(MPI_ANY_SOURCE, kWaitReportTag, side_comm_.handle, &flag, &message, &status));
    if (!flag) return;
    WaitReport report;
    MPI_CHECK(MPI_Mrecv(&report, sizeof(WaitReport), MPI_BYTE, &message, MPI_STATUS_IGNORE));
    report.label[sizeof(report.label) - 1] = '\0';
    const int source = status.MPI_SOURCE;
    if (source != rank_ && source >= 0 && source < size_ && report.rank == source) {
      reports_[static_cast<size_t>(source)] = report;
    }
  }
}

void MpiCommunicator::report_stall(Operation operation, uint64_t sequence, double waited,
                                   bool aborting) {
  StallReport report;
  report.rank = rank_;
  report.operation = operation_name(operation);
  report.sequence = sequence;
  report.waited_seconds = waited;
  report.aborting = aborting;
  std::function<void(const StallReport&)> callback;
  {
    std::lock_guard lock(settings_mutex_);
    report.label = label_;
    callback = policy_.on_stall;
  }
  if (rank_ < kRankNamers) {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const WaitReport& other = reports_[static_cast<size_t>(r)];
      if (other.rank != r || other.sequence < sequence) {
        report.missing_ranks.push_back(r);  // not waiting in a collective, as far as we know
      } else if (other.sequence != sequence || other.operation != operation) {
        std::string where = detail::concat("rank ", r, " in ", operation_name(other.operation),
                                           " #", other.sequence);
        if (other.label[0] != '\0') where += detail::concat(" [", other.label, "]");
        report.elsewhere.push_back(std::move(where));
      }
    }
    // Rank 1 names them only when rank 0 is missing: otherwise rank 0 does.
    report.ranks_known =
        rank_ == 0 || (!report.missing_ranks.empty() && report.missing_ranks[0] == 0);
    if (!report.ranks_known) {
      report.missing_ranks.clear();
      report.elsewhere.clear();
    }
  }
  if (callback) {
    try {
      callback(report);
    } catch (...) {
      // A broken callback must not leave the collective half-waited.
    }
  } else {
    const std::string line = "lockstep: " + report.message() + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
}

}  // namespace lockstep::distributed::mpi_detail
