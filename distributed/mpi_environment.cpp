// The MPI environment (MPI_Init_thread / MPI_Finalize) and the library
// version string.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>

#include "common/error.h"
#include "distributed/failure.h"
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
    silence_stderr();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
}

}  // namespace lockstep::distributed
