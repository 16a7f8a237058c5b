// The NCCL communicator under mpiexec: allreduce (every op), broadcast from
// every root and allgather on device memory, checked against values each
// rank computes itself; host memory going through MPI; and a rank that
// cannot use its device making every rank fail with a message (that one runs
// without GPUs too). Tests that need GPUs skip, on every rank alike, unless
// every node has a device for each of its ranks.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "distributed/communicator.h"

#if LOCKSTEP_HAVE_CUDA

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "mpi/mpi_test_util.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/tensor.h"
#include "support/nccl_test_util.h"

namespace lockstep::distributed {
namespace {

using testing::device_copy;
using testing::host_copy;
using testing::make_test_comm;
using testing::make_test_nccl;

TEST(Nccl, AllreduceEveryOpOnDeviceMemory) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto nccl = make_test_nccl(*mpi);
  EXPECT_NE(nccl->describe().find("nccl "), std::string::npos) << nccl->describe();
  const int rank = nccl->rank(), size = nccl->size();
  for (const size_t count : {size_t{1}, size_t{7}, size_t{1000}, size_t{1} << 22}) {
    std::vector<float> mine(count);
    for (size_t i = 0; i < count; ++i)
      mine[i] = static_cast<float>(rank + static_cast<int>(i % 64));
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax}) {
      SCOPED_TRACE(to_string(op) + " of " + std::to_string(count));
      nn::Tensor data = device_copy(mine);
      nccl->allreduce(data.span(), op);
      const std::vector<float> got = host_copy(data);
      for (size_t i = 0; i < count; ++i) {
        const double base = static_cast<double>(i % 64);
        const double sum = size * base + size * (size - 1) / 2.0;
        const double want = op == ReduceOp::kSum       ? sum
                            : op == ReduceOp::kAverage ? sum / size
                            : op == ReduceOp::kMin     ? base
                                                       : base + size - 1;
        // Sums of small integers are exact; the average is scaled by 1/size.
        ASSERT_NEAR(got[i], want, op == ReduceOp::kAverage ? 1e-5 * (want + 1) : 0.0)
            << "element " << i;
      }
    }
  }
}

TEST(Nccl, BroadcastFromEveryRootAndAllgatherOnDeviceMemory) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto nccl = make_test_nccl(*mpi);
  const int rank = nccl->rank(), size = nccl->size();
  const size_t count = 1001;
  for (int root = 0; root < size; ++root) {
    std::vector<float> mine(count, static_cast<float>(rank));
    nn::Tensor data = device_copy(mine);
    nccl->broadcast(std::as_writable_bytes(data.span()), root);
    for (float v : host_copy(data)) ASSERT_EQ(v, static_cast<float>(root)) << "root " << root;
  }
  const nn::Tensor in = device_copy(std::vector<float>(count, static_cast<float>(rank) + 0.5f));
  nn::Tensor out({static_cast<int64_t>(count) * size}, nn::Device::kCuda);
  nccl->allgather(std::as_bytes(in.span()), std::as_writable_bytes(out.span()));
  const std::vector<float> gathered = host_copy(out);
  for (int r = 0; r < size; ++r) {
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(gathered[r * count + i], static_cast<float>(r) + 0.5f) << "block " << r;
    }
  }
}

// On one rank an allreduce or a broadcast leaves its buffer as it was, so
// only an out-of-place collective shows whether NCCL waited for the work
// queued before it: `in` holds a sentinel in memory, then the backend
// writes this rank's value into it behind long work, with no host wait; an
// allgather that did not wait for the backend's stream would gather the
// sentinel.
TEST(Nccl, AllgatherWaitsForTheBackendsQueuedWrites) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto backend = nn::make_cuda_backend(mpi->local_rank(), true);
  auto nccl = make_test_nccl(*mpi);
  const int rank = nccl->rank(), size = nccl->size();
  const int64_t count = int64_t{1} << 20, m = int64_t{4096} * 4096;
  nn::Tensor ga({m}, nn::Device::kCuda), gb({m}, nn::Device::kCuda), gc({m}, nn::Device::kCuda);
  backend->fill(m, 1.0f / 4096.0f, ga.data());
  backend->fill(m, 1.0f, gb.data());
  nn::Tensor in({count}, nn::Device::kCuda), out({count * size}, nn::Device::kCuda);
  for (int round = 0; round < 3; ++round) {
    backend->fill(count, -1000.0f, in.data());
    backend->synchronize();  // the sentinel is in memory
    nn::cuda_test::queue_long_work(*backend, ga, gb, gc);
    backend->fill(count, static_cast<float>(rank + round) + 0.5f, in.data());
    nccl->allgather(std::as_bytes(in.span()), std::as_writable_bytes(out.span()));
    const std::vector<float> gathered = host_copy(out);
    for (int r = 0; r < size; ++r) {
      for (int64_t i = 0; i < count; i += 4099) {
        ASSERT_EQ(gathered[static_cast<size_t>(r * count + i)],
                  static_cast<float>(r + round) + 0.5f)
            << "round " << round << " block " << r << " element " << i;
      }
    }
  }
}

TEST(Nccl, HostMemoryGoesThroughMpi) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto nccl = make_test_nccl(*mpi);
  const int rank = nccl->rank(), size = nccl->size();
  std::vector<float> floats(5, static_cast<float>(rank + 1));
  nccl->allreduce(std::span<float>(floats), ReduceOp::kSum);
  for (float v : floats) EXPECT_EQ(v, size * (size + 1) / 2.0f);
  std::vector<double> doubles{1.0 * rank};
  nccl->allreduce(std::span<double>(doubles), ReduceOp::kMax);
  EXPECT_EQ(doubles[0], size - 1.0);
  std::vector<int64_t> ints{rank + 1};
  nccl->allreduce(std::span<int64_t>(ints), ReduceOp::kSum);
  EXPECT_EQ(ints[0], int64_t{size} * (size + 1) / 2);
  std::string text = rank == 0 ? "from rank 0" : "";
  nccl->broadcast_string(text, 0);
  EXPECT_EQ(text, "from rank 0");
  const std::vector<int> ranks = nccl->allgather_value(rank);
  for (int r = 0; r < size; ++r) EXPECT_EQ(ranks[r], r);
  nccl->barrier();
}

// Runs with or without GPUs: the last rank asks for a device that does not
// exist; every rank throws DistributedError and the culprit names its device.
TEST(Nccl, UnusableDeviceFailsOnEveryRank) {
  auto mpi = make_test_comm();
  const int rank = mpi->rank(), last = mpi->size() - 1;
  const int device = rank == last ? 1 << 20 : mpi->local_rank();
  try {
    make_nccl_communicator(*mpi, device);
    ADD_FAILURE() << "make_nccl_communicator succeeded on rank " << rank;
  } catch (const DistributedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("could not use their CUDA device"), std::string::npos) << message;
    EXPECT_NE(message.find(std::to_string(last)), std::string::npos) << message;
    if (rank == last) {
      EXPECT_NE(message.find("cannot use CUDA device 1048576"), std::string::npos) << message;
    }
  }
  mpi->barrier();  // every rank is still in step
}

}  // namespace
}  // namespace lockstep::distributed

#else  // !LOCKSTEP_HAVE_CUDA

TEST(Nccl, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("no NCCL communicator to test");
}

#endif
