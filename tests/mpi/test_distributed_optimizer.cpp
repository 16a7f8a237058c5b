// DistributedOptimizer across ranks. Equivalence: N ranks, each taking rows
// r, r+N, ... of a global batch of N*B samples, end with the weights of one
// model trained on the whole N*B batch in one process (every rank computes
// that reference itself, with no communicator), for every fusion, overlap,
// accumulation and compression setting. Also: broadcast_parameters, errors
// raised on every rank together (no rank left waiting), and the last bucket
// reduced by the caller when nothing overlaps. The merged timeline:
// tests/mpi/test_timeline.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.h"
#include "distributed/distributed_optimizer.h"
#include "distributed/timeline.h"
#include "mpi/mpi_test_util.h"
#include "nn/model_zoo.h"
#include "support/training_fixtures.h"

namespace lockstep::distributed {
namespace {

using nn::Device;
using nn::Tensor;
using testing::Batch;
using testing::make_batch;
using testing::make_test_comm;
using testing::shared_scratch_dir;
using testing::values;

constexpr uint64_t kSeed = 7;

// The small CNN with dropout (testing::small_model has none).
std::unique_ptr<nn::Model> small_model(uint64_t seed, int64_t hidden = 16) {
  return testing::custom_model({"conv2d out=4 kernel=3", "relu", "max_pool2d kernel=2", "flatten",
                                "linear out=" + std::to_string(hidden), "relu", "dropout p=0.25",
                                "linear out=10", "log_softmax"},
                               {1, 8, 8}, seed);
}

nn::OptimizerConfig sgd_momentum() {
  return {.kind = nn::OptimizerKind::kSgd, .momentum = 0.9f, .weight_decay = 1e-4f};
}

void backward(nn::Model& m, nn::Backend& backend, const Batch& b, float grad_scale,
              const std::function<void(size_t)>& on_ready = {}) {
  nn::ForwardContext ctx{.training = true, .seed = 99, .epoch = 0, .sample_ids = b.ids.data()};
  m.forward(backend, b.x, ctx);
  m.loss(backend, b.labels.data(), grad_scale, true);
  m.backward(backend, on_ready);
}

struct Setting {
  std::string name;
  DistributedOptimizerConfig config;
  double tolerance;  // relative, against the one-process reference
};

void PrintTo(const Setting& s, std::ostream* out) {
  *out << s.name;
}

std::string setting_name(const ::testing::TestParamInfo<Setting>& info) {
  return info.param.name;
}

class Equivalence : public ::testing::TestWithParam<Setting> {};

TEST_P(Equivalence, NRanksAtBatchBMatchOneProcessAtBatchNB) {
  const Setting& s = GetParam();
  auto comm = make_test_comm();
  const int size = comm->size(), rank = comm->rank();
  const int k = s.config.backward_passes_per_step;
  const int64_t local = 4, global = local * size, steps = 5;
  const float lr = 0.1f;
  auto backend = nn::make_cpu_backend(1);

  // The reference: one model, the whole global batch, no communicator.
  auto reference = small_model(kSeed);
  auto reference_sgd = nn::make_optimizer(sgd_momentum(), reference->parameters(), Device::kCpu);
  // This rank's replica starts from other weights: broadcast must fix that.
  auto replica = small_model(kSeed + 1000 * static_cast<uint64_t>(rank));
  auto inner = nn::make_optimizer(sgd_momentum(), replica->parameters(), Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, replica->parameters(), *inner, s.config);
  dopt.broadcast_parameters(0);
  ASSERT_EQ(values(*replica), values(*reference));

  const std::vector<float> initial = values(*reference);
  for (int64_t step = 0; step < steps; ++step) {
    std::vector<int64_t> all;
    for (int64_t j = 0; j < global; ++j) all.push_back(step * global + j);
    backward(*reference, *backend, make_batch(all), 1.0f / static_cast<float>(global));
    reference_sgd->step(*backend, lr);

    // Rank r's rows r, r+N, ...; with k passes, k consecutive slices of them.
    std::vector<int64_t> mine;
    for (int64_t j = rank; j < global; j += size) mine.push_back(step * global + j);
    const int64_t per_pass = local / k;
    for (int pass = 0; pass < k; ++pass) {
      std::vector<int64_t> ids(mine.begin() + pass * per_pass,
                               mine.begin() + (pass + 1) * per_pass);
      backward(*replica, *backend, make_batch(ids), 1.0f / static_cast<float>(local),
               dopt.grad_ready_callback());
    }
    dopt.step(lr);
  }

  const std::vector<float> got = values(*replica), want = values(*reference);
  // The largest difference of `weights` from the reference, relative.
  auto worst_difference = [&](const std::vector<float>& weights) {
    double worst = 0.0;
    for (size_t i = 0; i < weights.size(); ++i) {
      const double error = std::fabs(weights[i] - want[i]) / std::max(std::fabs(want[i]), 1e-2f);
      worst = std::max(worst, error);
    }
    return worst;
  };
  // Not vacuous: a replica that never stepped (still the initial weights)
  // would fail by a wide margin.
  EXPECT_GT(worst_difference(initial), 4.0 * s.tolerance)
      << "training moves the weights too little for this tolerance";
  const double worst = worst_difference(got);
  EXPECT_LE(worst, s.tolerance) << "largest relative difference from the reference";
  RecordProperty("worst_relative_difference", std::to_string(worst));
  RecordProperty("frozen_relative_difference", std::to_string(worst_difference(initial)));

  // Every rank holds exactly rank 0's weights.
  std::vector<float> root = got;
  comm->broadcast_values(std::span<float>(root), 0);
  EXPECT_EQ(got, root);
  const auto stats = dopt.stats();
  EXPECT_EQ(stats.steps, steps);
  EXPECT_EQ(stats.allreduces, steps * static_cast<int64_t>(dopt.buckets().size()));
  // Bytes on the wire: 4 per value, 2 with 16-bit compression.
  const int64_t per_value = s.config.compression == Compression::kNone ? 4 : 2;
  EXPECT_EQ(stats.bytes_reduced, steps * replica->parameter_count() * per_value);
}

INSTANTIATE_TEST_SUITE_P(
    Settings, Equivalence,
    ::testing::Values(
        Setting{"DefaultFusion", {}, 1e-5}, Setting{"NoFusion", {.bucket_cap_mb = 0}, 1e-5},
        Setting{"TinyBuckets", {.first_bucket_mb = 0.0001, .bucket_cap_mb = 0.0005}, 1e-5},
        Setting{"OverlapOff", {.overlap = false}, 1e-5},
        // Backward never writes a bucket MPI is reading (TSan cannot see it).
        Setting{"VerifyBuckets",
                {.first_bucket_mb = 0.0001, .bucket_cap_mb = 0.0005, .verify_buckets = true},
                1e-5},
        Setting{"SmallChunks", {.allreduce_chunk_mb = 0.0001}, 1e-5},
        Setting{"Accumulation2", {.bucket_cap_mb = 0.001, .backward_passes_per_step = 2}, 1e-5},
        Setting{"Predivide", {.gradient_predivide_factor = 2.0}, 1e-5},
        Setting{"Fp16", {.compression = Compression::kFp16}, 5e-3},
        Setting{"Fp16PredivideTinyBuckets",
                {.gradient_predivide_factor = 2.0,
                 .first_bucket_mb = 0.0001,
                 .bucket_cap_mb = 0.0005,
                 .compression = Compression::kFp16},
                5e-3},
        Setting{"Bf16", {.compression = Compression::kBf16}, 5e-2},
        Setting{"Bf16NoOverlap", {.compression = Compression::kBf16, .overlap = false}, 5e-2},
        Setting{"Bf16SmallChunks",
                {.allreduce_chunk_mb = 0.0001, .compression = Compression::kBf16},
                5e-2}),
    setting_name);

// Rank 0's optimizer has taken a step (momentum, steps, last lr); the others
// start fresh from other seeds. After the broadcast every rank holds exactly
// what rank 0 holds, which each rank recomputes here without communication.
TEST(DistributedOptimizerMpi, BroadcastCopiesWeightsAndOptimizerStateFromRoot) {
  auto comm = make_test_comm();
  auto backend = nn::make_cpu_backend(1);
  auto build = [&](uint64_t seed, bool step) {
    auto m = small_model(seed);
    auto opt = nn::make_optimizer(sgd_momentum(), m->parameters(), Device::kCpu);
    if (step) {
      backward(*m, *backend, make_batch({1, 2, 3}), 1.0f / 3);
      opt->step(*backend, 0.5f);
    }
    return std::make_pair(std::move(m), std::move(opt));
  };
  auto [model, opt] = build(100 + comm->rank(), comm->rank() == 0);
  auto [expected_model, expected_opt] = build(100, true);
  DistributedOptimizer dopt(*comm, *backend, model->parameters(), *opt);
  dopt.broadcast_parameters(0);
  EXPECT_EQ(values(*model), values(*expected_model));
  auto state = opt->state(), expected_state = expected_opt->state();
  ASSERT_EQ(state.size(), expected_state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    const auto a = state[i].tensor->span(), b = expected_state[i].tensor->span();
    EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << state[i].name;
  }
  EXPECT_EQ(opt->steps(), 1);
  EXPECT_EQ(opt->last_lr(), 0.5f);
}

TEST(DistributedOptimizerMpi, BroadcastRefusesDifferentModelsOnEveryRank) {
  auto comm = make_test_comm();
  auto backend = nn::make_cpu_backend(1);
  auto model = small_model(1, comm->rank() == comm->size() - 1 ? 12 : 16);
  auto opt = nn::make_optimizer(sgd_momentum(), model->parameters(), Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, model->parameters(), *opt);
  try {
    dopt.broadcast_parameters(0);
    FAIL() << "no error";
  } catch (const DistributedError& e) {
    EXPECT_NE(std::string(e.what()).find("the ranks built different models or optimizers"),
              std::string::npos)
        << e.what();
  }
}

// fp16 overflow must stop every rank, not only the one whose gradient grew.
TEST(DistributedOptimizerMpi, Fp16OverflowStopsEveryRankWithTheSameStep) {
  auto comm = make_test_comm();
  auto backend = nn::make_cpu_backend(1);
  const int size = comm->size(), rank = comm->rank();
  nn::Parameter p{"w", Tensor({5}), Tensor({5})};
  std::vector<nn::Parameter*> list{&p};
  auto opt = nn::make_optimizer({}, list, Device::kCpu);
  DistributedOptimizer dopt(*comm, *backend, list, *opt, {.compression = Compression::kFp16});
  auto message = [&](float g) {
    for (float& v : p.grad.span()) v = g;
    dopt.on_grad_ready(0);
    try {
      dopt.synchronize();
    } catch (const DistributedError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // 40000 on every rank: each fits, the sum does not.
  EXPECT_NE(message(40000.0f).find("in the sum over " + std::to_string(size) + " ranks"),
            std::string::npos);
  // 70000 on the last rank only: it names its own value, the others the sum.
  const std::string m = message(rank == size - 1 ? 70000.0f : 1.0f);
  if (rank == size - 1) {
    EXPECT_EQ(m,
              "fp16 gradient overflow in bucket 0 (max |g| = 70000 > 65504): use bf16, "
              "gradient_predivide_factor, or a smaller lr");
  } else {
    EXPECT_EQ(m, "fp16 gradient overflow in bucket 0 (in the sum over " + std::to_string(size) +
                     " ranks: a rank's gradient or the sum exceeds 65504; max |g| on this rank "
                     "= 1): use bf16, gradient_predivide_factor, or a smaller lr");
  }
  // The optimizer is usable again: a fitting gradient reduces.
  EXPECT_EQ(message(1.0f), "no error");
  EXPECT_EQ(p.grad.data()[4], 1.0f);
}

// A small model, its optimizer and a timeline written to a scratch folder
// every rank sees.
struct TimelineRun {
  explicit TimelineRun(const std::string& prefix)
      : dir(shared_scratch_dir(*comm, prefix)),
        file(dir + "/trace.json"),
        timeline(make_timeline(file, *comm)),
        opt(nn::make_optimizer(sgd_momentum(), model->parameters(), Device::kCpu)) {}
  std::unique_ptr<Communicator> comm = make_test_comm();
  std::unique_ptr<nn::Backend> backend = nn::make_cpu_backend(1);
  std::string dir, file;
  std::unique_ptr<Timeline> timeline;
  std::unique_ptr<nn::Model> model = small_model(kSeed);
  std::unique_ptr<nn::Optimizer> opt;
};

// A model in one bucket: nothing is left to overlap it with, so the caller
// reduces it in synchronize() and the communication thread is never woken.
TEST(DistributedOptimizerMpi, LastBucketIsReducedOnTheCallingThreadWhenNothingOverlaps) {
  TimelineRun run("lockstep_mpi_inline");
  auto& [comm, backend, dir, file, timeline, model, opt] = run;
  DistributedOptimizer dopt(*comm, *backend, model->parameters(), *opt,
                            {.timeline = timeline.get()});
  ASSERT_EQ(dopt.buckets().size(), 1u);
  for (int step = 0; step < 3; ++step) {
    backward(*model, *backend, make_batch({step * 2, step * 2 + 1}), 0.5f,
             dopt.grad_ready_callback());
    dopt.step(0.1f);
  }
  EXPECT_EQ(dopt.stats().allreduces, 3);
  EXPECT_TRUE(finish_timeline(*timeline, *comm).empty());
  if (comm->rank() == 0) {
    int on_caller = 0, elsewhere = 0;
    for (const auto& e : read_trace_events(file)) {
      if (e.value("cat", "") != "allreduce" && e.value("cat", "") != "unpack") continue;
      (e["tid"] == Timeline::kMainThread ? on_caller : elsewhere) += 1;
    }
    EXPECT_EQ(on_caller, 2 * 3 * comm->size());  // allreduce + unpack, 3 steps, every rank
    EXPECT_EQ(elsewhere, 0);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace lockstep::distributed
