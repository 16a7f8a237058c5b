// The MPI communicator's class and helpers, shared by mpi_communicator.cpp
// (start-up, collectives) and mpi_stall.cpp (polled waits, wait reports,
// stall reports). Private to distributed/: include
// distributed/mpi_communicator.h.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/enum_table.h"
#include "common/error.h"
#include "distributed/communicator.h"
#include "distributed/failure.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator.h"
#include "distributed/stall_schedule.h"

namespace lockstep::distributed::mpi_detail {

using Clock = std::chrono::steady_clock;

enum class Operation : int32_t { kAllreduce, kBroadcast, kAllgather, kBarrier };

inline constexpr nn::EnumEntry<Operation, const char*> kOperationNames[] = {
    {Operation::kAllreduce, "allreduce"},
    {Operation::kBroadcast, "broadcast"},
    {Operation::kAllgather, "allgather"},
    {Operation::kBarrier, "barrier"}};

inline const char* operation_name(Operation op) {
  return nn::value_of(kOperationNames, op).value_or("collective");
}

// What a waiting rank tells rank 0 on the side communicator.
struct WaitReport {
  int32_t rank = 0;
  Operation operation = Operation::kBarrier;
  uint64_t sequence = 0;
  double waited_seconds = 0.0;
  char label[232] = {};
};
inline constexpr int kWaitReportTag = 17;
// Ranks 0 and 1 receive every waiting rank's wait reports: rank 0 names the
// ranks missing from a stalled collective, and rank 1 does when rank 0 is
// one of them (stuck writing a checkpoint, say), which rank 0 cannot say.
inline constexpr int kRankNamers = 2;

template <typename T>
MPI_Datatype mpi_type();
template <>
inline MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
inline MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
inline MPI_Datatype mpi_type<int64_t>() {
  return MPI_INT64_T;
}

inline const nn::EnumEntry<ReduceOp, MPI_Op> kMpiOps[] = {{ReduceOp::kSum, MPI_SUM},
                                                          {ReduceOp::kAverage, MPI_SUM},
                                                          {ReduceOp::kMin, MPI_MIN},
                                                          {ReduceOp::kMax, MPI_MAX}};

inline MPI_Op mpi_op(ReduceOp op) {
  if (const auto mpi = nn::value_of(kMpiOps, op)) return *mpi;
  throw Error("unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

inline bool mpi_finalized() {
  int finalized = 1;
  return MPI_Finalized(&finalized) != MPI_SUCCESS || finalized != 0;
}

// Owns an MPI handle (a communicator, a reduction, a datatype) and frees it
// with Free unless MPI has been finalized.
template <typename Handle, int (*Free)(Handle*)>
class MpiHandle {
 public:
  explicit MpiHandle(Handle null) : handle(null), null_(null) {}
  ~MpiHandle() {
    if (handle != null_ && !mpi_finalized()) Free(&handle);
  }
  MpiHandle(const MpiHandle&) = delete;
  MpiHandle& operator=(const MpiHandle&) = delete;
  Handle handle;

 private:
  Handle null_;
};

struct CommHandle : MpiHandle<MPI_Comm, MPI_Comm_free> {
  CommHandle() : MpiHandle(MPI_COMM_NULL) {}
};
struct OpHandle : MpiHandle<MPI_Op, MPI_Op_free> {
  OpHandle() : MpiHandle(MPI_OP_NULL) {}
};
struct TypeHandle : MpiHandle<MPI_Datatype, MPI_Type_free> {
  TypeHandle() : MpiHandle(MPI_DATATYPE_NULL) {}
};

// MPI_User_function for 16-bit sums in `format`: one reduction step (add
// in fp32, round back), applied to MPI_UINT16_T elements. It cannot fail.
template <Compression format>
void sum_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  const size_t n = static_cast<size_t>(*length);
  add_16bit({static_cast<const uint16_t*>(in), n}, {static_cast<uint16_t*>(inout), n}, format);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm parent, const MpiCommunicatorOptions& options);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  int node_count() const override { return node_count_; }
  std::string host_name() const override { return host_name_; }
  std::string describe() const override {
    return detail::concat("mpi (", library_, "), ", size_, size_ == 1 ? " rank" : " ranks", " on ",
                          node_count_, node_count_ == 1 ? " node" : " nodes");
  }

  void allreduce(std::span<float> data, ReduceOp op) override { allreduce_typed(data, op); }
  void allreduce(std::span<double> data, ReduceOp op) override { allreduce_typed(data, op); }
  void allreduce(std::span<int64_t> data, ReduceOp op) override { allreduce_typed(data, op); }
  void allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) override;
  void broadcast(std::span<std::byte> data, int root) override;
  void allgather(std::span<const std::byte> in, std::span<std::byte> out) override;
  void barrier() override;
  [[noreturn]] void abort(int exit_code) noexcept override {
    pause_for_launcher();
    abort_job(exit_code);
  }

