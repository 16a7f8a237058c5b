// Single-process tests of the communicators: the size-1 communicator, the MPI
// communicator in a singleton MPI job (no launcher), MPI_CHECK, the stall
// report text and the fingerprint message.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/fingerprint.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator.h"
#include "distributed/stall.h"
#include "nn/error.h"

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

TEST(Stall, RankListsAreCompact) {
  EXPECT_EQ(format_rank_list({}), "");
  EXPECT_EQ(format_rank_list({3}), "3");
  EXPECT_EQ(format_rank_list({0, 1}), "0, 1");
  EXPECT_EQ(format_rank_list({0, 1, 2, 3, 5, 7, 8}), "0-3, 5, 7, 8");
}

TEST(Stall, ReportIsOneLineWithWhatRankZeroKnows) {
  StallReport report;
  report.rank = 0;
  report.operation = "allreduce";
  report.sequence = 1234;
  report.label = "step 1234 bucket 3";
  report.waited_seconds = 60.04;
  report.ranks_known = true;
  report.missing_ranks = {3, 4, 5};
  report.elsewhere = {"rank 7 in barrier #1235 [end of epoch]"};
  EXPECT_EQ(report.message(),
            "rank 0: stall: allreduce #1234 [step 1234 bucket 3] has waited 60.0 s for the other "
            "ranks; missing ranks: 3-5; in other collectives: rank 7 in barrier #1235 [end of "
            "epoch] (a rank is slow, stuck, or issuing different collectives)");
  report.rank = 2;
  report.ranks_known = false;
  report.label.clear();
  report.aborting = true;
  EXPECT_EQ(report.message(),
            "rank 2: stall: allreduce #1234 has waited 60.0 s for the other ranks; ending the "
            "job (stall abort limit reached)");
}

TEST(Stall, PolicyRejectsNegativeAndNonFiniteLimits) {
  StallPolicy policy;
  EXPECT_TRUE(policy.enabled());
  EXPECT_NO_THROW(policy.validate());
  policy.warning_seconds = 0;
  EXPECT_FALSE(policy.enabled());
  policy.abort_seconds = NAN;
  EXPECT_THROW(policy.validate(), InputError);
  policy.abort_seconds = -2;
  try {
    policy.validate();
    ADD_FAILURE();
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find("abort_seconds"), std::string::npos);
  }
}

TEST(Fingerprint, HashSeesEveryKeyValueAndBoundary) {
  const FingerprintItems a = {{"ab", "c"}};
  const FingerprintItems b = {{"a", "bc"}};
  EXPECT_NE(fingerprint_hash(a), fingerprint_hash(b));
  EXPECT_NE(fingerprint_hash({}), fingerprint_hash({{"", ""}}));
  EXPECT_EQ(fingerprint_hash(a), fingerprint_hash(FingerprintItems{{"ab", "c"}}));
}

TEST(Fingerprint, DifferenceNamesTheFirstDifferingItem) {
  const FingerprintItems base = {{"config.batch_size", "64"}, {"config.lr", "0.1"}};
  FingerprintItems other = base;
  other[1].second = "0.2";
  EXPECT_EQ(describe_fingerprint_difference({base, other, base, other}),
            "ranks disagree on config.lr: ranks 0, 2 have 0.1, ranks 1, 3 have 0.2 (start every "
            "rank with the same config and data)");
  FingerprintItems reordered = {base[1], base[0]};
  EXPECT_EQ(describe_fingerprint_difference({base, reordered}),
            "ranks list the same items in different orders: at item 1, rank 0 has "
            "config.batch_size, rank 1 has config.lr (start every rank with the same config and "
            "data)");
  FingerprintItems empty_value = base;
  empty_value[0].second = "";
  EXPECT_EQ(describe_fingerprint_difference({base, empty_value}),
            "ranks disagree on config.batch_size: rank 0 has 64, rank 1 has \"\" (start every "
            "rank with the same config and data)");
  std::vector<FingerprintItems> many;
  for (int r = 0; r < 7; ++r) many.push_back({{"seed", std::to_string(r)}});
  EXPECT_EQ(describe_fingerprint_difference(many),
            "ranks disagree on seed: rank 0 has 0, rank 1 has 1, rank 2 has 2, rank 3 has 3, and "
            "3 more values (start every rank with the same config and data)");
}

}  // namespace
}  // namespace lockstep::distributed
