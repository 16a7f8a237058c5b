// Communicator: the collectives data-parallel training needs, behind one
// interface with a size-1 implementation, so single-process code has no
// #ifdefs. It is an object passed down from app/: no globals, no singletons.
//
// Every rank must call the same collectives in the same order with the same
// counts; spans carry the count, so it always matches the type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "distributed/compression.h"
#include "distributed/stall.h"

namespace lockstep::distributed {

enum class ReduceOp { kSum, kAverage, kMin, kMax };

std::string to_string(ReduceOp op);

class DeviceReducer;

// For implementations of allreduce_16bit: throws unless format is fp16 or
// bf16 and op is sum or average.
void check_16bit(Compression format, ReduceOp op);

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank and size within this node (MPI_COMM_TYPE_SHARED), and node count.
  virtual int local_rank() const = 0;
  virtual int local_size() const = 0;
  virtual int node_count() const = 0;
  virtual std::string host_name() const = 0;
  // "single", "mpi (MPICH 4.0.2)", ...
  virtual std::string describe() const = 0;

  // In place on every rank.
  virtual void allreduce(std::span<float> data, ReduceOp op) = 0;
  virtual void allreduce(std::span<double> data, ReduceOp op) = 0;
  virtual void allreduce(std::span<int64_t> data, ReduceOp op) = 0;
  // 16-bit floating point values (`format`: fp16 or bf16 bit patterns), 2
  // bytes each on the wire. op: sum or average (min and max throw). Each
  // reduction step adds in fp32 and rounds back to `format`
  // (compression.h: add_16bit); average then divides the sum by size() and
  // rounds again. Overflow gives infinity, which every rank receives.
  virtual void allreduce_16bit(std::span<uint16_t> data, Compression format, ReduceOp op) = 0;
  // Raw bytes from root to every rank (in place).
  virtual void broadcast(std::span<std::byte> data, int root) = 0;
  // out.size() == size() * in.size(); rank r's block lands at r * in.size().
  virtual void allgather(std::span<const std::byte> in, std::span<std::byte> out) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job at once (MPI_Abort); never returns.
  [[noreturn]] virtual void abort(int exit_code) noexcept = 0;

  // Stall watchdog (see distributed/stall.h). Communicators that cannot
  // stall (size 1) ignore both. The label names what the next collectives
  // are for ("step 1234 bucket 3"); set it from the thread that issues them.
  // Both are safe to call from any thread.
  virtual void set_stall_policy(StallPolicy policy) {}
  virtual void set_stall_label(std::string label) {}

  // Reduction of device buffers ordered by device streams instead of host
  // waits (distributed/device_reducer.h); null when this communicator has
  // none (every communicator but NCCL's).
  virtual DeviceReducer* device_reducer() { return nullptr; }

  // A new communicator over the same ranks whose collectives never match
  // this one's (MPI: a duplicate with the same stall policy), for a second
  // stream of collectives that may overlap this one's: SyncBatchNorm's in
  // backward, beside the gradient thread's. Collective. Null when this
  // communicator cannot (size 1 and test doubles: nothing runs concurrently).
  virtual std::unique_ptr<Communicator> duplicate() { return nullptr; }

  // Typed conveniences built on the byte versions.
  template <typename T>
  void broadcast_values(std::span<T> data, int root) {
    broadcast(std::as_writable_bytes(data), root);
  }
  void broadcast_string(std::string& s, int root);
  // Every rank's s, in rank order (strings of any length).
  std::vector<std::string> allgather_string(const std::string& s);
  template <typename T>
  std::vector<T> allgather_value(const T& value) {
    std::vector<T> out(static_cast<size_t>(size()));
    allgather(std::as_bytes(std::span<const T>(&value, 1)),
              std::as_writable_bytes(std::span<T>(out)));
    return out;
  }
};

// The size-1 communicator: every collective is the identity.
std::unique_ptr<Communicator> make_single_communicator();

}  // namespace lockstep::distributed
