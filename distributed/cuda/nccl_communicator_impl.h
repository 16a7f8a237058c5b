// The NCCL communicator's class, shared by nccl_communicator.cpp (start-up,
// collectives, waits, errors) and nccl_reducer.cpp (the DeviceReducer side).
// Private to distributed/cuda: include distributed/cuda/nccl_communicator.h.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "distributed/communicator.h"
#include "distributed/cuda/nccl_communicator.h"
#include "distributed/device_reducer.h"

namespace lockstep::distributed {

[[noreturn]] inline void throw_nccl_error(ncclResult_t result, const char* expression,
                                          const char* file, int line) {
  cudaGetLastError();  // a runtime failure inside NCCL is reported here, not at a later check
  const char* last = ncclGetLastError(nullptr);
  const bool has_last = last != nullptr && *last != '\0';
  fail_library_call("NCCL", expression, file, line, ncclGetErrorString(result),
                    has_last ? ": " : "", has_last ? last : "");
}

}  // namespace lockstep::distributed

// NCCL_CHECK(expr): throws LibraryError unless expr returns ncclSuccess (or
// ncclInProgress, the normal answer of a non-blocking communicator).
#define NCCL_CHECK(expression)                                                                \
  do {                                                                                        \
    const ncclResult_t lockstep_nccl_result_ = (expression);                                  \
    if (lockstep_nccl_result_ != ncclSuccess && lockstep_nccl_result_ != ncclInProgress) {    \
      ::lockstep::distributed::throw_nccl_error(lockstep_nccl_result_, #expression, __FILE__, \
                                                __LINE__);                                    \
    }                                                                                         \
  } while (0)

namespace lockstep::distributed::nccl_detail {

using Clock = std::chrono::steady_clock;

// True for device (or managed) memory; false for host memory, registered or
// not.
bool on_device(const void* p);
ncclRedOp_t nccl_op(ReduceOp op);

struct StreamDeleter {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDeleter>;

Event make_event();

// Aborting is local and cannot hang on a peer that died (see the header).
struct CommAborter {
  void operator()(ncclComm_t c) const noexcept { ncclCommAbort(c); }
};

class NcclCommunicator final : public Communicator, public DeviceReducer {
 public:
  NcclCommunicator(Communicator& mpi, int device);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return mpi_.local_rank(); }
  int local_size() const override { return mpi_.local_size(); }
  int node_count() const override { return mpi_.node_count(); }
  std::string host_name() const override { return mpi_.host_name(); }
  std::string describe() const override {
    return "nccl " + nccl_version() + " on cuda:" + std::to_string(device_) +
           " (host side: " + mpi_.describe() + ")";
  }

  void allreduce(std::span<float> data, ReduceOp op) override;
  void allreduce(std::span<double> data, ReduceOp op) override { mpi_.allreduce(data, op); }
  void allreduce(std::span<int64_t> data, ReduceOp op) override { mpi_.allreduce(data, op); }
  void allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override;
  void barrier() override { mpi_.barrier(); }
  DeviceReducer* device_reducer() override { return this; }
  void mark_ready(size_t slot, void* stream) override;
  void enqueue_allreduce(size_t slot, std::span<float> data, ReduceOp op) override;
  void finish(void* stream) override;
  [[noreturn]] void abort(int exit_code) noexcept override {
    if (ncclComm_t c = comm_.release()) ncclCommAbort(c);
    mpi_.abort(exit_code);
    std::_Exit(exit_code);  // not reached: MPI's abort does not return
  }

  void set_stall_policy(StallPolicy policy) override {
    policy.validate();
    {
      std::lock_guard lock(mutex_);
      policy_ = policy;
    }
    mpi_.set_stall_policy(std::move(policy));
  }
  void set_stall_label(std::string label) override {
    {
      std::lock_guard lock(mutex_);
      label_ = label;
    }
    mpi_.set_stall_label(std::move(label));
  }

 private:
  // Marks the communicator busy for one operation until destroyed.
  struct Claim {
    std::atomic<bool>& flag;
    ~Claim() { flag = false; }
  };
  // Throws when another operation is in flight or NCCL was aborted.
  [[nodiscard]] Claim claim(const char* operation);
  cudaEvent_t ready_event(size_t slot);
  // Throws on every rank when some rank's `error` is not empty.
  void agree(const std::string& error, const char* what);
  // Makes NCCL's stream wait for everything queued so far on the legacy
  // default stream, and so on every blocking stream (the backend's).
  void wait_for_legacy_stream();
  // Runs enqueue(comm, stream) (one NCCL call) after wait_for_legacy_stream()
  // and waits for its result.
  template <typename Enqueue>
  void run(const char* operation, Enqueue enqueue);
  // Polls until NCCL is idle and done() holds, watching NCCL's asynchronous
  // errors and the stall policy.
  void wait_until(const char* operation, const std::function<bool()>& done);
  [[noreturn]] void fail_async(const char* operation, ncclResult_t state);
  void report_stall(const StallPolicy& policy, const char* operation, double waited, bool aborting);

  Communicator& mpi_;
  const int device_;
  const int rank_, size_;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<ncclComm, CommAborter> comm_;
  Event done_event_;                 // recorded after the last queued device allreduce
  Event legacy_event_;               // recorded on the legacy default stream
  std::mutex events_mutex_;          // guards ready_events_ (mark_ready runs beside enqueues)
  std::vector<Event> ready_events_;  // per slot: its input is complete
  std::atomic<bool> busy_{false};
  uint64_t sequence_ = 0;  // NCCL collectives issued so far
  // The longest the join of the communicator may wait (NCCL's bootstrap
  // takes seconds; minutes only when something is wrong).
  static constexpr double kInitAbortSeconds = 600.0;
  std::mutex mutex_;  // guards policy_ and label_
  StallPolicy policy_;
  std::string label_;
};

}  // namespace lockstep::distributed::nccl_detail
