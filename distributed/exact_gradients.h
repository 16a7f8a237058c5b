// ExactGradients: the gradient reduction of the reproducible mode
// (docs/reproducible.md). While attached, the model's layers add every
// sample's gradient to a BinnedSum per parameter (nn/exact_sum.h) instead
// of writing Parameter::grad; reduce() agrees on each parameter's top bin
// (an int64 max allreduce), adds the bins of all ranks (an int64 sum
// allreduce: exact), and writes factor * sum into Parameter::grad once.
// The result is the same bits for any number of ranks and any split of the
// samples between them, and for any number of backward passes in between.
//
//   ExactGradients exact(model.parameters());
//   for each pass: forward, loss (grad_scale 1), backward (no callback)
//   exact.reduce(comm, 1.0 / samples_in_step);   // then the optimizer step
//
// Host (CPU backend) parameters only. Collective: reduce() on every rank
// alike. Threads: the thread that runs backward.
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/communicator.h"
#include "nn/exact_sum.h"
#include "nn/layer.h"

namespace lockstep::distributed {

class ExactGradients {
 public:
  // Attaches a sum to every parameter (Parameter::exact); InputError for a
  // parameter that is not in host memory.
  explicit ExactGradients(const std::vector<nn::Parameter*>& params);
  // Detaches the sums.
  ~ExactGradients();
  ExactGradients(const ExactGradients&) = delete;
  ExactGradients& operator=(const ExactGradients&) = delete;

  // Sums over the ranks of comm, writes factor * sum into every
  // Parameter::grad and starts the next step empty. Collective.
  void reduce(Communicator& comm, double factor);
  // Bytes the last reduce() sent per rank (16 per gradient value).
  int64_t bytes_per_step() const { return bytes_; }

 private:
  std::vector<nn::Parameter*> params_;
  std::vector<nn::BinnedSum> sums_;
  int64_t bytes_ = 0;
};

// A sum of doubles (losses) over samples and ranks with the same guarantee.
class ExactScalar {
 public:
  void add(double v) { sum_.add(&v); }
  // The sum over the ranks of comm (collective), times factor.
  double reduce(Communicator& comm, double factor = 1.0);
  void clear() { sum_.clear(); }

 private:
  nn::BinnedSum sum_{1};
};

// Agrees on the top bin of every sum in sums (max allreduce), then adds
// their bins over the ranks (sum allreduce). Collective.
void allreduce_exact(Communicator& comm, std::vector<nn::BinnedSum*> sums);

}  // namespace lockstep::distributed
