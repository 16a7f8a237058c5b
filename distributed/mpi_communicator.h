// The MPI communicator and the MPI environment that must outlive it.
//
//   int main(int argc, char** argv) {
//     lockstep::distributed::MpiEnvironment mpi(&argc, &argv);  // first thing
//     auto comm = lockstep::distributed::make_mpi_communicator();
//     StallPolicy stall;                   // warn after 60 s by default
//     stall.abort_seconds = 600;           // and end the job after 10 min
//     comm->set_stall_policy(stall);
//     ...
//     comm->set_stall_label("step 12 bucket 3");
//     comm->allreduce(gradients, ReduceOp::kAverage);
//   }
//
// Threads: MPI runs with MPI_THREAD_MULTIPLE, so any thread may issue
// collectives (a background gradient-reduction thread, the main thread for
// metrics), but on one communicator only one collective may be in flight at a
// time, and every rank must issue the same collectives in the same order. Two
// collectives overlapping on one communicator throw. Use a second
// communicator for a second concurrent stream of collectives.
//
// Stall watchdog: with a StallPolicy whose limits are set (the default warns
// after 60 s), collectives are nonblocking MPI calls polled by the calling
// thread: it busy-polls for StallPolicy::spin_seconds, then sleeps briefly
// between polls so that a long wait leaves the core to compute threads. When
// the wait passes warning_seconds, the waiting rank reports (see
// distributed/stall.h); ranks that have waited half the warning time post
// their position to ranks 0 and 1 on a side communicator, so that rank 0's
// report names the missing ranks (rank 1's, when rank 0 is one of them).
// With both limits 0 the collectives are the plain
// blocking MPI calls.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "distributed/communicator.h"

namespace lockstep::distributed {

// Initializes MPI for the life of the object (MPI_Init_thread with
// MPI_THREAD_MULTIPLE) and finalizes it in the destructor. Works without a
// launcher (a singleton MPI job of size 1). Throws LibraryError when the MPI
// library cannot provide MPI_THREAD_MULTIPLE.
//
// If MPI is already initialized (by the application or another library), the
// environment adopts it after checking the thread level and leaves
// finalizing to whoever initialized it.
//
// If the environment is destroyed while an exception propagates in a job of
// more than one rank, the other ranks may be waiting in a collective and
// MPI_Finalize could wait forever: it then prints one line and aborts the job
// (MPI_Abort, exit code 1) instead. Catch errors inside its scope and end the
// job with fail_job() (distributed/failure.h).
class MpiEnvironment {
 public:
  MpiEnvironment() : MpiEnvironment(nullptr, nullptr) {}
  MpiEnvironment(int* argc, char*** argv);
  ~MpiEnvironment() noexcept;
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // Ends a job whose every rank calls this after its last collective on
  // `comm` (collective; takes the communicator, which must be the last one
  // alive). The ranks first meet in a barrier, so that none leaves while
  // another still works. Then it returns `exit_code` (and the destructor
  // runs MPI_Finalize), except in a job of several ranks under MPICH's
  // launcher (`launcher_fd`: hydra_pmi_fd_variable(), or null): there each rank
  // tells its launcher it finalized, flushes stdio and ends the process with
  // `exit_code` without MPI_Finalize. MPICH 4.0's finalize closes every UCX
  // endpoint and, over TCP, a close that still needs a reply from a peer
  // already waiting in the launcher's barrier waits forever (tried here: 3
  // in 12 two-node jobs of a plain MPI program on an idle machine, 12 in 16
  // on a loaded one). The launcher sees each process finalize and exit with
  // its code. Under any other launcher (srun, aprun, mpiexec when the
  // handshake fails) a job of several ranks runs MPI_Finalize here, under
  // finalize_within's deadline (kFinalizeDeadlineSeconds): past it the rank
  // says so and exits with `exit_code`.
  int end_job(std::unique_ptr<Communicator> comm, int exit_code, const char* launcher_fd);

 private:
  bool owns_ = false;
  int world_rank_ = 0;
  int world_size_ = 1;
};

struct MpiCommunicatorOptions {
  StallPolicy stall;
  // Largest element count handed to one MPI call; larger spans are reduced
  // in chunks. Only tests lower it.
  size_t max_chunk = static_cast<size_t>(INT_MAX);
};

// A communicator over a duplicate of `comm` (its own context: collectives on
// two communicators never match each other), with MPI_ERRORS_RETURN so every
// MPI failure becomes a LibraryError. Collective over `comm`.
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm = MPI_COMM_WORLD);
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm,
                                                    const MpiCommunicatorOptions& options);

// Ends every process of the job with `exit_code` (MPI_Abort on
// MPI_COMM_WORLD). MPI_Abort can block when the launcher cannot be reached
// (a node cut off by a partition): after `deadline_seconds` this process
// ends itself with `exit_code` (std::_Exit) instead. Prints nothing.
[[noreturn]] void abort_job(int exit_code, double deadline_seconds = 5.0) noexcept;

// Runs `finalize` (MPI_Finalize) under a deadline: when it has not returned
// after `deadline_seconds`, writes `line` to stderr and ends this process
// with `exit_code` (std::_Exit), so that a rank whose work is done never
// stays behind in a finalize that waits on a peer for ever.
void finalize_within(double deadline_seconds, int exit_code, const std::string& line,
                     const std::function<void()>& finalize);

// How long end_job lets MPI_Finalize run once every rank is done.
inline constexpr double kFinalizeDeadlineSeconds = 30.0;

// "MPICH 4.0.2", "Open MPI v4.1.4": the first line of MPI_Get_library_version.
std::string mpi_library_version();

}  // namespace lockstep::distributed
