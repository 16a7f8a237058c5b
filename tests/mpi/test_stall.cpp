// The stall watchdog: a rank that joins a collective late makes the waiting
// ranks report (with the label, and on rank 0 the missing rank, or on rank 1
// when rank 0 is the late one), and the collective still completes with the
// right result.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "common/error.h"
#include "distributed/mpi_communicator.h"
#include "mpi/mpi_test_util.h"

namespace lockstep::distributed {
namespace {

// Records the reports; once `enough` says the reports so far suffice, sends
// one message to rank `late` on a side communicator. The late rank waits for
// those messages instead of sleeping for a time, so what the waiting ranks
// have reported does not depend on how loaded the machine is.
struct Recorder {
  std::mutex mutex;
  std::vector<StallReport> reports;
  std::function<bool(const std::vector<StallReport>&)> enough;
  MPI_Comm side = MPI_COMM_NULL;
  int late = 1;
  bool released = false;
  std::function<void(const StallReport&)> callback() {
    return [this](const StallReport& report) {
      std::lock_guard lock(mutex);
      reports.push_back(report);
      if (!released && side != MPI_COMM_NULL && enough && enough(reports)) {
        released = true;
        int one = 1;
        MPI_Send(&one, 1, MPI_INT, late, 0, side);
      }
    };
  }
};

// The late rank: waits until every other rank's recorder released it.
void wait_until_released(MPI_Comm side, int size) {
  for (int i = 0; i < size - 1; ++i) {
    int one = 0;
    MPI_Recv(&one, 1, MPI_INT, MPI_ANY_SOURCE, 0, side, MPI_STATUS_IGNORE);
  }
}

// A communicator that reports a wait to `recorder` after 0.5 s (and would
// abort only after 600).
std::unique_ptr<Communicator> reporting_comm(Recorder& recorder) {
  MpiCommunicatorOptions options;
  options.stall.warning_seconds = 0.5;
  options.stall.abort_seconds = 600.0;
  options.stall.on_stall = recorder.callback();
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

TEST(StallWatchdog, LateRankIsReportedAndTheResultIsStillRight) {
  Recorder recorder;
  MPI_Comm_dup(MPI_COMM_WORLD, &recorder.side);
  // Released after two reports; rank 0 also waits until no rank but 1 is
  // missing (every other waiting rank has told it).
  recorder.enough = [](const std::vector<StallReport>& reports) {
    const StallReport& last = reports.back();
    return reports.size() >= 2 && (!last.ranks_known || last.missing_ranks == std::vector<int>{1});
  };
  auto comm = reporting_comm(recorder);
  const int rank = comm->rank(), size = comm->size();
  comm->barrier();
  comm->set_stall_label("stall test step 7");
  if (rank == 1) wait_until_released(recorder.side, size);
  std::vector<float> data(1000, static_cast<float>(rank + 1));
  comm->allreduce(std::span<float>(data), ReduceOp::kSum);
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (float v : data) ASSERT_EQ(v, expected);

  std::lock_guard lock(recorder.mutex);
  MPI_Comm_free(&recorder.side);
  if (rank == 1) {
    EXPECT_TRUE(recorder.reports.empty()) << recorder.reports.front().message();
    return;
  }
  // Reports every 0.5 s on rank 0 (2, 4, ... times that on the others) until
  // rank 1 was released, which took at least two.
  ASSERT_GE(recorder.reports.size(), 2u);
  for (const StallReport& report : recorder.reports) {
    EXPECT_EQ(report.rank, rank);
    EXPECT_EQ(report.operation, "allreduce");
    EXPECT_EQ(report.label, "stall test step 7");
    EXPECT_EQ(report.sequence, 1u);  // the barrier was #0
    EXPECT_GE(report.waited_seconds, 0.5);
    EXPECT_FALSE(report.aborting);
    EXPECT_EQ(report.ranks_known, rank == 0);
  }
  const StallReport& last = recorder.reports.back();
  EXPECT_GE(last.waited_seconds, 1.0);
  if (rank == 0) {
    // Every other waiting rank has told rank 0 by the last report.
    EXPECT_EQ(last.missing_ranks, std::vector<int>{1}) << last.message();
    EXPECT_TRUE(last.elsewhere.empty()) << last.message();
    EXPECT_NE(last.message().find("missing ranks: 1"), std::string::npos) << last.message();
  }
  EXPECT_NE(last.message().find("allreduce #1 [stall test step 7] has waited"), std::string::npos)
      << last.message();
}

// Rank 0 late (stuck writing its files, say) says nothing itself: rank 1
// names it, and only rank 1 does.
TEST(StallWatchdog, LateRankZeroIsNamedByRankOne) {
  Recorder recorder;
  MPI_Comm_dup(MPI_COMM_WORLD, &recorder.side);
  recorder.late = 0;
  // Rank 1 waits until every other waiting rank has told it, so that only
  // rank 0 is missing (or 30 s: then the checks below fail, not hang); the
  // others release rank 0 after their first report.
  recorder.enough = [](const std::vector<StallReport>& reports) {
    const StallReport& last = reports.back();
    return last.rank != 1 || last.missing_ranks == std::vector<int>{0} ||
           last.waited_seconds >= 30.0;
  };
  auto comm = reporting_comm(recorder);
  const int rank = comm->rank(), size = comm->size();
  comm->barrier();
  comm->set_stall_label("end of training: rank 0 writing its results");
  if (rank == 0) wait_until_released(recorder.side, size);
  comm->barrier();

  std::lock_guard lock(recorder.mutex);
  MPI_Comm_free(&recorder.side);
  if (rank == 0) {
    EXPECT_TRUE(recorder.reports.empty()) << recorder.reports.front().message();
    return;
  }
  ASSERT_FALSE(recorder.reports.empty());
  const StallReport& last = recorder.reports.back();
  EXPECT_EQ(last.operation, "barrier");
  EXPECT_EQ(last.ranks_known, rank == 1) << last.message();
  if (rank == 1) {
    EXPECT_EQ(last.missing_ranks, std::vector<int>{0}) << last.message();
    EXPECT_TRUE(last.elsewhere.empty()) << last.message();
    EXPECT_NE(last.message().find("[end of training: rank 0 writing its results] has waited"),
              std::string::npos)
        << last.message();
    EXPECT_NE(last.message().find("missing ranks: 0"), std::string::npos) << last.message();
  } else {
    EXPECT_TRUE(last.missing_ranks.empty()) << last.message();
  }
}

TEST(StallWatchdog, NoReportsWhenNobodyIsLate) {
  Recorder recorder;
  MpiCommunicatorOptions options;
  // Far above any scheduling delay of a loaded machine, far below the
  // test's time: a watchdog that reported without a wait would show.
  options.stall.warning_seconds = 10.0;
  options.stall.on_stall = recorder.callback();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options);
  std::vector<double> data(4096, 1.0);
  for (int i = 0; i < 50; ++i) comm->allreduce(std::span<double>(data), ReduceOp::kMax);
  comm->barrier();
  std::lock_guard lock(recorder.mutex);
  EXPECT_TRUE(recorder.reports.empty());
}

// The policy can change between collectives (the trainer sets it after
// reading its config); a late rank then triggers the new callback.
TEST(StallWatchdog, PolicyAndLabelCanBeSetLater) {
  auto comm = testing::make_test_comm();
  Recorder recorder;
  MPI_Comm_dup(MPI_COMM_WORLD, &recorder.side);
  recorder.late = comm->size() - 1;
  recorder.enough = [](const std::vector<StallReport>&) { return true; };
  StallPolicy policy;
  policy.warning_seconds = 0.3;
  policy.on_stall = recorder.callback();
  comm->set_stall_policy(policy);
  comm->set_stall_label("gather of step counts");
  comm->barrier();
  const int late = comm->size() - 1;
  if (comm->rank() == late) wait_until_released(recorder.side, comm->size());
  const std::vector<int64_t> gathered = comm->allgather_value<int64_t>(comm->rank() + 40);
  for (int r = 0; r < comm->size(); ++r) EXPECT_EQ(gathered[static_cast<size_t>(r)], r + 40);
  std::lock_guard lock(recorder.mutex);
  MPI_Comm_free(&recorder.side);
  if (comm->rank() != late) {
    ASSERT_FALSE(recorder.reports.empty());
    EXPECT_EQ(recorder.reports.front().operation, "allgather");
    EXPECT_EQ(recorder.reports.front().label, "gather of step counts");
  }
  StallPolicy bad;
  bad.warning_seconds = -1;
  EXPECT_THROW(comm->set_stall_policy(bad), InputError);
}

}  // namespace
}  // namespace lockstep::distributed
