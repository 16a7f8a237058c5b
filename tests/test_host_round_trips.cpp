// A training step reads nothing back from the device (app/run/trainer.h):
// through a counting backend (tests/support/counting_backend.h), the
// steady-state steps of an epoch (the second to the last) make no host wait
// and no device-to-host copy, and the epoch's loss (with TensorBoard's step
// losses) comes back in one read. With the training set resident in the
// backend's memory (the default for a small set) they copy nothing to it
// either: the set is uploaded once, the epoch's order once per epoch; with
// host batches (resident_data_mb = 0) each step uploads its batch, and the
// metrics are the same bits.
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
  std::vector<app::EpochResult> history;
};

// Trains `model` for 2 epochs of 16 steps (128 synthetic MNIST images, batch
// 8) with the default configuration otherwise (a run directory with
// metrics, checkpoints and TensorBoard's step/train_loss every 10 steps),
// counting host traffic. resident_data_mb as the config key (the default:
// the training set is resident; 0: host batches).
CountedRun counted_run(const std::string& model,
                       double resident_data_mb = app::TrainConfig{}.resident_data_mb) {
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
  config.resident_data_mb = resident_data_mb;
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
  run.history = trainer.history();
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

// The training and test sets resident: steady steps copy nothing to the
// backend; each set, its labels and its normalisation table are uploaded
// once before the first step, and each epoch's sample order once, as the
// last counted op before its first step (which itself counts none). The
// first evaluation uploads the test set's order, the second nothing.
void expect_steady_steps_copy_nothing(const CountedRun& run) {
  ASSERT_EQ(run.steps.size(), 32u);
  EXPECT_EQ(ops_between(run, 0, run.steps[0].ops),
            "upload upload upload upload upload upload upload ");
  const auto uploads = [&](size_t from, size_t to) {
    int64_t n = 0;
    for (size_t k = from; k < to; ++k) n += run.ops[k] == "upload" ? 1 : 0;
    return n;
  };
  EXPECT_EQ(uploads(run.steps[15].ops, run.steps[16].ops), 2)
      << "the first evaluation's order, the second epoch's: "
      << ops_between(run, run.steps[15].ops, run.steps[16].ops);
  EXPECT_EQ(uploads(run.steps[31].ops, run.ops.size()), 0)
      << "the second evaluation: " << ops_between(run, run.steps[31].ops, run.ops.size());
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepCount& now = run.steps[i];
    const size_t from = i == 0 ? 0 : run.steps[i - 1].ops;
    if (now.step == 0) {
      ASSERT_GT(now.ops, from) << "epoch " << now.epoch + 1;
      EXPECT_EQ(run.ops[now.ops - 1], "upload")
          << "epoch " << now.epoch + 1 << ": " << ops_between(run, from, now.ops);
      continue;
    }
    const nn::HostTraffic d = now.traffic - run.steps[i - 1].traffic;
    EXPECT_EQ(d.writes, 0) << "epoch " << now.epoch + 1 << " step " << now.step + 1 << ": "
                           << ops_between(run, from, now.ops);
  }
}

// The epoch's loss totals come back in one download, after its last step
// and before anything else of the epoch's end is counted; its evaluation
// (loss totals and outputs kept in the backend's memory) in one more, and
// nothing else is read between the epochs.
void expect_one_read_back_per_epoch(const CountedRun& run) {
  int64_t downloads = 0;
  for (const std::string& op : run.ops) downloads += op == "download" ? 1 : 0;
  EXPECT_EQ(downloads, 2 * 2) << ops_between(run, 0, run.ops.size());
  for (size_t i = 0; i < run.steps.size(); ++i) {
    const StepCount& s = run.steps[i];
    if (s.step != run.steps_per_epoch - 1) continue;
    ASSERT_LT(s.ops, run.ops.size());
    EXPECT_EQ(run.ops[s.ops], "download") << "epoch " << s.epoch + 1;
    const size_t end = i + 1 < run.steps.size() ? run.steps[i + 1].ops : run.ops.size();
    int64_t reads = 0;
    for (size_t k = s.ops; k < end; ++k) {
      const auto mark = CountingBackend::marks().find(run.ops[k]);
      reads += mark == CountingBackend::marks().end() ? 0 : mark->second.reads;
    }
    EXPECT_EQ(reads, 2) << "epoch " << s.epoch + 1 << ": " << ops_between(run, s.ops, end);
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

TEST(HostRoundTrips, MnistNetSteadyStepsWaitReadAndCopyNothing) {
  const CountedRun run = counted_run("mnist_net");
  expect_steady_steps_read_nothing(run);
  expect_steady_steps_copy_nothing(run);
  expect_one_read_back_per_epoch(run);
  expect_step_losses(run);
}

// Host batches: each step uploads its images, its labels and, for each of
// mnist_net's two dropout layers, its sample ids, and still reads nothing;
// the metrics are the resident run's bits.
TEST(HostRoundTrips, HostBatchesUploadEachStepAndGiveTheSameMetrics) {
  const CountedRun host = counted_run("mnist_net", 0.0);
  expect_steady_steps_read_nothing(host);
  expect_one_read_back_per_epoch(host);
  for (size_t i = 1; i < host.steps.size(); ++i) {
    if (host.steps[i].step == 0) continue;
    const nn::HostTraffic d = host.steps[i].traffic - host.steps[i - 1].traffic;
    EXPECT_EQ(d.writes, 4) << ops_between(host, host.steps[i - 1].ops, host.steps[i].ops);
  }
  const CountedRun resident = counted_run("mnist_net");
  ASSERT_EQ(host.history.size(), 2u);
  ASSERT_EQ(resident.history.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(host.history[e].train_loss, resident.history[e].train_loss) << e;
    EXPECT_EQ(host.history[e].train_accuracy, resident.history[e].train_accuracy) << e;
    EXPECT_EQ(host.history[e].test_loss, resident.history[e].test_loss) << e;
  }
  EXPECT_EQ(host.step_losses, resident.step_losses);
}

TEST(HostRoundTrips, ResNetSteadyStepsWaitReadAndCopyNothing) {
  const CountedRun run = counted_run("resnet20");
  expect_steady_steps_read_nothing(run);
  expect_steady_steps_copy_nothing(run);
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
