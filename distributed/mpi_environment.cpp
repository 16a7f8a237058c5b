// The MPI environment (MPI_Init_thread / MPI_Finalize), the end of a job
// (end_job, abort_job) and the library version string.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>

#include "common/error.h"
#include "distributed/failure.h"
#include "distributed/launcher_pmi.h"
#include "distributed/mpi_check.h"
#include "distributed/mpi_communicator.h"

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
    pause_for_launcher();
    abort_job(1);
  }
  MPI_Finalize();
}

int MpiEnvironment::end_job(std::unique_ptr<Communicator> comm, int exit_code,
                            const char* launcher_fd) {
  LOCKSTEP_CHECK(comm != nullptr, "end_job needs the job's communicator");
  if (comm->size() > 1) {
    // Ranks that finished early wait for the others without spinning a core
    // (polled, with pauses) and without stall warnings: rank 0 may still be
    // writing files or running a rank-0-only command.
    StallPolicy quiet;
    quiet.warning_seconds = 1e9;
    comm->set_stall_policy(quiet);
    comm->set_stall_label("end of job");
    comm->barrier();
  }
  // Over TCP the hang needs no second node: MPICH closes a UCX endpoint to
  // every rank, those on its own node too (4 ranks on one fake node with
  // UCX_TLS=tcp,self hung as well). So every job of several ranks ends so.
  const bool several = comm->size() > 1;
  comm.reset();
  // Hydra's proxy takes a PMI connection that closes before a finalize for
  // a failed process and SIGKILLs the job's other processes: say it first.
  const int fd = parse_pmi_fd(launcher_fd);
  if (several && owns_ && fd >= 0 && claim_pmi_connection() && pmi_finalize(fd, 10'000)) {
    std::fflush(nullptr);
    std::_Exit(exit_code);
  }
  if (several && owns_) {
    const std::string line =
        detail::concat("lockstep: rank ", world_rank_, ": MPI_Finalize has not returned after ",
                       kFinalizeDeadlineSeconds,
                       " s (MPICH over TCP can wait for ever on a peer that already "
                       "left); this rank's work is done, ending it with exit code ",
                       exit_code, "\n");
    finalize_within(kFinalizeDeadlineSeconds, exit_code, line, [] { MPI_Finalize(); });
  }
  return exit_code;
}

void finalize_within(double deadline_seconds, int exit_code, const std::string& line,
                     const std::function<void()>& finalize) {
  std::fflush(nullptr);  // what this rank printed is out, whichever way it ends
  struct Watch {
    std::mutex mutex;
    std::condition_variable returned;
    bool done = false;
    std::thread thread;
    // Also when finalize throws: a joinable thread must not be destroyed.
    ~Watch() {
      {
        const std::lock_guard<std::mutex> lock(mutex);
        done = true;
      }
      returned.notify_one();
      if (thread.joinable()) thread.join();
    }
  } watch;
  try {
    watch.thread = std::thread([&] {
      std::unique_lock<std::mutex> lock(watch.mutex);
      if (watch.returned.wait_for(lock, std::chrono::duration<double>(deadline_seconds),
                                  [&] { return watch.done; })) {
        return;
      }
      // Neither stdio's lock (finalize may hold it) nor a full pipe to a
      // launcher that went away may keep this process alive.
      fcntl(STDERR_FILENO, F_SETFL, fcntl(STDERR_FILENO, F_GETFL) | O_NONBLOCK);
      [[maybe_unused]] const ssize_t said = ::write(STDERR_FILENO, line.data(), line.size());
      std::_Exit(exit_code);
    });
  } catch (const std::system_error&) {
    // No thread: finalize without a deadline.
  }
  finalize();
}

void abort_job(int exit_code, double deadline_seconds) noexcept {
  try {
    std::thread([exit_code, deadline_seconds] {
      std::this_thread::sleep_for(std::chrono::duration<double>(deadline_seconds));
      std::_Exit(exit_code);
    }).detach();
  } catch (...) {
    // No thread: MPI_Abort without a deadline.
  }
  silence_stderr();  // our line says why; MPICH's "Abort(1) on node 0" banner would repeat it
  // MPI_COMM_WORLD, not a duplicate: MPICH 4.0 ends only the calling process
  // when MPI_Abort is given a duplicated communicator.
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);
}

}  // namespace lockstep::distributed
