#include "distributed/mpi_communicator.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <thread>
#include <utility>

#include "distributed/mpi_check.h"
#include "nn/error.h"

namespace lockstep::distributed {

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_library_version(text, &length));
  std::string first(text, static_cast<size_t>(std::max(length, 0)));
  first = first.substr(0, first.find_first_of("\n,"));
  // MPICH: "MPICH Version:\t4.0.2" -> "MPICH 4.0.2".
  if (const size_t colon = first.find("Version:"); colon != std::string::npos) {
    std::string number = first.substr(colon + 8);
    number.erase(0, number.find_first_not_of(" \t"));
    first = first.substr(0, colon) + number;
  }
  while (!first.empty() && (first.back() == ' ' || first.back() == '\t')) first.pop_back();
  return first;
}

// --- MpiEnvironment -------------------------------------------------------------

MpiEnvironment::MpiEnvironment(int* argc, char*** argv) {
  int finalized = 0;
  MPI_CHECK(MPI_Finalized(&finalized));
  if (finalized) {
    throw LibraryError(
        "MPI was already finalized in this process: create one MpiEnvironment for the whole "
        "program");
  }
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_CHECK(MPI_Query_thread(&provided));
  } else {
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    owns_ = true;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    if (owns_) MPI_Finalize();
    owns_ = false;
    throw LibraryError(detail::concat(
        "MPI provides thread level ", provided, " but lockstep needs MPI_THREAD_MULTIPLE (",
        MPI_THREAD_MULTIPLE,
        ") because gradients are reduced on a background thread: use an MPI library built "
        "with thread support (MPICH: --enable-threads=multiple)",
        initialized ? ", and initialize MPI with MPI_Init_thread(MPI_THREAD_MULTIPLE)" : ""));
  }
  MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_));
  MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &world_size_));
}

