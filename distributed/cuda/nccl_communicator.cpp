#include "distributed/cuda/nccl_communicator.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "distributed/device_reducer.h"
#include "nn/cuda/cuda_check.h"
#include "nn/error.h"

namespace lockstep::distributed {

[[noreturn]] static void throw_nccl_error(ncclResult_t result, const char* expression,
                                          const char* file, int line) {
  const char* last = ncclGetLastError(nullptr);
  const bool has_last = last != nullptr && *last != '\0';
  throw LibraryError(detail::concat("NCCL call failed: ", expression, " (", file, ":", line,
                                    "): ", ncclGetErrorString(result), has_last ? ": " : "",
                                    has_last ? last : ""));
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

namespace lockstep::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// True for device (or managed) memory; false for host memory, registered or
// not.
bool on_device(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer: clear the error
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kAverage:
      return ncclAvg;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  throw Error("internal error: unknown ReduceOp");
}

struct StreamDeleter {
  void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
};
using Event = std::unique_ptr<CUevent_st, EventDeleter>;

Event make_event() {
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return Event(event);
}
// Aborting is local and cannot hang on a peer that died (see the header).
struct CommAborter {
  void operator()(ncclComm_t c) const noexcept { ncclCommAbort(c); }
};

// What rank 0 broadcasts to start NCCL.
struct Bootstrap {
  ncclUniqueId id;
  int32_t ok;
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
  // Runs enqueue(comm, stream) (one NCCL call) and waits for its result.
  template <typename Enqueue>
  void run(const char* operation, Enqueue enqueue);
  // Polls until NCCL is idle and done() holds, watching NCCL's asynchronous
  // errors and the stall policy.
  template <typename Done>
  void wait_until(const char* operation, Done done);
  [[noreturn]] void fail_async(const char* operation, ncclResult_t state);
  void report_stall(const StallPolicy& policy, const char* operation, double waited, bool aborting);

  Communicator& mpi_;
  const int device_;
  const int rank_, size_;
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<ncclComm, CommAborter> comm_;
  Event done_event_;                 // recorded after the last queued device allreduce
  std::mutex events_mutex_;          // guards ready_events_ (mark_ready runs beside enqueues)
  std::vector<Event> ready_events_;  // per slot: its input is complete
  std::atomic<bool> busy_{false};
  uint64_t sequence_ = 0;  // NCCL collectives issued so far
  std::mutex mutex_;       // guards policy_ and label_
  StallPolicy policy_;
  std::string label_;
};

NcclCommunicator::NcclCommunicator(Communicator& mpi, int device)
    : mpi_(mpi), device_(device), rank_(mpi.rank()), size_(mpi.size()) {
  std::string error;
  try {  // 1. every rank takes its device and a stream
    CUDA_CHECK(cudaSetDevice(device_));
    cudaStream_t stream = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    stream_.reset(stream);
    done_event_ = make_event();
  } catch (const Error& e) {
    error = detail::concat("cannot use CUDA device ", device_, ": ", e.what());
  }
  agree(error, "could not use their CUDA device");

  Bootstrap boot{};  // 2. rank 0's unique id, to everyone
  if (rank_ == 0) {
    const ncclResult_t result = ncclGetUniqueId(&boot.id);
    boot.ok = result == ncclSuccess ? 1 : 0;
    if (!boot.ok) error = detail::concat("ncclGetUniqueId: ", ncclGetErrorString(result));
  }
  mpi_.broadcast_values(std::span<Bootstrap>(&boot, 1), 0);
  if (!boot.ok) {
    throw DistributedError(detail::concat("rank ", rank_, ": rank 0 could not create the NCCL ",
                                          "unique id", error.empty() ? "" : ": ", error));
  }

  try {  // 3. join, non-blocking so that the wait is polled like a collective
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    const ncclResult_t result = ncclCommInitRankConfig(&comm, size_, boot.id, rank_, &config);
    if (comm != nullptr) comm_.reset(comm);
    NCCL_CHECK(result);
    wait_until("init", [] { return true; });
  } catch (const Error& e) {
    error = e.what();
  }
  agree(error, "could not join the NCCL communicator");
}

void NcclCommunicator::agree(const std::string& error, const char* what) {
  const std::vector<int32_t> failed = mpi_.allgather_value<int32_t>(error.empty() ? 0 : 1);
  std::vector<int> ranks;
  for (int r = 0; r < size_; ++r) {
    if (failed[static_cast<size_t>(r)] != 0) ranks.push_back(r);
  }
  if (ranks.empty()) return;
  const std::string list = format_rank_list(ranks);
  if (!error.empty()) {
    throw DistributedError(
        detail::concat("rank ", rank_, ": ", error, " (rank(s) ", list, " ", what, ")"));
  }
  throw DistributedError(
      detail::concat("rank ", rank_, ": rank(s) ", list, " ", what, "; see their messages"));
}

void NcclCommunicator::allreduce(std::span<float> data, ReduceOp op) {
  if (data.empty()) return;
  if (!on_device(data.data())) return mpi_.allreduce(data, op);
  run("allreduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, nccl_op(op), comm,
                         stream);
  });
}

void NcclCommunicator::allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) {
  check_16bit(format, op);
  if (data.empty()) return;
  if (!on_device(data.data())) return mpi_.allreduce_16bit(data, format, op);
  const ncclDataType_t type = format == Compression::kFp16 ? ncclHalf : ncclBfloat16;
  run("allreduce", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(data.data(), data.data(), data.size(), type, nccl_op(op), comm, stream);
  });
}

