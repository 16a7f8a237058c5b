#include "app/run/evaluation.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

#include "data/batch_loader.h"
#include "data/sampler.h"

namespace lockstep::app {
namespace {

// Most output floats kept in the backend's memory before they are read back
// (64 MiB): a test set of 10000 samples and 10 classes takes 100000.
constexpr int64_t kMaxPendingOutputs = int64_t{1} << 24;

// The evaluation's loss totals and outputs in the backend's memory, read
// back in one download at the end (or whenever the outputs fill
// kMaxPendingOutputs): (kLossTotalsFloats + rows * classes) floats.
class PendingOutputs {
 public:
  // samples: the rows to come; batch: the most rows add() takes at once.
  PendingOutputs(nn::Backend& backend, int64_t classes, int64_t samples, int64_t batch,
                 ClassMetrics& metrics, std::string source)
      : backend_(backend),
        classes_(classes),
        capacity_(std::max<int64_t>(
            1, std::min(samples,
                        std::max(batch, kMaxPendingOutputs / std::max<int64_t>(classes, 1))))),
        metrics_(metrics),
        source_(std::move(source)),
        device_({nn::kLossTotalsFloats + capacity_ * classes}, backend.device()) {
    backend_.fill(nn::kLossTotalsFloats, 0.0f, device_.data());
  }
  nn::LossTotals* totals() { return reinterpret_cast<nn::LossTotals*>(device_.data()); }

  // Keeps out (n, classes) with its host labels (n).
  void add(const nn::Tensor& out, const int32_t* labels, int64_t n) {
    if (rows_ + n > capacity_) read();
    backend_.copy(n * classes_, out.data(),
                  device_.data() + nn::kLossTotalsFloats + rows_ * classes_);
    labels_.insert(labels_.end(), labels, labels + n);
    rows_ += n;
  }

  // Reads the totals and the kept outputs back (one download) and adds the
  // outputs to the class metrics. Throws InputError naming source when a
  // label was outside the classes.
  nn::LossTotals read() {
    host_.resize(static_cast<size_t>(nn::kLossTotalsFloats + rows_ * classes_));
    backend_.download(device_.data(), host_.data(), host_.size() * sizeof(float));
    nn::LossTotals totals;
    std::memcpy(static_cast<void*>(&totals), host_.data(), sizeof(totals));
    if (totals.bad_labels > 0) {
      fail_input(source_, ": ", totals.bad_labels, " labels outside the model's ", classes_,
                 " classes");
    }
    metrics_.add(host_.data() + nn::kLossTotalsFloats, labels_.data(), rows_);
    labels_.clear();
    rows_ = 0;
    return totals;
  }

 private:
  nn::Backend& backend_;
  const int64_t classes_, capacity_;
  ClassMetrics& metrics_;
  const std::string source_;  // the data set's, for messages
  nn::Tensor device_;
  std::vector<float> host_;
  std::vector<int32_t> labels_;  // of the kept rows
  int64_t rows_ = 0;             // kept rows
};

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

EvalBatches::EvalBatches(const data::Dataset& split, nn::Backend& backend,
                         const data::Normalization& normalization, int64_t batch_size,
                         int64_t classes, int rank, int ranks, double resident_limit_mb)
    : split_(split), batch_size_(batch_size) {
  TrainBatchOptions options;
  options.batch_size = batch_size;
  options.normalization = normalization;
  options.classes = classes;
  batches_ = make_train_batches(split, backend, options, resident_limit_mb);
  indices_ = data::DistributedSampler::for_evaluation(split.size(), rank, ranks).indices();
}

double EvalBatches::resident_mib() const {
  return batches_->resident() ? app::resident_mib(split_) : 0.0;
}

void EvalBatches::start() {
  if (!started_) {
    batches_->start_epoch(indices_, 0);  // resident: the order's one upload
    started_ = true;
  } else {
    batches_->rewind();
  }
  done_ = 0;
}

bool EvalBatches::next(StepBatch& batch) {
  if (done_ >= samples()) return false;
  batch = batches_->next();
  done_ += batch.size;
  return true;
}

EvalResult evaluate_model(nn::Model& model, nn::Backend& backend, EvalBatches& batches,
                          distributed::Communicator& comm, int64_t top_k, bool exact_loss) {
  const data::Dataset& test = batches.split();
  Totals totals;
  auto classes = std::make_shared<ClassMetrics>(model.output_size(), top_k);
  PendingOutputs pending(backend, model.output_size(), batches.samples(), batches.batch_size(),
                         *classes, test.source);
  // On the CPU the forward passes take at most kCpuEvalChunk samples of each
  // batch: the activations of a 1000-sample batch would double the memory
  // of a Fashion-MNIST run, and the sums are the same (per-sample losses).
  constexpr int64_t kCpuEvalChunk = 250;
  std::vector<int32_t> host_labels;  // for the class metrics: the data set's, on the host
  StepBatch batch;
  batches.start();
  while (batches.next(batch)) {
    const nn::Tensor& images = *batch.images;
    const int32_t* labels = batch.labels;
    const int64_t n = batch.size;
    host_labels.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      host_labels[static_cast<size_t>(i)] = test.labels[static_cast<size_t>(batch.sample_ids[i])];
    }
    const int64_t chunk = backend.device() == nn::Device::kCpu ? kCpuEvalChunk : n;
    nn::Shape shape = images.shape();
    const int64_t per_sample = n > 0 ? images.numel() / n : 0;
    for (int64_t first = 0; first < n; first += chunk) {
      shape[0] = std::min(chunk, n - first);
      const nn::Tensor part = nn::Tensor::view(
          const_cast<float*>(images.data()) + first * per_sample, shape, images.device());
      const nn::Tensor& out = model.forward(backend, part, {});
      model.accumulate_loss(backend, labels + first, 0.0f, pending.totals());
      if (exact_loss) totals.add_exact(model.sample_losses(backend, labels + first));
      pending.add(out, host_labels.data() + first, shape[0]);
    }
  }
  const nn::LossTotals sums = pending.read();
  totals.add(sums);  // exact_loss: reduce() takes the loss from the exact sums
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