  void set_stall_policy(StallPolicy policy) override {
    policy.validate();
    std::lock_guard lock(settings_mutex_);
    policy_ = std::move(policy);
  }
  void set_stall_label(std::string label) override {
    std::lock_guard lock(settings_mutex_);
    label_ = std::move(label);
  }
  std::unique_ptr<Communicator> duplicate() override;

 private:
  // One collective call: claims the communicator, numbers the call, and
  // waits for its nonblocking MPI requests under the stall watchdog.
  class Collective {
   public:
    Collective(MpiCommunicator& owner, Operation operation);
    ~Collective() { owner_.busy_.store(false, std::memory_order_release); }
    Collective(const Collective&) = delete;
    Collective& operator=(const Collective&) = delete;

    // True: issue nonblocking calls and wait() on them; false: blocking calls.
    bool polled() const { return polled_; }
    void wait(MPI_Request& request);

   private:
    void on_tick(double waited);

    MpiCommunicator& owner_;
    Operation operation_;
    uint64_t sequence_ = 0;
    bool polled_ = false;
    double warning_ = 0.0, spin_ = 0.0;
    Clock::time_point start_;
    double next_tick_ = 0.0;
    StallSchedule schedule_;
    bool posted_ = false;
  };

  template <typename T>
  void allreduce_typed(std::span<T> data, ReduceOp op);
  // In-place allreduce of `count` elements of `bytes` each, in chunks of
  // max_chunk_ elements.
  void allreduce_raw(void* data, size_t count, size_t bytes, MPI_Datatype type, MPI_Op op);
  void post_wait_report(Operation operation, uint64_t sequence, double waited);
  void receive_wait_reports();
  void report_stall(Operation operation, uint64_t sequence, double waited, bool aborting);

  CommHandle comm_;               // the collectives
  CommHandle side_comm_;          // wait reports to ranks 0 and 1, never matched with collectives
  OpHandle fp16_sum_, bf16_sum_;  // 16-bit sums on MPI_UINT16_T
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_count_ = 1;
  std::string host_name_, library_;
  size_t max_chunk_ = static_cast<size_t>(INT_MAX);

  std::mutex settings_mutex_;
  StallPolicy policy_;
  std::string label_;

  std::atomic<bool> busy_{false};
  uint64_t sequence_ = 0;
  // Wait reports posted to ranks 0 and 1 (the other one of them, for
  // those two) and their send requests.
  std::list<std::pair<MPI_Request, WaitReport>> posted_;
  // Ranks 0 and 1: the latest wait report from each rank (rank < 0: none yet).
  std::vector<WaitReport> reports_;
};

template <typename T>
void MpiCommunicator::allreduce_typed(std::span<T> data, ReduceOp op) {
  allreduce_raw(data.data(), data.size(), sizeof(T), mpi_type<T>(), mpi_op(op));
  if (op == ReduceOp::kAverage && size_ > 1) {
    const T divisor = static_cast<T>(size_);
    for (T& value : data) value /= divisor;
  }
}

}  // namespace lockstep::distributed::mpi_detail
