#include "app/run/evaluation.h"

#include <algorithm>

#include "data/batch_loader.h"
#include "data/sampler.h"

namespace lockstep::app {
namespace {

// The values of t on the host (t itself when it lives there).
const float* host_values(const nn::Tensor& t, nn::Tensor& scratch) {
  if (t.device() == nn::Device::kCpu) return t.data();
  scratch.resize(t.shape());
  scratch.copy_from(t);
  return scratch.data();
}

}  // namespace

void Totals::add(const nn::LossStats& s) {
  loss += s.loss_sum;
  correct += static_cast<double>(s.correct);
  count += static_cast<double>(s.count);
}

void Totals::add(const nn::LossTotals& t) {
  loss += t.loss_sum;
  correct += t.correct;
  count += t.count;
}

void Totals::add_exact(const std::vector<double>& sample_losses) {
  exact_ = true;
  for (double l : sample_losses) exact_loss_.add(l);
}

void Totals::reduce(distributed::Communicator& comm) {
  double v[3] = {loss, correct, count};
  comm.allreduce(std::span<double>(v, 3), distributed::ReduceOp::kSum);
  loss = v[0];
  correct = v[1];
  count = v[2];
  // Every rank alike: a rank without samples still joins the exact sum.
  int64_t exact = exact_ ? 1 : 0;
  comm.allreduce(std::span<int64_t>(&exact, 1), distributed::ReduceOp::kMax);
  if (exact != 0) loss = exact_loss_.reduce(comm);
}

EvalResult evaluate_model(nn::Model& model, nn::Backend& backend, BatchStager& stager,
                          const data::Dataset& test, const data::Normalization& normalization,
                          int64_t batch_size, distributed::Communicator& comm, int64_t top_k,
                          bool exact_loss) {
  auto sampler = data::DistributedSampler::for_evaluation(test.size(), comm.rank(), comm.size());
  data::BatchLoaderOptions lo;
  lo.batch_size = batch_size;
  lo.normalization = normalization;
  data::BatchLoader loader(test, sampler.indices(), lo);
  data::Batch batch;
  Totals totals;
  auto classes = std::make_shared<ClassMetrics>(model.output_size(), top_k);
  nn::Tensor host;
  // On the CPU the forward passes take at most kCpuEvalChunk samples of each
  // batch: the activations of a 1000-sample batch would double the memory
  // of a Fashion-MNIST run, and the sums are the same (per-sample losses).
  constexpr int64_t kCpuEvalChunk = 250;
  while (loader.next(batch)) {
    const nn::Tensor& images = stager.images(batch);
    const int32_t* labels = stager.labels(batch);
    const int64_t n = batch.size();
    const int64_t chunk = backend.device() == nn::Device::kCpu ? kCpuEvalChunk : n;
    nn::Shape shape = images.shape();
    const int64_t per_sample = n > 0 ? images.numel() / n : 0;
    for (int64_t first = 0; first < n; first += chunk) {
      shape[0] = std::min(chunk, n - first);
      const nn::Tensor part = nn::Tensor::view(
          const_cast<float*>(images.data()) + first * per_sample, shape, images.device());
      const nn::Tensor& out = model.forward(backend, part, {});
      totals.add(model.loss(backend, labels + first, 0.0f, false));
      if (exact_loss) totals.add_exact(model.sample_losses(backend, labels + first));
      classes->add(host_values(out, host), batch.labels.data() + first, shape[0]);
    }
  }
  comm.set_stall_label("evaluation metrics");
  totals.reduce(comm);
  classes->reduce(comm);
  EvalResult e;
  e.top_k_accuracy = classes->top_k_accuracy();
  e.classes = classes;
  e.samples = static_cast<int64_t>(totals.count);
  e.loss = totals.count > 0 ? totals.loss / totals.count : 0.0;
  e.accuracy = totals.count > 0 ? totals.correct / totals.count : 0.0;
  return e;
}

void load_weights(const Checkpoint& checkpoint, const std::string& path, nn::Model& model) {
  Checkpoint weights;
  std::vector<NamedTensor> targets;
  for (nn::Parameter* p : model.parameters()) {
    if (const CheckpointEntry* e = checkpoint.find(p->name)) weights.entries.push_back(*e);
    targets.emplace_back(p->name, &p->value);
  }
  for (nn::Buffer* b : model.buffers()) {
    if (const CheckpointEntry* e = checkpoint.find(b->name)) weights.entries.push_back(*e);
    targets.emplace_back(b->name, &b->value);
  }
  restore_tensors(weights, path, targets);
}

}  // namespace lockstep::app
