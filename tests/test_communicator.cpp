// Single-process tests of the communicators: the size-1 communicator, the MPI
// communicator in a singleton MPI job (no launcher), MPI_CHECK. The stall
// report: test_stall.cpp; the fingerprint message: test_fingerprint.cpp.
#include <gtest/gtest.h>
#include <mpi.h>

#include <poll.h>
#include <unistd.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.h"
#include "distributed/communicator.h"
#include "distributed/fingerprint.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator.h"

namespace lockstep::distributed {
namespace {

// MPI can be initialized once per process; the tests share it.
MpiEnvironment& mpi() {
  static MpiEnvironment environment;
  return environment;
}

TEST(SingleCommunicator, CollectivesAreTheIdentity) {
  auto comm = make_single_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->node_count(), 1);
  std::vector<float> x = {1.5f, -2.0f};
  comm->allreduce(std::span<float>(x), ReduceOp::kAverage);
  EXPECT_EQ(x, (std::vector<float>{1.5f, -2.0f}));
  std::vector<std::byte> in(3, std::byte{7}), out(3);
  comm->allgather(in, out);
  EXPECT_EQ(out, in);
  EXPECT_THROW(comm->broadcast(out, 1), Error);
  comm->set_stall_label("ignored");
  EXPECT_NO_THROW(check_same_fingerprint(*comm, {{"config.batch_size", "64"}}));
}

TEST(MpiCommunicator, WorksAsASingletonWithoutLauncher) {
  ASSERT_EQ(mpi().world_size(), 1);
  auto comm = make_mpi_communicator();
  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(comm->local_rank(), 0);
  EXPECT_EQ(comm->local_size(), 1);
  EXPECT_EQ(comm->node_count(), 1);
  EXPECT_EQ(comm->describe(), "mpi (" + mpi_library_version() + "), 1 rank on 1 node");
  std::vector<double> x = {3.0, -1.0};
  comm->allreduce(std::span<double>(x), ReduceOp::kAverage);
  EXPECT_EQ(x, (std::vector<double>{3.0, -1.0}));
  std::vector<int64_t> empty;
  comm->allreduce(std::span<int64_t>(empty), ReduceOp::kSum);
  comm->barrier();
  EXPECT_THROW(comm->broadcast({}, 1), Error);
  EXPECT_NO_THROW(check_same_fingerprint(*comm, {{"a", "1"}}));
}

TEST(MpiEnvironment, AdoptsAnInitializedMpiAndLeavesItRunning) {
  mpi();
  { MpiEnvironment second; }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
}

// A rank whose MPI_Finalize never returns (MPICH over TCP, a peer already
// gone) ends itself past the deadline, with its own exit code and one line.
// The "finalize" waits on a pipe nobody writes to; should the watchdog not
// end the process, it gives up after 120 s and the test fails (exit 91)
// instead of hanging.
TEST(FinalizeWithin, AFinalizeThatNeverReturnsEndsTheRankWithItsCode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: no MPI threads forked
  const auto stuck = [] {
    int never[2];
    if (pipe(never) != 0) _exit(90);
    finalize_within(0.05, 7, "rank 3: finalize stuck\n", [&] {
      pollfd fd{never[0], POLLIN, 0};
      poll(&fd, 1, 120'000);
    });
    _exit(91);
  };
  EXPECT_EXIT(stuck(), ::testing::ExitedWithCode(7), "^rank 3: finalize stuck\n$");
}

TEST(FinalizeWithin, AFinalizeThatReturnsReturns) {
  int calls = 0;
  finalize_within(600.0, 7, "never printed\n", [&] { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(MpiCheck, ThrowsLibraryErrorNamingCallFileAndMpiText) {
  mpi();
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  char byte = 0;
  try {
    MPI_CHECK(MPI_Bcast(&byte, 1, MPI_BYTE, 5, comm));
    ADD_FAILURE() << "no error for root 5 of 1 rank";
  } catch (const LibraryError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("MPI call failed: MPI_Bcast(&byte, 1, MPI_BYTE, 5, comm)"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("test_communicator.cpp:"), std::string::npos) << what;
    EXPECT_NE(what.find("root"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  MPI_Comm_free(&comm);
}

}  // namespace
}  // namespace lockstep::distributed
