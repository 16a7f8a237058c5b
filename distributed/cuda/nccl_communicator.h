// The NCCL communicator: collectives on GPU memory through NCCL, bootstrapped
// over (and delegating host-side work to) an MPI communicator. Only in builds
// with LOCKSTEP_HAVE_CUDA; callers guard with #if LOCKSTEP_HAVE_CUDA.
//
//   auto mpi = make_mpi_communicator();
//   auto backend = nn::make_cuda_backend(mpi->local_rank(), true);
//   auto comm = make_nccl_communicator(*mpi, mpi->local_rank());   // one GPU per rank
//   comm->allreduce(gradients_on_device, ReduceOp::kAverage);
//
// Which engine runs a collective depends on where its memory is:
//   - float and 16-bit allreduce (ncclHalf, ncclBfloat16: NCCL too rounds
//     each reduction step to 16 bits), broadcast, allgather on device
//     memory: NCCL, on the communicator's own stream, which first waits (an
//     event) for everything queued on the legacy default stream and hence on
//     every blocking stream: Tensor::copy_from and Tensor::zero, whose DMA
//     may still be in flight when they return, and the CUDA backend's ops.
//     Input written on a non-blocking stream must be complete (synchronize
//     that stream). The call returns once the result is in memory;
//   - the same on host memory, double and int64 allreduces (metrics), and
//     barrier: the MPI communicator.
// Every rank must pass memory of the same kind to the same collective.
//
// Gradient buckets: device_reducer() returns this communicator as a
// DeviceReducer (distributed/device_reducer.h): mark_ready records an event
// on the caller's stream, enqueue_allreduce makes NCCL's stream wait on it
// (only on it: waiting for the legacy stream there would also wait for the
// backward work queued after the bucket, and undo the overlap; a blocking
// caller's stream already follows earlier legacy-stream copies) and
// queues ncclAllReduce (returning once queued), finish makes the
// caller's stream wait on an event after the last one and polls on the host
// (asynchronous errors, stall policy) until it has passed. app/ hands it to
// the DistributedOptimizer on GPUs (app/platform/device.h).
//
// Average is NCCL's ncclAvg (each contribution scaled by 1/size, then
// summed): the same on every rank, but not bit-identical to the MPI
// communicator's sum-then-divide.
//
// Failures: every NCCL call is checked (LibraryError). While a collective
// runs, the waiting thread polls NCCL's asynchronous error state; an error
// there (a peer died, a network failure) aborts the NCCL communicator and
// throws DistributedError naming this rank and the collective. The stall
// policy (set_stall_policy) applies to NCCL waits as to MPI ones: reports
// after warning_seconds, Communicator::abort after abort_seconds. Rank 0's
// report cannot name missing ranks for NCCL collectives.
//
// Threads: any thread may issue collectives (the device is made current on
// it), one at a time; two overlapping on one communicator throw.
//
// The MPI communicator must outlive this one. The destructor aborts the NCCL
// communicator (ncclCommAbort: local, cannot hang on a dead peer); nothing is
// in flight then, since every collective has completed when it returns.
#pragma once

#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace lockstep::distributed {

// Collective over mpi_comm: rank 0 creates the NCCL unique id, broadcasts it
// over MPI, and every rank joins on CUDA device `device` (one rank per
// device). Throws DistributedError on every rank naming the ranks that could
// not use their device, LibraryError when NCCL cannot start.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& mpi_comm, int device);

// "2.28.3"
std::string nccl_version();

}  // namespace lockstep::distributed
