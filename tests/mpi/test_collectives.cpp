// Every collective of the MPI communicator, checked exactly against values
// each rank computes itself, in four modes: blocking MPI calls or polled
// nonblocking ones (the stall watchdog), each with whole spans or with spans
// cut into 7-element chunks (the path taken above INT_MAX elements, tested
// on shorter spans).
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <type_traits>
#include <vector>

#include "distributed/mpi_communicator.h"
#include "mpi/mpi_test_util.h"

namespace lockstep::distributed {
namespace {

using testing::make_test_comm;

const std::vector<size_t> kSizes = {0, 1, 2, 3, 7, 1000, 65537};
// With 7-element chunks: none, one partial, one whole, several with and
// without a remainder (kept short: 3 ranks on 2 cores make each call slow).
const std::vector<size_t> kChunkedSizes = {0, 1, 2, 3, 7, 8, 14, 15, 100};

enum class Mode { kBlocking, kPolled, kBlockingChunked, kPolledChunked };

std::string mode_name(const ::testing::TestParamInfo<Mode>& info) {
  switch (info.param) {
    case Mode::kBlocking:
      return "Blocking";
    case Mode::kPolled:
      return "Polled";
    case Mode::kBlockingChunked:
      return "BlockingChunked";
    case Mode::kPolledChunked:
      return "PolledChunked";
  }
  return "Unknown";
}

std::unique_ptr<Communicator> make_comm(Mode mode) {
  MpiCommunicatorOptions options;
  const bool polled = mode == Mode::kPolled || mode == Mode::kPolledChunked;
  options.stall.warning_seconds = polled ? 20.0 : 0.0;
  options.stall.abort_seconds = polled ? 120.0 : 0.0;
  if (mode == Mode::kBlockingChunked || mode == Mode::kPolledChunked) options.max_chunk = 7;
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

// Rank r's element i: exact in every type, and sums stay exact.
template <typename T>
T value(int r, size_t i) {
  if constexpr (std::is_integral_v<T>) {
    return (int64_t{1} << 40) * (r + 1) - static_cast<int64_t>(i) * (r % 2 ? 3 : -5);
  } else {
    return static_cast<T>(0.25 * (r + 1) + static_cast<double>(i % 1000) - 300.0);
  }
}

template <typename T>
void check_allreduce(Communicator& comm, ReduceOp op, size_t n) {
  const int size = comm.size();
  std::vector<T> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = value<T>(comm.rank(), i);
  comm.allreduce(std::span<T>(data), op);
  size_t wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    T expected = value<T>(0, i);
    for (int r = 1; r < size; ++r) {
      const T v = value<T>(r, i);
      switch (op) {
        case ReduceOp::kSum:
        case ReduceOp::kAverage:
          expected += v;
          break;
        case ReduceOp::kMin:
          expected = std::min(expected, v);
          break;
        case ReduceOp::kMax:
          expected = std::max(expected, v);
          break;
      }
    }
    if (op == ReduceOp::kAverage) expected /= static_cast<T>(size);
    if (data[i] != expected && wrong++ < 3) {
      ADD_FAILURE() << to_string(op) << " of " << n << " elements: element " << i << " is "
                    << data[i] << ", expected " << expected;
    }
  }
  EXPECT_EQ(wrong, 0u) << to_string(op) << " of " << n << " elements";
}

class Collectives : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override { comm_ = make_comm(GetParam()); }
  const std::vector<size_t>& sizes() const {
    const bool chunked = GetParam() == Mode::kBlockingChunked || GetParam() == Mode::kPolledChunked;
    return chunked ? kChunkedSizes : kSizes;
  }
  std::unique_ptr<Communicator> comm_;
};

TEST_P(Collectives, AllreduceEveryTypeOpAndSize) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax}) {
    for (size_t n : sizes()) {
      check_allreduce<float>(*comm_, op, n);
      check_allreduce<double>(*comm_, op, n);
      check_allreduce<int64_t>(*comm_, op, n);
    }
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  auto pattern = [](int root, size_t i) {
    return static_cast<std::byte>((root * 31 + i * 7) & 0xff);
  };
  for (int root = 0; root < comm_->size(); ++root) {
    for (size_t n : sizes()) {
      std::vector<std::byte> data(n, std::byte{0xee});
      if (comm_->rank() == root) {
        for (size_t i = 0; i < n; ++i) data[i] = pattern(root, i);
      }
      comm_->broadcast(data, root);
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += data[i] != pattern(root, i);
      EXPECT_EQ(wrong, 0u) << "broadcast of " << n << " bytes from root " << root;
    }
  }
  std::string text = comm_->rank() == 1 ? "from rank one" : "other";
  comm_->broadcast_string(text, 1);
  EXPECT_EQ(text, "from rank one");
  double values[2] = {comm_->rank() + 0.5, -1.0};
  comm_->broadcast_values(std::span<double>(values), comm_->size() - 1);
  EXPECT_EQ(values[0], comm_->size() - 0.5);
}