void NcclCommunicator::broadcast(std::span<std::byte> data, int root) {
  LOCKSTEP_CHECK(root >= 0 && root < size_, "broadcast root ", root, " of ", size_, " ranks");
  if (data.empty()) return;
  if (!on_device(data.data())) return mpi_.broadcast(data, root);
  run("broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(data.data(), data.data(), data.size(), ncclUint8, root, comm, stream);
  });
}

void NcclCommunicator::allgather(std::span<const std::byte> in, std::span<std::byte> out) {
  LOCKSTEP_CHECK(out.size() == in.size() * static_cast<size_t>(size_), "allgather of ", in.size(),
                 " bytes per rank into ", out.size(), " bytes for ", size_, " ranks");
  if (in.empty()) return;
  const bool device_in = on_device(in.data()), device_out = on_device(out.data());
  LOCKSTEP_CHECK(device_in == device_out, "allgather between host and device memory");
  if (!device_in) return mpi_.allgather(in, out);
  run("allgather", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(in.data(), out.data(), in.size(), ncclUint8, comm, stream);
  });
}

NcclCommunicator::Claim NcclCommunicator::claim(const char* operation) {
  if (busy_.exchange(true)) {
    throw DistributedError(detail::concat("rank ", rank_, ": NCCL ", operation,
                                          " issued while another collective is in flight on the "
                                          "same communicator (use one communicator per thread)"));
  }
  if (!comm_) {
    busy_ = false;
    throw DistributedError(detail::concat("rank ", rank_, ": NCCL ", operation,
                                          " on a communicator aborted after an earlier error"));
  }
  return Claim{busy_};
}

template <typename Enqueue>
void NcclCommunicator::run(const char* operation, Enqueue enqueue) {
  const Claim claimed = claim(operation);
  CUDA_CHECK(cudaSetDevice(device_));
  NCCL_CHECK(enqueue(comm_.get(), stream_.get()));
  wait_until(operation, [&] {
    const cudaError_t status = cudaStreamQuery(stream_.get());
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
  });
  ++sequence_;
}

// --- DeviceReducer: ordered by events, the host waits only in finish() ------

cudaEvent_t NcclCommunicator::ready_event(size_t slot) {
  std::lock_guard lock(events_mutex_);
  while (ready_events_.size() <= slot) ready_events_.push_back(make_event());
  return ready_events_[slot].get();
}

void NcclCommunicator::mark_ready(size_t slot, void* stream) {
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaEventRecord(ready_event(slot), static_cast<cudaStream_t>(stream)));
}

void NcclCommunicator::enqueue_allreduce(size_t slot, std::span<float> data, ReduceOp op) {
  const Claim claimed = claim("allreduce");
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), ready_event(slot), 0));
  if (!data.empty()) {
    NCCL_CHECK(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, nccl_op(op),
                             comm_.get(), stream_.get()));
    // A non-blocking communicator may still be queueing the call: wait for
    // that (not for the reduction), watching asynchronous errors.
    wait_until("allreduce", [] { return true; });
  }
  ++sequence_;
}

void NcclCommunicator::finish(void* stream) {
  const Claim claimed = claim("allreduce");
  CUDA_CHECK(cudaSetDevice(device_));
  CUDA_CHECK(cudaEventRecord(done_event_.get(), stream_.get()));
  CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), done_event_.get(), 0));
  wait_until("allreduce", [&] {
    const cudaError_t status = cudaEventQuery(done_event_.get());
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
  });
}

template <typename Done>
void NcclCommunicator::wait_until(const char* operation, Done done) {
  StallPolicy policy;
  {
    std::lock_guard lock(mutex_);
    policy = policy_;
  }
  const Clock::time_point start = Clock::now();
  double next_warning = policy.warning_seconds;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state != ncclSuccess && state != ncclInProgress) fail_async(operation, state);
    if (state == ncclSuccess && done()) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (policy.warning_seconds > 0.0 && waited >= next_warning) {
      report_stall(policy, operation, waited, false);
      next_warning += policy.warning_seconds;
    }
    if (policy.abort_seconds > 0.0 && waited >= policy.abort_seconds) {
      report_stall(policy, operation, waited, true);
      abort(1);
    }
    if (waited >= policy.spin_seconds) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NcclCommunicator::fail_async(const char* operation, ncclResult_t state) {
  const char* last = ncclGetLastError(comm_.get());
  const std::string detail_text = last != nullptr ? last : "";
  comm_.reset();  // abort: pending work is cancelled, later calls throw
  std::string label;
  {
    std::lock_guard lock(mutex_);
    label = label_;
  }
  throw DistributedError(detail::concat(
      "rank ", rank_, ": NCCL ", operation, " #", sequence_, label.empty() ? "" : " [", label,
      label.empty() ? "" : "]", " failed: ", ncclGetErrorString(state),
      detail_text.empty() ? "" : ": ", detail_text,
      " ---> HINT: another rank probably failed or was killed first; look for its message"));
}

void NcclCommunicator::report_stall(const StallPolicy& policy, const char* operation, double waited,
                                    bool aborting) {
  StallReport report;
  report.rank = rank_;
  report.operation = std::string("nccl ") + operation;
  report.sequence = sequence_;
  {
    std::lock_guard lock(mutex_);
    report.label = label_;
  }
  report.waited_seconds = waited;
  report.aborting = aborting;
  if (policy.on_stall) {
    policy.on_stall(report);
  } else {
    std::fprintf(stderr, "lockstep: %s\n", report.message().c_str());
    std::fflush(stderr);
  }
}

}  // namespace

std::string nccl_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& mpi_comm, int device) {
  return std::make_unique<NcclCommunicator>(mpi_comm, device);
}

}  // namespace lockstep::distributed
