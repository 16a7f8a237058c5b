// `lockstep bench` across ranks: the allreduce benchmark reduces exactly the
// model's gradient bytes in the optimizer's buckets and reports the same
// (slowest-rank) times on every rank. The timeline of a throughput run:
// tests/mpi/test_timeline.cpp.
#include <gtest/gtest.h>

#include "app/commands/bench.h"
#include "mpi/mpi_test_util.h"
#include "nn/model_zoo.h"

namespace lockstep::app {
namespace {

using distributed::testing::make_test_comm;

int64_t gradient_bytes(const std::string& name) {
  auto model = nn::build_model(name, {}, {1, 28, 28}, 10);
  model->reset_parameters(1, nn::Device::kCpu);
  int64_t n = 0;
  for (const nn::Parameter* p : model->parameters()) n += p->value.numel();
  return n * static_cast<int64_t>(sizeof(float));
}

TEST(BenchAllreduce, ReducesTheModelsGradientBytesInItsBuckets) {
  auto comm = make_test_comm();
  const auto fused = run_allreduce_bench({"mnist_net", 1.0, 25.0, true, 3}, *comm);
  EXPECT_EQ(fused.bytes, gradient_bytes("mnist_net"));
  EXPECT_EQ(fused.buckets, 1u);  // 87 KB fit the 1 MiB first bucket
  ASSERT_EQ(fused.fused.size(), 3u);
  ASSERT_EQ(fused.plain.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_GT(fused.fused[i], 0.0);
    EXPECT_GT(fused.plain[i], 0.0);
  }
  // The times are the slowest rank's: the same everywhere.
  const auto medians = comm->allgather_value(fused.fused_median + fused.plain_median);
  for (double m : medians) EXPECT_EQ(m, medians[0]);
  EXPECT_NE(format_allreduce_result(fused, comm->size()).find("fused/plain"), std::string::npos);

  // cap 0: one bucket per parameter, the same bytes.
  const auto per_param = run_allreduce_bench({"mnist_net", 1.0, 0.0, false, 1}, *comm);
  auto model = nn::build_model("mnist_net", {}, {1, 28, 28}, 10);
  model->reset_parameters(1, nn::Device::kCpu);
  EXPECT_EQ(per_param.buckets, model->parameters().size());
  EXPECT_EQ(per_param.bytes, fused.bytes);
}

}  // namespace
}  // namespace lockstep::app
