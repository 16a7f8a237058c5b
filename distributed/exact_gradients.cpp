#include "distributed/exact_gradients.h"

#include <algorithm>

#include "common/error.h"

namespace lockstep::distributed {

// Two collectives for any number of sums: one max of the tops, one sum of
// all their bins packed together.
void allreduce_exact(Communicator& comm, std::vector<nn::BinnedSum*> sums) {
  if (comm.size() == 1) return;
  std::vector<int64_t> tops;
  tops.reserve(sums.size());
  for (const nn::BinnedSum* s : sums) tops.push_back(s->top());
  comm.allreduce(std::span<int64_t>(tops), ReduceOp::kMax);
  std::vector<int64_t> packed;
  for (size_t i = 0; i < sums.size(); ++i) {
    sums[i]->raise_top(tops[i]);
    if (tops[i] == nn::BinnedSum::kEmpty || tops[i] == nn::BinnedSum::kNonFinite) continue;
    packed.insert(packed.end(), sums[i]->bins().begin(), sums[i]->bins().end());
  }
  if (packed.empty()) return;
  comm.allreduce(std::span<int64_t>(packed), ReduceOp::kSum);
  auto from = packed.begin();
  for (size_t i = 0; i < sums.size(); ++i) {
    if (tops[i] == nn::BinnedSum::kEmpty || tops[i] == nn::BinnedSum::kNonFinite) continue;
    const std::span<int64_t> bins = sums[i]->bins();
    std::copy(from, from + static_cast<std::ptrdiff_t>(bins.size()), bins.begin());
    from += static_cast<std::ptrdiff_t>(bins.size());
  }
}

ExactGradients::ExactGradients(const std::vector<nn::Parameter*>& params) : params_(params) {
  sums_.reserve(params_.size());
  for (nn::Parameter* p : params_) {
    if (p->grad.device() != nn::Device::kCpu) {
      fail_input("reproducible: parameter ", p->name,
                 " is not in host memory (the reproducible mode runs on the CPU backend only)");
    }
    sums_.emplace_back(p->grad.numel());
  }
  for (size_t i = 0; i < params_.size(); ++i) params_[i]->exact = &sums_[i];
}

ExactGradients::~ExactGradients() {
  for (nn::Parameter* p : params_) p->exact = nullptr;
}

void ExactGradients::reduce(Communicator& comm, double factor) {
  std::vector<nn::BinnedSum*> sums;
  bytes_ = 0;
  for (nn::BinnedSum& s : sums_) {
    sums.push_back(&s);
    bytes_ += static_cast<int64_t>(s.bins().size_bytes());
  }
  allreduce_exact(comm, sums);
  for (size_t i = 0; i < params_.size(); ++i) {
    sums_[i].result(factor, params_[i]->grad.data());
    sums_[i].clear();
  }
}

double ExactScalar::reduce(Communicator& comm, double factor) {
  allreduce_exact(comm, {&sum_});
  double out = 0.0;
  sum_.result(factor, &out);
  return out;
}

}  // namespace lockstep::distributed
