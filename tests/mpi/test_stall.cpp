// The stall watchdog: a rank that joins a collective late makes the waiting
// ranks report (with the label, and on rank 0 the missing rank), and the
// collective still completes with the right result.
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/mpi_communicator.h"
#include "mpi/mpi_test_util.h"
#include "nn/error.h"

namespace lockstep::distributed {
namespace {

struct Recorder {
  std::mutex mutex;
  std::vector<StallReport> reports;
  std::function<void(const StallReport&)> callback() {
    return [this](const StallReport& report) {
      std::lock_guard lock(mutex);
      reports.push_back(report);
    };
  }
};

TEST(StallWatchdog, LateRankIsReportedAndTheResultIsStillRight) {
  Recorder recorder;
  MpiCommunicatorOptions options;
  options.stall.warning_seconds = 0.5;
  options.stall.abort_seconds = 60.0;
  options.stall.on_stall = recorder.callback();
  auto comm = make_mpi_communicator(MPI_COMM_WORLD, options);
  const int rank = comm->rank(), size = comm->size();
  comm->barrier();
  comm->set_stall_label("stall test step 7");
  if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(2));
  std::vector<float> data(1000, static_cast<float>(rank + 1));
  comm->allreduce(std::span<float>(data), ReduceOp::kSum);
  const float expected = static_cast<float>(size * (size + 1) / 2);
  for (float v : data) ASSERT_EQ(v, expected);

  std::lock_guard lock(recorder.mutex);
  if (rank == 1) {
    EXPECT_TRUE(recorder.reports.empty()) << recorder.reports.front().message();
    return;
  }
  // Reports at 0.5, 1.0, 1.5 s of a ~2 s wait (scheduling may lose one).
  ASSERT_GE(recorder.reports.size(), 2u);
  EXPECT_LE(recorder.reports.size(), 4u);
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

TEST(StallWatchdog, NoReportsWhenNobodyIsLate) {
  Recorder recorder;
  MpiCommunicatorOptions options;
  options.stall.warning_seconds = 0.5;
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
  StallPolicy policy;
  policy.warning_seconds = 0.3;
  policy.on_stall = recorder.callback();
  comm->set_stall_policy(policy);
  comm->set_stall_label("gather of step counts");
  comm->barrier();
  const int late = comm->size() - 1;
  if (comm->rank() == late) std::this_thread::sleep_for(std::chrono::milliseconds(900));
  const std::vector<int64_t> gathered = comm->allgather_value<int64_t>(comm->rank() + 40);
  for (int r = 0; r < comm->size(); ++r) EXPECT_EQ(gathered[static_cast<size_t>(r)], r + 40);
  std::lock_guard lock(recorder.mutex);
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
