// A training step reads nothing back from the device (app/run/trainer.h):
// through a counting backend (tests/support/counting_backend.h), the
// steady-state steps of an epoch (the second to the last) make no host wait
// and no device-to-host copy, and the epoch's loss (with TensorBoard's step
// losses) comes back in one read.
// On the CPU the counts are the decision points a GPU would pay for.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "app/run/tensorboard.h"
#include "app/run/trainer.h"
#include "support/counting_backend.h"
#include "support/dataset_files.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using testing::CountingBackend;

struct StepCount {
  int64_t epoch = 0, step = 0;
  nn::HostTraffic traffic;  // since the trainer was built, after this step
  size_t ops = 0;           // counted ops so far
};

struct CountedRun {
  std::vector<StepCount> steps;
  std::vector<std::string> ops;  // every counted op, in order
  int64_t steps_per_epoch = 0;
  std::map<int64_t, float> step_losses;  // TensorBoard's step/train_loss records
};

// Trains `model` for 2 epochs of 16 steps (128 synthetic MNIST images, batch
// 8) with the default configuration otherwise (a run directory with
// metrics, checkpoints and TensorBoard's step/train_loss every 10 steps),
// counting host traffic.
CountedRun counted_run(const std::string& model) {
  testing::ScratchDir dir;
  testing::write_mnist_dir(dir.path(), 128, 40);
  app::TrainConfig config;
  config.dataset = "mnist";
  config.data_dir = dir.path();
  config.run_dir = dir.file("run");
  config.progress = "plain";  // no live progress line, even on a terminal
  config.threads = 1;
  config.epochs = 2;
  config.batch_size = 8;
  config.model = model;
  CountingBackend* counter = nullptr;
  CountedRun run;
  app::TrainerHooks hooks;
  hooks.wrap_backend = [&](std::unique_ptr<nn::Backend> inner) {
    auto wrapped = std::make_unique<CountingBackend>(std::move(inner));
    counter = wrapped.get();
    return wrapped;
  };
  hooks.after_step = [&](int64_t epoch, int64_t step) {
    run.steps.push_back({epoch, step, counter->host_traffic(), counter->ops().size()});
    run.steps_per_epoch = std::max(run.steps_per_epoch, step + 1);
  };
  std::unique_ptr<distributed::Communicator> comm = distributed::make_single_communicator();
  app::Trainer trainer(config, *comm, hooks);
  trainer.run();
  run.ops = counter->ops();
  const auto events = app::read_scalar_events(
      testing::read_file(dir.file("run/tensorboard/events.out.tfevents.lockstep")));
  for (const auto& e : events) {
    if (e.tag == "step/train_loss") run.step_losses[e.step] = e.value;
  }
  return run;
}

// The counted ops between two points of the run, for failure messages.
std::string ops_between(const CountedRun& run, size_t from, size_t to) {
  std::ostringstream out;
  for (size_t i = from; i < to; ++i) out << run.ops[i] << " ";
  return out.str();
}

void expect_steady_steps_read_nothing(const CountedRun& run) {
  ASSERT_EQ(run.steps_per_epoch, 16);
  ASSERT_EQ(run.steps.size(), 32u);
  for (size_t i = 1; i < run.steps.size(); ++i) {
    const StepCount& now = run.steps[i];
    if (now.step == 0) continue;  // the first step of an epoch follows the last one's evaluation
    const nn::HostTraffic d = now.traffic - run.steps[i - 1].traffic;
    EXPECT_EQ(d.waits, 0) << "epoch " << now.epoch + 1 << " step " << now.step + 1 << ": "
                          << ops_between(run, run.steps[i - 1].ops, now.ops);
    EXPECT_EQ(d.reads, 0) << "epoch " << now.epoch + 1 << " step " << now.step + 1 << ": "
                          << ops_between(run, run.steps[i - 1].ops, now.ops);
  }
}

// The epoch's loss totals come back in one download, after its last step
// and before anything else of the epoch's end is counted.
void expect_one_read_back_per_epoch(const CountedRun& run) {
  int64_t downloads = 0;
  for (const std::string& op : run.ops) downloads += op == "download" ? 1 : 0;
  EXPECT_EQ(downloads, 2) << ops_between(run, 0, run.ops.size());
  for (const StepCount& s : run.steps) {
    if (s.step != run.steps_per_epoch - 1) continue;
    ASSERT_LT(s.ops, run.ops.size());
    EXPECT_EQ(run.ops[s.ops], "download") << "epoch " << s.epoch + 1;
  }
}

// TensorBoard's step losses, taken on the device, are all there.
void expect_step_losses(const CountedRun& run) {
  ASSERT_EQ(run.step_losses.size(), 3u);
  for (const int64_t step : {10, 20, 30}) {
    ASSERT_EQ(run.step_losses.count(step), 1u) << step;
    EXPECT_GT(run.step_losses.at(step), 0.0f) << step;
    EXPECT_LT(run.step_losses.at(step), 10.0f) << step;
  }
}

TEST(HostRoundTrips, MnistNetSteadyStepsWaitForNothingAndReadNothing) {
  const CountedRun run = counted_run("mnist_net");
  expect_steady_steps_read_nothing(run);
  expect_one_read_back_per_epoch(run);
  expect_step_losses(run);
}

TEST(HostRoundTrips, ResNetSteadyStepsWaitForNothingAndReadNothing) {
  const CountedRun run = counted_run("resnet20");
  expect_steady_steps_read_nothing(run);
  expect_one_read_back_per_epoch(run);
  expect_step_losses(run);
}

// The counting backend counts what nn/backend.h marks, and only that.
TEST(HostRoundTrips, CountingBackendCountsTheMarkedOps) {
  CountingBackend backend(nn::make_cpu_backend(1));
  std::vector<float> x(4, 1.0f), y(4);
  backend.relu_forward(4, x.data(), y.data());
  backend.fill(4, 0.0f, y.data());
  EXPECT_EQ(backend.host_traffic(), nn::HostTraffic{});
  backend.download(x.data(), y.data(), sizeof(float) * 4);
  backend.upload(x.data(), y.data(), sizeof(float) * 4);
  backend.synchronize();
  EXPECT_EQ(backend.host_traffic(), (nn::HostTraffic{.waits = 2, .reads = 1, .writes = 1}));
  EXPECT_EQ(backend.ops(), (std::vector<std::string>{"download", "upload", "synchronize"}));
}

}  // namespace
}  // namespace lockstep