MpiEnvironment::~MpiEnvironment() noexcept {
  if (!owns_) return;
  int finalized = 0;
  if (MPI_Finalized(&finalized) != MPI_SUCCESS || finalized) return;
  if (std::uncaught_exceptions() > 0 && world_size_ > 1) {
    // Other ranks may wait in a collective this rank will never join.
    const std::string line = detail::concat("lockstep: rank ", world_rank_,
                                            ": an error left MPI's scope; ending the job\n");
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

namespace {

using Clock = std::chrono::steady_clock;

enum class Operation : int32_t { kAllreduce, kBroadcast, kAllgather, kBarrier };

const char* operation_name(Operation op) {
  switch (op) {
    case Operation::kAllreduce:
      return "allreduce";
    case Operation::kBroadcast:
      return "broadcast";
    case Operation::kAllgather:
      return "allgather";
    case Operation::kBarrier:
      return "barrier";
  }
  return "collective";
}

// What a waiting rank tells rank 0 on the side communicator.
struct WaitReport {
  int32_t rank = 0;
  Operation operation = Operation::kBarrier;
  uint64_t sequence = 0;
  double waited_seconds = 0.0;
  char label[232] = {};
};
constexpr int kWaitReportTag = 17;

template <typename T>
MPI_Datatype mpi_type();
template <>
MPI_Datatype mpi_type<float>() {
  return MPI_FLOAT;
}
template <>
MPI_Datatype mpi_type<double>() {
  return MPI_DOUBLE;
}
template <>
MPI_Datatype mpi_type<int64_t>() {
  return MPI_INT64_T;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return MPI_SUM;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
  }
  throw Error("unknown ReduceOp " + std::to_string(static_cast<int>(op)));
}

bool mpi_finalized() {
  int finalized = 1;
  return MPI_Finalized(&finalized) != MPI_SUCCESS || finalized != 0;
}

// Owns an MPI communicator handle.
class CommHandle {
 public:
  CommHandle() = default;
  ~CommHandle() {
    if (comm != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm);
  }
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;
  MPI_Comm comm = MPI_COMM_NULL;
};

// Owns a user-defined reduction.
class OpHandle {
 public:
  OpHandle() = default;
  ~OpHandle() {
    if (op != MPI_OP_NULL && !mpi_finalized()) MPI_Op_free(&op);
  }
  OpHandle(const OpHandle&) = delete;
  OpHandle& operator=(const OpHandle&) = delete;
  MPI_Op op = MPI_OP_NULL;
};

// MPI_User_function for 16-bit sums: one reduction step (add in fp32,
// round back), applied to MPI_UINT16_T elements. It cannot fail.
void fp16_sum(void* in, void* inout, int* length, MPI_Datatype*) {
  const size_t n = static_cast<size_t>(*length);
  add_16bit({static_cast<const uint16_t*>(in), n}, {static_cast<uint16_t*>(inout), n},
            Compression::kFp16);
}
void bf16_sum(void* in, void* inout, int* length, MPI_Datatype*) {
  const size_t n = static_cast<size_t>(*length);
  add_16bit({static_cast<const uint16_t*>(in), n}, {static_cast<uint16_t*>(inout), n},
            Compression::kBf16);
}

// Owns a committed MPI datatype.
class TypeHandle {
 public:
  TypeHandle() = default;
  ~TypeHandle() {
    if (type != MPI_DATATYPE_NULL && !mpi_finalized()) MPI_Type_free(&type);
  }
  TypeHandle(const TypeHandle&) = delete;
  TypeHandle& operator=(const TypeHandle&) = delete;
  MPI_Datatype type = MPI_DATATYPE_NULL;
};

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
    MPI_Abort(comm_.comm, exit_code);
    std::_Exit(exit_code);
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
    double warning_ = 0.0, abort_ = 0.0, spin_ = 0.0;
    Clock::time_point start_;
    double next_tick_ = 0.0, next_warning_ = 0.0;
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
  CommHandle side_comm_;          // wait reports to rank 0, never matched with collectives
  OpHandle fp16_sum_, bf16_sum_;  // 16-bit sums on MPI_UINT16_T
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1, node_count_ = 1;
  std::string host_name_, library_;
  size_t max_chunk_ = static_cast<size_t>(INT_MAX);

  std::mutex settings_mutex_;
  StallPolicy policy_;
  std::string label_;

  std::atomic<bool> busy_{false};
  uint64_t sequence_ = 0;
  // Rank > 0: wait reports posted to rank 0 and their send requests.
  std::list<std::pair<MPI_Request, WaitReport>> posted_;
  // Rank 0: the latest wait report from each rank (rank < 0: none yet).
  std::vector<WaitReport> reports_;
};

MpiCommunicator::MpiCommunicator(MPI_Comm parent, const MpiCommunicatorOptions& options)
    : max_chunk_(std::clamp<size_t>(options.max_chunk, 1, static_cast<size_t>(INT_MAX))),
      policy_(options.stall) {
  LOCKSTEP_CHECK(parent != MPI_COMM_NULL, "make_mpi_communicator needs a communicator");
  policy_.validate();
  MPI_CHECK(MPI_Comm_dup(parent, &comm_.comm));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_.comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_dup(comm_.comm, &side_comm_.comm));
  MPI_CHECK(MPI_Comm_set_errhandler(side_comm_.comm, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_.comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_.comm, &size_));
  {
    CommHandle node;
    MPI_CHECK(
        MPI_Comm_split_type(comm_.comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node.comm));
    MPI_CHECK(MPI_Comm_rank(node.comm, &local_rank_));
    MPI_CHECK(MPI_Comm_size(node.comm, &local_size_));
  }
  node_count_ = local_rank_ == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &node_count_, 1, MPI_INT, MPI_SUM, comm_.comm));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  host_name_.assign(name, static_cast<size_t>(std::max(length, 0)));
  library_ = mpi_library_version();
  // Commutative: a + b and b + a round alike, so every rank gets the same bits.
  MPI_CHECK(MPI_Op_create(&fp16_sum, 1, &fp16_sum_.op));
  MPI_CHECK(MPI_Op_create(&bf16_sum, 1, &bf16_sum_.op));
  if (rank_ == 0) {
    reports_.resize(static_cast<size_t>(size_));
    for (WaitReport& r : reports_) r.rank = -1;
  }
}

MpiCommunicator::~MpiCommunicator() {
  if (mpi_finalized()) return;
  // Reports still in flight are dropped: nothing here may wait on another rank.
  for (auto& [request, report] : posted_) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
  }
  if (rank_ == 0) {
    try {
      receive_wait_reports();
    } catch (const std::exception&) {
    }
  }
}

MpiCommunicator::Collective::Collective(MpiCommunicator& owner, Operation operation)
    : owner_(owner), operation_(operation) {
  if (owner_.busy_.exchange(true, std::memory_order_acquire)) {
    throw Error(detail::concat(
        "internal error: a ", operation_name(operation),
        " started while another collective was in flight on the same communicator (two threads "
        "share one communicator: give each its own)"));
  }
  sequence_ = owner_.sequence_++;
  {
    std::lock_guard lock(owner_.settings_mutex_);
    polled_ = owner_.size_ > 1 && owner_.policy_.enabled();
    warning_ = owner_.policy_.warning_seconds;
    abort_ = owner_.policy_.abort_seconds;
    spin_ = owner_.policy_.spin_seconds;
  }
  if (polled_) {
    start_ = Clock::now();
    next_tick_ = 1e-3;
    next_warning_ = warning_;
  }
}

