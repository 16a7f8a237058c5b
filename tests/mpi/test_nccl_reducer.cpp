// NCCL for gradient buckets, under mpiexec, on GPUs: the 16-bit allreduce
// on device memory, the DeviceReducer ordered after and before the
// backend's stream by events (no host wait between), and the
// DistributedOptimizer over NCCL giving the weights of the host (MPI) path,
// with overlap on and off and with accumulation. Every test skips, on every
// rank alike and saying why, unless every rank has a GPU of its own.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#include "distributed/communicator.h"
#include "distributed/device_reducer.h"
#include "distributed/mpi_communicator.h"

#if LOCKSTEP_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "distributed/distributed_optimizer.h"
#include "mpi/mpi_test_util.h"
#include "nn/cuda/cuda_backend.h"
#include "nn/model_zoo.h"
#include "support/nccl_test_util.h"
#include "support/training_fixtures.h"

namespace lockstep::distributed {
namespace {

using nn::cuda_test::queue_long_work;
using testing::host_copy;
using testing::make_test_comm;
using testing::make_test_nccl;

TEST(NcclReducer, SixteenBitAllreduceOnDeviceMemory) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto backend = nn::make_cuda_backend(mpi->local_rank(), true);
  auto nccl = make_test_nccl(*mpi);
  const int size = mpi->size(), rank = mpi->rank();
  const size_t n = 65537;
  for (Compression f : {Compression::kFp16, Compression::kBf16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
      // Quarter steps in [-5, 5]: every partial sum is exact in both formats.
      std::vector<uint16_t> bits(n);
      auto value = [](int r, size_t i) {
        return static_cast<float>(static_cast<int>((i * 7 + r * 3) % 41) - 20) * 0.25f;
      };
      std::vector<float> mine(n);
      for (size_t i = 0; i < n; ++i) mine[i] = value(rank, i);
      to_16bit(mine, bits, f);
      // 16-bit values travel in a float tensor of half the length (+1).
      nn::Tensor device({static_cast<int64_t>(n / 2 + 1)}, nn::Device::kCuda);
      nn::Tensor host(device.shape());
      std::memcpy(host.data(), bits.data(), n * sizeof(uint16_t));
      device.copy_from(host);
      nccl->allreduce_16bit({reinterpret_cast<uint16_t*>(device.data()), n}, f, op);
      host.copy_from(device);
      std::memcpy(bits.data(), host.data(), n * sizeof(uint16_t));
      std::vector<float> got(n);
      from_16bit(bits, got, f);
      for (size_t i = 0; i < n; ++i) {
        float sum = 0.0f;
        for (int r = 0; r < size; ++r) sum += value(r, i);
        const float want = op == ReduceOp::kSum ? sum : sum / static_cast<float>(size);
        // Average: NCCL scales each contribution, then sums (one rounding each).
        ASSERT_NEAR(got[i], want, op == ReduceOp::kSum ? 0.0 : 0.01 * (std::fabs(want) + 0.25))
            << to_string(f) << " " << to_string(op) << " element " << i;
      }
    }
  }
}

// After: the values to reduce are written by a fill queued behind long work
// and marked right after it; the buffer held a sentinel before, so a
// reduction that did not wait for the mark would sum sentinels (then be
// overwritten by the fill: the result would be this rank's own value).
// Before: the backend's next op on the buffer (scale by 2), queued right
// after finish() with no host synchronisation in between, must see the sum.
TEST(NcclReducer, ReductionIsOrderedAfterAndBeforeTheBackendsStream) {
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto backend = nn::make_cuda_backend(mpi->local_rank(), true);
  auto nccl = make_test_nccl(*mpi);
  DeviceReducer* reducer = nccl->device_reducer();
  ASSERT_NE(reducer, nullptr);
  ASSERT_NE(backend->native_stream(), nullptr);
  const int size = mpi->size(), rank = mpi->rank();
  const int64_t n = int64_t{1} << 22, m = int64_t{4096} * 4096;
  nn::Tensor a({n}, nn::Device::kCuda), b({n}, nn::Device::kCuda);
  nn::Tensor ga({m}, nn::Device::kCuda), gb({m}, nn::Device::kCuda), gc({m}, nn::Device::kCuda);
  backend->fill(m, 1.0f / 4096.0f, ga.data());
  backend->fill(m, 1.0f, gb.data());
  for (int round = 0; round < 3; ++round) {
    backend->fill(n, -1000.0f, a.data());
    backend->synchronize();  // the sentinel is in memory before the round starts
    queue_long_work(*backend, ga, gb, gc);
    backend->fill(n, static_cast<float>(rank + round), a.data());
    reducer->mark_ready(0, backend->native_stream());
    backend->fill(n, 1.0f, b.data());
    reducer->mark_ready(1, backend->native_stream());
    reducer->enqueue_allreduce(0, a.span(), ReduceOp::kSum);
    reducer->enqueue_allreduce(1, b.span(), ReduceOp::kSum);
    reducer->finish(backend->native_stream());
    backend->scale(n, 2.0f, a.data());  // after the reduction, on the backend's stream
    const std::vector<float> got_a = host_copy(a), got_b = host_copy(b);
    const float want_a = 2.0f * static_cast<float>(size * round + size * (size - 1) / 2);
    for (int64_t i = 0; i < n; i += 4099) {
      ASSERT_EQ(got_a[i], want_a) << "round " << round << " element " << i;
      ASSERT_EQ(got_b[i], static_cast<float>(size)) << "round " << round << " element " << i;
    }
  }
}

std::unique_ptr<nn::Model> small_model(nn::Device device) {
  return testing::small_model(5, device);
}

// One forward and backward pass on batch `batch` of this rank.
void backward_pass(nn::Backend& backend, nn::Model& model, DistributedOptimizer& dopt, int rank,
                   int batch) {
  nn::Tensor x({4, 1, 8, 8});
  std::vector<int32_t> labels(4);
  for (int64_t i = 0; i < x.numel(); ++i) {
    x.data()[i] = std::sin(0.37f * static_cast<float>(i + 1000 * (batch * 7 + rank)));
  }
  for (int j = 0; j < 4; ++j) labels[j] = (j * 3 + batch + rank) % 10;
  nn::Tensor xd(x.shape(), nn::Device::kCuda), label_bits({4}), labels_d({4}, nn::Device::kCuda);
  xd.copy_from(x);
  std::memcpy(label_bits.data(), labels.data(), sizeof(int32_t) * 4);
  labels_d.copy_from(label_bits);
  model.forward(backend, xd, {.training = true});
  model.loss(backend, reinterpret_cast<const int32_t*>(labels_d.data()), 0.25f, true);
  model.backward(backend, dopt.grad_ready_callback());
}

// Weights after 3 steps of this rank's batches (backward_passes_per_step
// passes each), through `dopt`.
std::vector<float> train(nn::Backend& backend, nn::Model& model, DistributedOptimizer& dopt,
                         int rank, int passes) {
  dopt.broadcast_parameters(0);
  for (int step = 0; step < 3; ++step) {
    for (int pass = 0; pass < passes; ++pass) {
      backward_pass(backend, model, dopt, rank, step * passes + pass);
    }
    dopt.step(0.1f);
  }
  std::vector<float> out;
  for (const nn::Parameter* p : model.parameters()) {
    const std::vector<float> v = host_copy(p->value);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

struct NcclSetting {
  const char* name;
  bool overlap;
  int passes;
};

class NcclEquivalence : public ::testing::TestWithParam<NcclSetting> {};

TEST_P(NcclEquivalence, DistributedOptimizerOverNcclMatchesTheHostPath) {
  const NcclSetting& s = GetParam();
  auto mpi = make_test_comm();
  SKIP_WITHOUT_DEVICES(*mpi);
  auto backend = nn::make_cuda_backend(mpi->local_rank(), true);
  auto nccl = make_test_nccl(*mpi);
  auto host_model = small_model(nn::Device::kCuda), nccl_model = small_model(nn::Device::kCuda);
  auto host_sgd = nn::make_optimizer({}, host_model->parameters(), nn::Device::kCuda);
  auto nccl_sgd = nn::make_optimizer({}, nccl_model->parameters(), nn::Device::kCuda);
  DistributedOptimizerConfig host_config{.first_bucket_mb = 0.001,
                                         .bucket_cap_mb = 0.002,
                                         .backward_passes_per_step = s.passes,
                                         .overlap = s.overlap};
  // A predivide factor keeps one rank with one pass from passing gradients
  // straight through (no reduction at all); a power of two scales exactly.
  host_config.gradient_predivide_factor = 2.0;
  DistributedOptimizerConfig nccl_config = host_config;
  nccl_config.gradient_comm = nccl.get();
  DistributedOptimizer host(*mpi, *backend, host_model->parameters(), *host_sgd, host_config);
  DistributedOptimizer over_nccl(*mpi, *backend, nccl_model->parameters(), *nccl_sgd, nccl_config);
  ASSERT_GT(over_nccl.buckets().size(), 2u);
  const std::vector<float> want = train(*backend, *host_model, host, mpi->rank(), s.passes);
  const std::vector<float> got = train(*backend, *nccl_model, over_nccl, mpi->rank(), s.passes);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // Both sum (in their own order), then scale by 1/size.
    ASSERT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << "value " << i;
  }
  EXPECT_EQ(over_nccl.stats().allreduces, 3 * static_cast<int64_t>(over_nccl.buckets().size()));
}

INSTANTIATE_TEST_SUITE_P(NcclReducer, NcclEquivalence,
                         ::testing::Values(NcclSetting{"Overlap", true, 1},
                                           NcclSetting{"OverlapOff", false, 1},
                                           NcclSetting{"Accumulation2", true, 2},
                                           NcclSetting{"Accumulation2OverlapOff", false, 2}),
                         [](const ::testing::TestParamInfo<NcclSetting>& setting) {
                           return std::string(setting.param.name);
                         });

}  // namespace
}  // namespace lockstep::distributed

#else  // !LOCKSTEP_HAVE_CUDA

TEST(NcclReducer, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("no NCCL reducer to test");
}

#endif

namespace lockstep::distributed {
namespace {

// Runs everywhere: MPI reduces gradients on the host, never through a DeviceReducer.
TEST(NcclReducer, MpiCommunicatorHasNoDeviceReducer) {
  auto mpi = make_mpi_communicator(MPI_COMM_WORLD);
  EXPECT_EQ(mpi->device_reducer(), nullptr);
  EXPECT_EQ(make_single_communicator()->device_reducer(), nullptr);
}

}  // namespace
}  // namespace lockstep::distributed
