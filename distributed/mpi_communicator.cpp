// The MPI communicator: start-up (duplicated communicators, node topology,
// the 16-bit reductions) and the collectives, chunked and optionally polled
// (the class is in mpi_communicator_impl.h, its waits in mpi_stall.cpp).
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

#include "common/error.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator_impl.h"

namespace lockstep::distributed {
namespace mpi_detail {

MpiCommunicator::MpiCommunicator(MPI_Comm parent, const MpiCommunicatorOptions& options)
    : max_chunk_(std::clamp<size_t>(options.max_chunk, 1, static_cast<size_t>(INT_MAX))),
      policy_(options.stall) {
  LOCKSTEP_CHECK(parent != MPI_COMM_NULL, "make_mpi_communicator needs a communicator");
  policy_.validate();
  MPI_CHECK(MPI_Comm_dup(parent, &comm_.handle));
  MPI_CHECK(MPI_Comm_set_errhandler(comm_.handle, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_dup(comm_.handle, &side_comm_.handle));
  MPI_CHECK(MPI_Comm_set_errhandler(side_comm_.handle, MPI_ERRORS_RETURN));
  MPI_CHECK(MPI_Comm_rank(comm_.handle, &rank_));
  MPI_CHECK(MPI_Comm_size(comm_.handle, &size_));
  {
    CommHandle node;
    MPI_CHECK(MPI_Comm_split_type(comm_.handle, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                                  &node.handle));
    MPI_CHECK(MPI_Comm_rank(node.handle, &local_rank_));
    MPI_CHECK(MPI_Comm_size(node.handle, &local_size_));
  }
  node_count_ = local_rank_ == 0 ? 1 : 0;
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &node_count_, 1, MPI_INT, MPI_SUM, comm_.handle));
  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  host_name_.assign(name, static_cast<size_t>(std::max(length, 0)));
  library_ = mpi_library_version();
  // Commutative: a + b and b + a round alike, so every rank gets the same bits.
  MPI_CHECK(MPI_Op_create(&sum_16bit<Compression::kFp16>, 1, &fp16_sum_.handle));
  MPI_CHECK(MPI_Op_create(&sum_16bit<Compression::kBf16>, 1, &bf16_sum_.handle));
  if (rank_ < kRankNamers) {
    reports_.resize(static_cast<size_t>(size_));
    for (WaitReport& r : reports_) r.rank = -1;
  }
}

MpiCommunicator::~MpiCommunicator() {
  if (mpi_finalized()) return;
  // Reports still in flight are let go: nothing here may wait on another
  // rank. MPI may still read an unfinished send's buffer, so its entry moves
  // to a list that lives as long as the process.
  static std::mutex kept_mutex;
  static auto* const kept = new std::list<std::pair<MPI_Request, WaitReport>>();
  for (auto it = posted_.begin(); it != posted_.end();) {
    const auto next = std::next(it);
    int done = 0;
    MPI_Test(&it->first, &done, MPI_STATUS_IGNORE);
    if (!done) {
      MPI_Request_free(&it->first);
      const std::lock_guard lock(kept_mutex);
      kept->splice(kept->end(), posted_, it);
    }
    it = next;
  }
  if (rank_ < kRankNamers) {
    try {
      receive_wait_reports();
    } catch (const std::exception&) {
    }
  }
}

void MpiCommunicator::allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) {
  check_16bit(format, op);
  const MPI_Op sum = format == Compression::kFp16 ? fp16_sum_.handle : bf16_sum_.handle;
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
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, chunk, n, type, op, comm_.handle, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, chunk, n, type, op, comm_.handle));
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
      MPI_CHECK(MPI_Ibcast(chunk, count, MPI_BYTE, root, comm_.handle, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Bcast(chunk, count, MPI_BYTE, root, comm_.handle));
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
      MPI_CHECK(MPI_Type_contiguous(static_cast<int>(count), MPI_BYTE, &piece.handle));
      MPI_CHECK(
          MPI_Type_create_resized(piece.handle, 0, static_cast<MPI_Aint>(block), &strided.handle));
      MPI_CHECK(MPI_Type_commit(&strided.handle));
      receive_type = strided.handle;
      receive_count = 1;
    }
    const void* send = in.data() + offset;
    void* receive = out.data() + offset;
    if (collective.polled()) {
      MPI_Request request = MPI_REQUEST_NULL;
      MPI_CHECK(MPI_Iallgather(send, static_cast<int>(count), MPI_BYTE, receive, receive_count,
                               receive_type, comm_.handle, &request));
      collective.wait(request);
    } else {
      MPI_CHECK(MPI_Allgather(send, static_cast<int>(count), MPI_BYTE, receive, receive_count,
                              receive_type, comm_.handle));
    }
  }
}

void MpiCommunicator::barrier() {
  Collective collective(*this, Operation::kBarrier);
  if (collective.polled()) {
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_CHECK(MPI_Ibarrier(comm_.handle, &request));
    collective.wait(request);
  } else {
    MPI_CHECK(MPI_Barrier(comm_.handle));
  }
}

std::unique_ptr<Communicator> MpiCommunicator::duplicate() {
  MpiCommunicatorOptions options;
  options.max_chunk = max_chunk_;
  {
    std::lock_guard lock(settings_mutex_);
    options.stall = policy_;
  }
  return std::make_unique<MpiCommunicator>(comm_.handle, options);
}

}  // namespace mpi_detail

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm) {
  return make_mpi_communicator(comm, MpiCommunicatorOptions{});
}

std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm,
                                                    const MpiCommunicatorOptions& options) {
  return std::make_unique<mpi_detail::MpiCommunicator>(comm, options);
}

}  // namespace lockstep::distributed
