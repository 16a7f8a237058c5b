// The NCCL communicator: start-up over MPI, collectives, polled waits and
// asynchronous errors (the class is in nccl_communicator_impl.h, its
// DeviceReducer side in nccl_reducer.cpp).
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "common/enum_table.h"
#include "distributed/cuda/nccl_communicator_impl.h"
#include "distributed/cuda/nccl_ops.h"
#include "distributed/stall_schedule.h"
#include "nn/cuda/cuda_check.h"

namespace lockstep::distributed::nccl_detail {

bool on_device(const void* p) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    cudaGetLastError();  // an unknown host pointer: clear the error
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  if (const auto nccl = nccl_op_of(op)) return *nccl;
  throw Error("internal error: unknown ReduceOp");
}

Event make_event() {
  cudaEvent_t event = nullptr;
  CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return Event(event);
}
// What rank 0 broadcasts to start NCCL.
struct Bootstrap {
  ncclUniqueId id;
  int32_t ok;
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
    legacy_event_ = make_event();
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
    // The trainer sets its stall policy only after this constructor (the
    // default never aborts), and a bootstrap that never completes (an
    // unroutable NCCL_SOCKET_IFNAME, a blocked port) would poll until the
    // job's wall time: the join ends the job after kInitAbortSeconds.
    {
      std::lock_guard lock(mutex_);
      policy_.abort_seconds = kInitAbortSeconds;
    }
    wait_until("init", [] { return true; });
    {
      std::lock_guard lock(mutex_);
      policy_ = StallPolicy{};
    }
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

void NcclCommunicator::wait_for_legacy_stream() {
  CUDA_CHECK(cudaEventRecord(legacy_event_.get(), cudaStreamLegacy));
  CUDA_CHECK(cudaStreamWaitEvent(stream_.get(), legacy_event_.get(), 0));
}

template <typename Enqueue>
void NcclCommunicator::run(const char* operation, Enqueue enqueue) {
  const Claim claimed = claim(operation);
  CUDA_CHECK(cudaSetDevice(device_));
  wait_for_legacy_stream();
  NCCL_CHECK(enqueue(comm_.get(), stream_.get()));
  wait_until(operation, [&] {
    const cudaError_t status = cudaStreamQuery(stream_.get());
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
  });
  ++sequence_;
}

void NcclCommunicator::wait_until(const char* operation, const std::function<bool()>& done) {
  StallPolicy policy;
  {
    std::lock_guard lock(mutex_);
    policy = policy_;
  }
  const Clock::time_point start = Clock::now();
  StallSchedule schedule(policy, StallSchedule::Repeat::kEvery);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(comm_.get(), &state));
    if (state != ncclSuccess && state != ncclInProgress) fail_async(operation, state);
    if (state == ncclSuccess && done()) return;
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    switch (schedule.at(waited)) {
      case StallSchedule::Action::kWarn:
        report_stall(policy, operation, waited, false);
        break;
      case StallSchedule::Action::kAbort:
        report_stall(policy, operation, waited, true);
        abort(1);
      case StallSchedule::Action::kNone:
        break;
    }
    if (const double pause = StallSchedule::pause_seconds(waited, policy.spin_seconds)) {
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    }
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

}  // namespace lockstep::distributed::nccl_detail

namespace lockstep::distributed {

std::string nccl_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return std::to_string(version / 10000) + "." + std::to_string(version % 10000 / 100) + "." +
         std::to_string(version % 100);
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& mpi_comm, int device) {
  return std::make_unique<nccl_detail::NcclCommunicator>(mpi_comm, device);
}

}  // namespace lockstep::distributed
