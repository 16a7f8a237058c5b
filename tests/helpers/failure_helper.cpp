// A small MPI program that fails in chosen ways, run under mpiexec by
// tests/test_failure.cpp to prove that one failing rank ends the whole job.
//
//   lockstep_failure_helper MODE [--tag=ANY]
//   MODE: ok | throw | sigkill | sigterm | segv | terminate | mismatch | stall |
//         unwind | throw_all (every rank) | sigterm_all (every rank) |
//         until_stopped (rank 0 prints "ready", then every rank reduces
//         until a signal stops it)
// The tag is ignored: tests use it to find leftover processes.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "distributed/failure.h"
#include "distributed/fingerprint.h"
#include "distributed/mpi_communicator.h"

using namespace lockstep;
using namespace lockstep::distributed;

namespace {

int run(Communicator& comm, const std::string& mode) {
  const std::vector<std::string> modes = {"ok",        "throw",       "sigkill",      "sigterm",
                                          "segv",      "terminate",   "mismatch",     "stall",
                                          "throw_all", "sigterm_all", "until_stopped"};
  if (std::find(modes.begin(), modes.end(), mode) == modes.end()) {
    fail_input("unknown mode '", mode, "' (ok, throw, sigkill, sigterm, segv, terminate, ",
               "mismatch, stall, throw_all, sigterm_all, until_stopped)");
  }
  const int rank = comm.rank();
  comm.barrier();
  if (mode == "ok") {
    std::vector<float> x(10, 1.0f);
    comm.allreduce(std::span<float>(x), ReduceOp::kSum);
    return x[0] == static_cast<float>(comm.size()) ? 0 : 3;
  }
  if (mode == "mismatch") {
    FingerprintItems items = {{"config.batch_size", rank == 1 ? "32" : "64"},
                              {"dataset.train.size", "60000"}};
    check_same_fingerprint(comm, items);
    return 0;
  }
  if (mode == "stall") {
    StallPolicy policy;
    policy.warning_seconds = 0.5;
    policy.abort_seconds = 2.0;
    comm.set_stall_policy(policy);
    comm.set_stall_label("step 3 bucket 1");
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(120));
    std::vector<float> x(10, 1.0f);
    comm.allreduce(std::span<float>(x), ReduceOp::kSum);
    return 0;
  }
  if (mode == "until_stopped") {
    comm.barrier();
    if (rank == 0) {
      std::printf("ready\n");
      std::fflush(stdout);
    }
    std::vector<float> x(1000, 1.0f);
    for (;;) comm.allreduce(std::span<float>(x), ReduceOp::kMax);
  }
  if (mode == "throw_all") throw InputError("helper: bad value in every rank's input");
  if (mode == "sigterm_all") raise(SIGTERM);
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the others wait in barrier
    if (mode == "throw") throw InputError("helper: bad value in rank 1's input");
    if (mode == "sigkill") raise(SIGKILL);
    if (mode == "sigterm") raise(SIGTERM);
    if (mode == "segv") {
      volatile int* volatile nowhere = nullptr;
      *nowhere = 1;
    }
    if (mode == "terminate") {
      std::thread([] { throw DistributedError("helper: escaped from a thread"); }).join();
    }
  }
  comm.barrier();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    MpiEnvironment mpi(&argc, &argv);
    auto comm = make_mpi_communicator();
    if (mode == "unwind") {
      // An error escapes the environment's scope on rank 1 only, while the
      // others wait: the environment must end the job rather than finalize.
      comm->barrier();
      if (comm->rank() == 1) throw InputError("helper: error escaping the MPI scope");
      comm->barrier();
      return 0;
    }
    install_failure_handlers(comm->rank());
    return run_guarded(*comm, [&] { return run(*comm, mode); });
  } catch (const std::exception& error) {
    std::fprintf(stderr, "helper: caught after MPI's scope: %s\n", error.what());
    return 3;
  }
}