void MpiCommunicator::Collective::wait(MPI_Request& request) {
  int done = 0;
  const Clock::time_point issued = Clock::now();
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
      if (done) return;
    }
    const Clock::time_point now = Clock::now();
    const double waited = std::chrono::duration<double>(now - start_).count();
    if (waited >= next_tick_) on_tick(waited);
    const double this_request = std::chrono::duration<double>(now - issued).count();
    if (this_request >= spin_) {
      // Leave the core to compute threads; the pause grows with the wait so
      // that it stays a small fraction of it (50 us .. 1 ms).
      const double pause = std::clamp(this_request / 64.0, 50e-6, 1e-3);
      std::this_thread::sleep_for(std::chrono::duration<double>(pause));
    }
  }
}

// Called about every millisecond while a polled collective waits.
void MpiCommunicator::Collective::on_tick(double waited) {
  next_tick_ = waited + 1e-3;
  if (warning_ > 0.0 && owner_.size_ > 1) {
    if (owner_.rank_ == 0) {
      owner_.receive_wait_reports();
    } else if (!posted_ && waited >= warning_ / 2) {
      owner_.post_wait_report(operation_, sequence_, waited);
      posted_ = true;
    }
    if (waited >= next_warning_ && !(abort_ > 0.0 && waited >= abort_)) {
      owner_.report_stall(operation_, sequence_, waited, false);
      // Rank 0 names the missing ranks every period; the others repeat
      // themselves less often (at 1, 2, 4, 8... periods) so that a stall of
      // a large job does not flood the log.
      next_warning_ = owner_.rank_ == 0 ? next_warning_ + warning_ : 2 * next_warning_;
    }
  }
  if (abort_ > 0.0 && waited >= abort_) {
    if (owner_.rank_ == 0) owner_.receive_wait_reports();
    owner_.report_stall(operation_, sequence_, waited, true);
    owner_.abort(1);
  }
}

void MpiCommunicator::post_wait_report(Operation operation, uint64_t sequence, double waited) {
  // Forget reports rank 0 has received (or that MPI has buffered).
  for (auto it = posted_.begin(); it != posted_.end();) {
    int done = 0;
    MPI_CHECK(MPI_Test(&it->first, &done, MPI_STATUS_IGNORE));
    it = done ? posted_.erase(it) : std::next(it);
  }
  WaitReport report;
  report.rank = rank_;
  report.operation = operation;
  report.sequence = sequence;
  report.waited_seconds = waited;
  {
    std::lock_guard lock(settings_mutex_);
    std::strncpy(report.label, label_.c_str(), sizeof(report.label) - 1);
  }
  auto& [request, stored] = posted_.emplace_back(MPI_REQUEST_NULL, report);
  MPI_CHECK(MPI_Isend(&stored, sizeof(WaitReport), MPI_BYTE, 0, kWaitReportTag, side_comm_.comm,
                      &request));
}

void MpiCommunicator::receive_wait_reports() {
  for (;;) {
    int flag = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    MPI_CHECK(
        MPI_Improbe(MPI_ANY_SOURCE, kWaitReportTag, side_comm_.comm, &flag, &message, &status));
    if (!flag) return;
    WaitReport report;
    MPI_CHECK(MPI_Mrecv(&report, sizeof(WaitReport), MPI_BYTE, &message, MPI_STATUS_IGNORE));
    report.label[sizeof(report.label) - 1] = '\0';
    const int source = status.MPI_SOURCE;
    if (source > 0 && source < size_ && report.rank == source) {
      reports_[static_cast<size_t>(source)] = report;
    }
  }
}

void MpiCommunicator::report_stall(Operation operation, uint64_t sequence, double waited,
                                   bool aborting) {
  StallReport report;
  report.rank = rank_;
  report.operation = operation_name(operation);
  report.sequence = sequence;
  report.waited_seconds = waited;
  report.aborting = aborting;
  std::function<void(const StallReport&)> callback;
  {
    std::lock_guard lock(settings_mutex_);
    report.label = label_;
    callback = policy_.on_stall;
  }
  if (rank_ == 0) {
    report.ranks_known = true;
    for (int r = 1; r < size_; ++r) {
      const WaitReport& other = reports_[static_cast<size_t>(r)];
      if (other.rank != r || other.sequence < sequence) {
        report.missing_ranks.push_back(r);  // not waiting in a collective, as far as rank 0 knows
      } else if (other.sequence != sequence || other.operation != operation) {
        std::string where = detail::concat("rank ", r, " in ", operation_name(other.operation),
                                           " #", other.sequence);
        if (other.label[0] != '\0') where += detail::concat(" [", other.label, "]");
        report.elsewhere.push_back(std::move(where));
      }
    }
  }
  if (callback) {
    try {
      callback(report);
    } catch (...) {
      // A broken callback must not leave the collective half-waited.
    }
  } else {
    const std::string line = "lockstep: " + report.message() + "\n";
    std::fputs(line.c_str(), stderr);
    std::fflush(stderr);
  }
}