TEST_P(Collectives, AllgatherPlacesEachRanksBlock) {
  auto pattern = [](int r, size_t i) {
    return static_cast<std::byte>((r * 53 + i * 11 + 1) & 0xff);
  };
  const size_t size = static_cast<size_t>(comm_->size());
  for (size_t n : sizes()) {
    std::vector<std::byte> in(n);
    for (size_t i = 0; i < n; ++i) in[i] = pattern(comm_->rank(), i);
    std::vector<std::byte> out(n * size, std::byte{0xee});
    comm_->allgather(in, out);
    size_t wrong = 0;
    for (size_t r = 0; r < size; ++r) {
      for (size_t i = 0; i < n; ++i) wrong += out[r * n + i] != pattern(static_cast<int>(r), i);
    }
    EXPECT_EQ(wrong, 0u) << "allgather of " << n << " bytes per rank";
  }
  const std::vector<int64_t> ranks = comm_->allgather_value<int64_t>(comm_->rank() * 10);
  ASSERT_EQ(ranks.size(), size);
  for (size_t r = 0; r < size; ++r) EXPECT_EQ(ranks[r], static_cast<int64_t>(r) * 10);
}

TEST_P(Collectives, BarrierWaitsForTheLastRank) {
  comm_->barrier();
  const auto start = std::chrono::steady_clock::now();
  if (comm_->rank() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  comm_->barrier();
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.25) << "rank " << comm_->rank() << " left the barrier before rank 0 came";
}

INSTANTIATE_TEST_SUITE_P(Modes, Collectives,
                         ::testing::Values(Mode::kBlocking, Mode::kPolled, Mode::kBlockingChunked,
                                           Mode::kPolledChunked),
                         mode_name);

TEST(MpiCommunicator, TopologyOnOneNode) {
  auto comm = make_test_comm();
  int world_rank = 0, world_size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  EXPECT_EQ(comm->rank(), world_rank);
  EXPECT_EQ(comm->size(), world_size);
  // Every rank of these tests runs on this machine.
  EXPECT_EQ(comm->local_rank(), comm->rank());
  EXPECT_EQ(comm->local_size(), comm->size());
  EXPECT_EQ(comm->node_count(), 1);
  EXPECT_FALSE(comm->host_name().empty());
  char host[256] = {};
  std::strncpy(host, comm->host_name().c_str(), sizeof(host) - 1);
  std::vector<char> hosts(sizeof(host) * static_cast<size_t>(comm->size()));
  comm->allgather(std::as_bytes(std::span<const char>(host)),
                  std::as_writable_bytes(std::span<char>(hosts)));
  for (int r = 0; r < comm->size(); ++r) {
    EXPECT_STREQ(hosts.data() + r * sizeof(host), host) << "rank " << r;
  }
  EXPECT_EQ(comm->describe(), "mpi (" + mpi_library_version() + "), " +
                                  std::to_string(comm->size()) + " ranks on 1 node");
  EXPECT_EQ(mpi_library_version().rfind("MPICH ", 0), 0u) << mpi_library_version();
}

// Two communicators from the same world are separate contexts: two threads
// reduce on them at the same time, in opposite orders on odd ranks, and
// neither sees the other's data (with MPI_THREAD_MULTIPLE).
TEST(MpiCommunicator, TwoCommunicatorsWorkIndependentlyOnTwoThreads) {
  auto a = make_test_comm();
  auto b = make_test_comm();
  const int rank = a->rank(), size = a->size();
  auto work = [&](Communicator& comm, int64_t base, int64_t& errors) {
    for (int step = 0; step < 200; ++step) {
      std::vector<int64_t> data(33, base + step + rank);
      comm.allreduce(std::span<int64_t>(data), ReduceOp::kSum);
      const int64_t expected = size * (base + step) + size * (size - 1) / 2;
      for (int64_t v : data) errors += v != expected;
    }
  };
  int64_t errors_a = 0, errors_b = 0;
  {
    std::thread ta, tb;
    if (rank % 2 == 0) {
      ta = std::thread(work, std::ref(*a), 1000, std::ref(errors_a));
      tb = std::thread(work, std::ref(*b), 5000000, std::ref(errors_b));
    } else {
      tb = std::thread(work, std::ref(*b), 5000000, std::ref(errors_b));
      ta = std::thread(work, std::ref(*a), 1000, std::ref(errors_a));
    }
    ta.join();
    tb.join();
  }
  EXPECT_EQ(errors_a, 0);
  EXPECT_EQ(errors_b, 0);
  // Different lengths on a and b in the same order: each matches its own.
  std::vector<float> x(5, 1.0f), y(9, 2.0f);
  a->allreduce(std::span<float>(x), ReduceOp::kSum);
  b->allreduce(std::span<float>(y), ReduceOp::kMax);
  EXPECT_EQ(x[4], static_cast<float>(size));
  EXPECT_EQ(y[8], 2.0f);
}

}  // namespace
}  // namespace lockstep::distributed
