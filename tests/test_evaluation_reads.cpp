// An evaluation (app/run/evaluation.h) keeps its loss totals and outputs in
// the backend's memory and reads them back once, with the metrics of a
// per-batch loss read; a label outside the model's classes is named.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/run/evaluation.h"
#include "common/error.h"
#include "data/batch_loader.h"
#include "distributed/communicator.h"
#include "nn/model_zoo.h"
#include "support/counting_backend.h"
#include "support/cpu_backend.h"
#include "support/dataset_files.h"

namespace lockstep {
namespace {

data::Dataset synthetic_dataset(int64_t n) {
  const auto s = testing::synthetic_images(n, 1, 28, 28);
  data::Dataset ds;
  ds.name = "synthetic/test";
  ds.source = "memory";
  ds.channels = 1, ds.height = 28, ds.width = 28;
  ds.num_classes = 10;
  for (int k = 0; k < 10; ++k) ds.class_names.push_back(std::to_string(k));
  ds.images = s.images;
  ds.labels.assign(s.labels.begin(), s.labels.end());
  return ds;
}

// 600 samples in batches of 400 (the CPU forwards 250 at a time): one read
// in all, and the loss and accuracy of Model::loss read batch by batch.
TEST(EvaluationReads, OneReadBackPerEvaluationWithThePerBatchMetrics) {
  const data::Dataset ds = synthetic_dataset(600);
  auto model = nn::build_model("mnist_net", {}, {1, 28, 28}, 10);
  model->reset_parameters(3, nn::Device::kCpu);
  testing::CountingBackend backend(testing::test_cpu_backend(1));
  const auto comm = distributed::make_single_communicator();
  app::EvalBatches batches(ds, backend, data::mnist_normalization(), 400, 10, 0, 1, 0.0);
  const size_t ops_before = backend.ops().size();
  const nn::HostTraffic before = backend.host_traffic();
  const app::EvalResult got = app::evaluate_model(*model, backend, batches, *comm);
  EXPECT_EQ((backend.host_traffic() - before).reads, 1);
  EXPECT_EQ(backend.ops().back(), "download");
  for (size_t i = ops_before; i < backend.ops().size(); ++i) {
    EXPECT_NE(backend.ops()[i], "nll_loss") << i;
  }

  const auto cpu = testing::test_cpu_backend(1);
  const data::PixelTransform transform(1, data::mnist_normalization());
  double loss = 0.0;
  int64_t correct = 0;
  // The parts the evaluation forwards: 250 + 150 of the first batch, 200.
  for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 250}, {250, 150}, {400, 200}}) {
    std::vector<int64_t> ids;
    for (int64_t i = first; i < first + count; ++i) ids.push_back(i);
    data::Batch batch;
    data::fill_batch(ds, ids, transform, 0, 0, batch);
    model->forward(*cpu, batch.images, {});
    const nn::LossStats s = model->loss(*cpu, batch.labels.data(), 0.0f, false);
    loss += s.loss_sum;
    correct += s.correct;
  }
  EXPECT_EQ(got.samples, 600);
  EXPECT_EQ(got.loss, loss / 600);
  EXPECT_EQ(got.accuracy, static_cast<double>(correct) / 600);
  EXPECT_EQ(got.classes->top_k_accuracy(), got.top_k_accuracy);
}

// A resident test set (resident_data_mb large enough): the pixels, labels,
// table and this rank's order are uploaded once, when the batches are made
// and on the first evaluation; every evaluation after that writes nothing
// and reads once, and all give the host batches' metrics bit for bit.
TEST(EvaluationReads, ResidentTestSetUploadsOnceAndGivesTheHostBatchesMetrics) {
  const data::Dataset ds = synthetic_dataset(300);
  auto model = nn::build_model("mnist_net", {}, {1, 28, 28}, 10);
  model->reset_parameters(5, nn::Device::kCpu);
  const auto comm = distributed::make_single_communicator();
  testing::CountingBackend host_backend(testing::test_cpu_backend(1));
  app::EvalBatches host(ds, host_backend, data::mnist_normalization(), 128, 10, 0, 1, 0.0);
  EXPECT_EQ(host.resident_mib(), 0.0);
  const app::EvalResult want = app::evaluate_model(*model, host_backend, host, *comm);

  testing::CountingBackend backend(testing::test_cpu_backend(1));
  app::EvalBatches resident(ds, backend, data::mnist_normalization(), 128, 10, 0, 1, 64.0);
  EXPECT_GT(resident.resident_mib(), 0.0);
  EXPECT_EQ(backend.host_traffic().writes, 3) << "pixels, labels, table";
  for (int pass = 0; pass < 3; ++pass) {
    SCOPED_TRACE("evaluation " + std::to_string(pass + 1));
    const nn::HostTraffic before = backend.host_traffic();
    const app::EvalResult got = app::evaluate_model(*model, backend, resident, *comm);
    const nn::HostTraffic d = backend.host_traffic() - before;
    EXPECT_EQ(d.writes, pass == 0 ? 1 : 0) << "the order, on the first evaluation only";
    EXPECT_EQ(d.reads, 1);
    EXPECT_EQ(got.samples, 300);
    EXPECT_EQ(got.loss, want.loss);
    EXPECT_EQ(got.accuracy, want.accuracy);
    EXPECT_EQ(got.top_k_accuracy, want.top_k_accuracy);
  }
}

// Two ranks' shards of a resident set: every sample once, the host's sums.
TEST(EvaluationReads, ResidentShardsTakeEverySampleOnce) {
  const data::Dataset ds = synthetic_dataset(101);
  int64_t samples = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const auto backend = testing::test_cpu_backend(1);
    app::EvalBatches batches(ds, *backend, data::mnist_normalization(), 16, 10, rank, 2, 64.0);
    samples += batches.samples();
    app::StepBatch batch;
    int64_t seen = 0;
    batches.start();
    while (batches.next(batch)) {
      for (int64_t i = 0; i < batch.size; ++i) {
        EXPECT_EQ(batch.sample_ids[i] % 2, rank) << "rank " << rank << "'s shard";
        EXPECT_EQ(batch.labels[i], ds.labels[static_cast<size_t>(batch.sample_ids[i])]);
      }
      seen += batch.size;
    }
    EXPECT_EQ(seen, batches.samples());
  }
  EXPECT_EQ(samples, 101);
}

TEST(EvaluationReads, LabelOutsideTheModelsClassesNamesTheDataSet) {
  const data::Dataset ds = synthetic_dataset(50);
  auto model = nn::build_model("mnist_net", {}, {1, 28, 28}, 5);
  model->reset_parameters(3, nn::Device::kCpu);
  const auto backend = testing::test_cpu_backend(1);
  const auto comm = distributed::make_single_communicator();
  for (const double resident_mb : {0.0, 64.0}) {  // host batches, then resident
    SCOPED_TRACE(resident_mb > 0 ? "resident" : "host batches");
    try {
      app::EvalBatches batches(ds, *backend, data::mnist_normalization(), 64, 5, 0, 1, resident_mb);
      app::evaluate_model(*model, *backend, batches, *comm);
      ADD_FAILURE() << "labels up to 9 accepted by a 5-class model";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("memory: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("outside the model's 5 classes"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace lockstep
