// Cost of the stall watchdog's polled allreduce (MPI_Iallreduce + MPI_Test
// loop) against plain MPI_Allreduce and the communicator's blocking mode.
// Prints the numbers on rank 0; asserts only that every result is right,
// also when one rank arrives late (timings on a shared 2-core machine are no
// pass/fail criterion, and nothing here depends on them).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>
#include <vector>

#include "distributed/mpi_communicator.h"

namespace lockstep::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(AllreduceTiming, PolledAgainstPlainMpiAllreduce) {
  MpiCommunicatorOptions blocking_options;
  blocking_options.stall.warning_seconds = 0.0;
  auto blocking = make_mpi_communicator(MPI_COMM_WORLD, blocking_options);
  auto polled = make_mpi_communicator(MPI_COMM_WORLD);  // default policy: warn after 60 s
  MPI_Comm raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);
  const int rank = polled->rank(), size = polled->size();
  const bool oversubscribed = size > 2;  // more ranks than cores here: timings meaningless

  for (size_t bytes : {size_t{4} << 10, size_t{4} << 20}) {
    const size_t n = bytes / sizeof(float);
    int iterations = bytes < (size_t{1} << 20) ? 200 : 10;
    if (oversubscribed) iterations = bytes < (size_t{1} << 20) ? 10 : 2;  // milliseconds per call
    const int round_count = oversubscribed ? 3 : 15;
    std::vector<float> data(n, 1.0f);
    // Max (as costly as a sum) keeps the values finite. Each variant: per-op time of `iterations`
    // back-to-back allreduces, several rounds interleaved with the other variants; the median round
    // counts.
    const std::vector<std::pair<const char*, std::function<void()>>> variants = {
        {"MPI_Allreduce",
         [&] {
           MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(n), MPI_FLOAT, MPI_MAX, raw);
         }},
        {"blocking", [&] { blocking->allreduce(std::span<float>(data), ReduceOp::kMax); }},
        {"polled", [&] { polled->allreduce(std::span<float>(data), ReduceOp::kMax); }},
        {"polled avg", [&] { polled->allreduce(std::span<float>(data), ReduceOp::kAverage); }},
    };
    std::vector<std::vector<double>> rounds(variants.size());
    for (int round = 0; round < round_count; ++round) {
      for (size_t v = 0; v < variants.size(); ++v) {
        MPI_Barrier(raw);
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i) {
          variants[v].second();
        }
        ASSERT_EQ(data.front(), 1.0f) << variants[v].first;  // the max of ones
        rounds[v].push_back(seconds_since(start) / iterations);
      }
    }
    // Max and average of ones leave ones (sums would overflow); check a sum.
    std::fill(data.begin(), data.end(), 1.0f);
    polled->allreduce(std::span<float>(data), ReduceOp::kSum);
    EXPECT_EQ(data.back(), static_cast<float>(size));
    if (rank == 0) {
      std::printf("[timing] allreduce %zu KiB, %d ranks%s:", bytes >> 10, size,
                  oversubscribed ? " (oversubscribed)" : "");
      // The best round shows the cost on a quiet machine; the median, with
      // whatever else the machine was doing.
      for (size_t v = 0; v < variants.size(); ++v) {
        std::printf(" %s %.1f us (median %.1f)%s", variants[v].first,
                    *std::min_element(rounds[v].begin(), rounds[v].end()) * 1e6,
                    median(rounds[v]) * 1e6, v + 1 < variants.size() ? "," : "\n");
      }
      std::fflush(stdout);
    }
  }

  // A rank that arrives 20 ms late: how long it spends in the allreduce once
  // there, i.e. how fast the sleeping, polling ranks notice and finish.
  const size_t n = (size_t{4} << 20) / sizeof(float);
  std::vector<float> data(n, 1.0f);
  for (auto* comm : {blocking.get(), polled.get()}) {
    std::vector<double> inside;
    for (int i = 0; i < (oversubscribed ? 3 : 15); ++i) {
      comm->barrier();
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      std::fill(data.begin(), data.end(), static_cast<float>(rank));
      const auto start = Clock::now();
      comm->allreduce(std::span<float>(data), ReduceOp::kMax);
      inside.push_back(seconds_since(start));
      ASSERT_EQ(data.front(), static_cast<float>(size - 1));
      ASSERT_EQ(data.back(), static_cast<float>(size - 1));
    }
    if (rank == 1) {
      std::printf("[timing] 4 MiB allreduce, late rank's time inside (%s): %.1f us\n",
                  comm == blocking.get() ? "blocking" : "polled", median(inside) * 1e6);
      std::fflush(stdout);
    }
  }
  MPI_Comm_free(&raw);
}

}  // namespace
}  // namespace lockstep::distributed
