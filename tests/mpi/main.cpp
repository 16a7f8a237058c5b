// Main of the multi-rank tests: run under `mpiexec -n N lockstep_mpi_tests
// --expect-ranks=N`. Fails (never skips) when the world has another size.
// Rank 0 prints gtest's usual output; other ranks print only their failures,
// tagged with the rank. The exit code is non-zero when a test failed on any
// rank.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "distributed/failure.h"
#include "distributed/mpi_communicator.h"
#include "distributed/stall.h"

namespace {

// Prints failures only, each tagged with the rank.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::printf("[rank %d] %s:%d: Failure\n%s\n", rank_,
                result.file_name() ? result.file_name() : "?", result.line_number(),
                result.message());
    std::fflush(stdout);
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Failed()) return;
    std::printf("[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    std::fflush(stdout);
  }

 private:
  int rank_;
};

// --expect-ranks=N; -1 when absent or malformed.
int expected_ranks(int argc, char** argv, std::string& error) {
  int expected = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string flag = "--expect-ranks=";
    if (arg.rfind(flag, 0) == 0) {
      char* end = nullptr;
      const long value = std::strtol(arg.c_str() + flag.size(), &end, 10);
      // 1: a one-rank world (scripts/gpu_check.sh runs the NCCL tests so on one GPU).
      if (*end != '\0' || value < 1 || value > 1 << 20) {
        error = "bad value in " + arg + " (a positive rank count)";
        return -1;
      }
      expected = static_cast<int>(value);
    } else {
      error = "unknown argument " + arg + " (usage: mpiexec -n N " + argv[0] +
              " --expect-ranks=N [gtest flags])";
      return -1;
    }
  }
  if (expected < 0) error = "missing --expect-ranks=N (the rank count mpiexec was asked for)";
  return expected;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::distributed::MpiEnvironment mpi(&argc, &argv);
  const int rank = mpi.world_rank();
  const int size = mpi.world_size();
  lockstep::distributed::install_failure_handlers(rank);
  testing::InitGoogleTest(&argc, argv);

  std::string error;
  const int expected = expected_ranks(argc, argv, error);
  if (expected < 0 || expected != size) {
    if (error.empty()) {
      error = "expected " + std::to_string(expected) + " ranks but MPI_COMM_WORLD has " +
              std::to_string(size) + ": run under mpiexec -n " + std::to_string(expected);
    }
    if (rank == 0) std::fprintf(stderr, "lockstep_mpi_tests: %s\n", error.c_str());
    return 2;
  }

  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }

  const int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  std::vector<int> failures(static_cast<size_t>(size));
  MPI_Allgather(&failed, 1, MPI_INT, failures.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::vector<int> failed_ranks;
  for (int r = 0; r < size; ++r) {
    if (failures[static_cast<size_t>(r)]) failed_ranks.push_back(r);
  }
  if (failed_ranks.empty()) return 0;
  if (rank == 0) {
    std::fprintf(stderr, "lockstep_mpi_tests: tests failed on rank(s) %s of %d\n",
                 lockstep::distributed::format_rank_list(failed_ranks).c_str(), size);
  }
  return 1;
}
