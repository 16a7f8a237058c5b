// Helpers of the single-process DistributedOptimizer tests: a fake
// communicator that plays identical ranks, a small CNN, one training pass
// (synthetic batches: support/training_fixtures.h).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "distributed/compression.h"
#include "distributed/distributed_optimizer.h"
#include "nn/model_zoo.h"
#include "support/training_fixtures.h"

namespace lockstep::distributed::testing {

using nn::Device;
using nn::Tensor;

// Rank 0 of `size` ranks on one node that all hold the same data: what
// every fake communicator of these tests shares. Broadcast and barrier do
// nothing, allgather repeats this rank's block; the reductions are the
// subclass's.
class IdenticalRanks : public Communicator {
 public:
  explicit IdenticalRanks(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  int local_rank() const override { return 0; }
  int local_size() const override { return size_; }
  int node_count() const override { return 1; }
  std::string host_name() const override { return "fake"; }
  void broadcast(std::span<std::byte>, int) override {}
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override {
    for (int r = 0; r < size_; ++r) std::memcpy(out.data() + r * in.size(), in.data(), in.size());
  }
  void barrier() override {}
  [[noreturn]] void abort(int code) noexcept override { std::_Exit(code); }

 protected:
  int size_;
};

// Plays `size` ranks that all hold the same data: a sum multiplies by size
// (16-bit: size - 1 reduction steps, each rounded). Records the element
// count of every float and every 16-bit allreduce; throws on call
// `fail_call`.
class FakeCommunicator final : public IdenticalRanks {
 public:
  explicit FakeCommunicator(int size) : IdenticalRanks(size) {}
  std::string describe() const override { return "fake"; }
  void allreduce(std::span<float> data, ReduceOp op) override {
    std::lock_guard<std::mutex> lock(mutex_);
    calls.push_back(data.size());
    addresses.push_back(data.data());
    labels.push_back(label_);
    if (static_cast<int>(calls.size()) == fail_call) {
      throw LibraryError("MPI_Allreduce failed: fake network down");
    }
    if (op == ReduceOp::kSum) {
      for (float& v : data) v *= static_cast<float>(size_);
    }
  }
  void allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) override {
    std::lock_guard<std::mutex> lock(mutex_);
    calls_16bit.push_back(data.size());
    threads_16bit.push_back(std::this_thread::get_id());
    const std::vector<uint16_t> mine(data.begin(), data.end());
    for (int r = 1; r < size_ && op == ReduceOp::kSum; ++r) add_16bit(mine, data, format);
  }
  void allreduce(std::span<double>, ReduceOp) override {}
  void allreduce(std::span<int64_t> data, ReduceOp op) override {
    if (op == ReduceOp::kSum) {
      for (int64_t& v : data) v *= size_;
    }
  }
  void set_stall_label(std::string label) override { label_ = std::move(label); }

  std::vector<size_t> calls, calls_16bit;
  std::vector<std::thread::id> threads_16bit;  // of every 16-bit allreduce
  std::vector<const float*> addresses;         // of every float allreduce
  std::vector<std::string> labels;
  int fail_call = -1;

 private:
  std::mutex mutex_;
  std::string label_;
};

// One forward/backward; the loss gradient is scaled by grad_scale.
inline void backward(nn::Model& m, nn::Backend& backend, const Batch& b, float grad_scale,
                     const std::function<void(size_t)>& on_ready = {}) {
  nn::ForwardContext ctx{.training = true};
  m.forward(backend, b.x, ctx);
  m.loss(backend, b.labels.data(), grad_scale, true);
  m.backward(backend, on_ready);
}

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace lockstep::distributed::testing