template <typename T>
void MpiCommunicator::allreduce_typed(std::span<T> data, ReduceOp op) {
  allreduce_raw(data.data(), data.size(), sizeof(T), mpi_type<T>(), mpi_op(op));
  if (op == ReduceOp::kAverage && size_ > 1) {
    const T divisor = static_cast<T>(size_);
    for (T& value : data) value /= divisor;
  }
}

void MpiCommunicator::allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) {
  check_16bit(format, op);
  const MPI_Op sum = format == Compression::kFp16 ? fp16_sum_.op : bf16_sum_.op;
  allreduce_raw(data.data(), data.size(), sizeof(uint16_t), MPI_UINT16_T, sum);
  if (op == ReduceOp::kAverage && size_ > 1) {
    divide_16bit(data, static_cast<float>(size_), format);
  }
}

void MpiCommunicator::allreduce_raw(void* data, size_t count, size_t bytes, MPI_Datatype type,
                                    MPI_Op op) {
  Collective collective(*this, Operation::kAllreduce);
  for (size_t offset = 0; offset < count; offset += max_chunk_) {
    const int n = static_cast<int>(std::min(max_chunk_, count - offset));
    void* chunk = static_cast<std::byte*>(data) + offset * bytes;
    if (collective.polled()) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, chunk, n, type, op, comm_.comm, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, chunk, n, type, op, comm_.comm));
    }
  }
}

void MpiCommunicator::broadcast(std::span<std::byte> data, int root) {
  LOCKSTEP_CHECK(root >= 0 && root < size_, "broadcast root ", root, " of ", size_, " ranks");
  Collective collective(*this, Operation::kBroadcast);
  for (size_t offset = 0; offset < data.size(); offset += max_chunk_) {
    const int count = static_cast<int>(std::min(max_chunk_, data.size() - offset));
    std::byte* chunk = data.data() + offset;
    if (collective.polled()) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Ibcast(chunk, count, MPI_BYTE, root, comm_.comm, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Bcast(chunk, count, MPI_BYTE, root, comm_.comm));
    }
  }
}

void MpiCommunicator::allgather(std::span<const std::byte> in, std::span<std::byte> out) {
  const size_t block = in.size();
  LOCKSTEP_CHECK(out.size() == block * static_cast<size_t>(size_), "allgather of ", block,
                 " bytes per rank needs ", block * static_cast<size_t>(size_),
                 " output bytes, got ", out.size());
  Collective collective(*this, Operation::kAllgather);
  for (size_t offset = 0; offset < block; offset += max_chunk_) {
    const size_t count = std::min(max_chunk_, block - offset);
    // Rank r's piece lands at out + r * block + offset: receive one element
    // of `count` bytes whose extent is a whole block.
    TypeHandle strided;
    MPI_Datatype receive_type = MPI_BYTE;
    int receive_count = static_cast<int>(count);
    if (count != block) {
      TypeHandle piece;
      MPI_CHECK(MPI_Type_contiguous(static_cast<int>(count), MPI_BYTE, &piece.type));
      MPI_CHECK(
          MPI_Type_create_resized(piece.type, 0, static_cast<MPI_Aint>(block), &strided.type));
      MPI_CHECK(MPI_Type_commit(&strided.type));
      receive_type = strided.type;
      receive_count = 1;
    }
    const void* send = in.data() + offset;
    void* receive = out.data() + offset;
    if (collective.polled()) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Iallgather(send, static_cast<int>(count), MPI_BYTE, receive, receive_count,
                               receive_type, comm_.comm, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Allgather(send, static_cast<int>(count), MPI_BYTE, receive, receive_count,
                              receive_type, comm_.comm));
    }
  }
}

void MpiCommunicator::barrier() {
  Collective collective(*this, Operation::kBarrier);
  if (collective.polled()) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ibarrier(comm_.comm, &request));
    collective.wait(request);
  } else {
    MPI_CHECK(MPI_Barrier(comm_.comm));
  }
}

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  return make_mpi_communicator(comm, MpiCommunicatorOptions{});
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm,
                                                    const MpiCommunicatorOptions& options) {
  return std::make_unique<MpiCommunicator>(comm, options);
}

}  // namespace lockstep::distributed
