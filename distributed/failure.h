// Ending the whole job when one rank fails, so that no rank is left waiting
// in a collective for a peer that will never come.
//
// app/ wraps its work in run_guarded() (or catches and calls fail_job());
// install_failure_handlers() covers what no catch can: signals and
// std::terminate. Library code below app/ only throws.
//
//   MpiEnvironment mpi(&argc, &argv);
//   auto comm = make_mpi_communicator();
//   install_failure_handlers(comm->rank());
//   return run_guarded(*comm, [&] { return train(*comm, config); });
#pragma once

#include <exception>
#include <functional>
#include <string_view>

#include "distributed/communicator.h"

namespace lockstep::distributed {

// Prints "lockstep: rank R: <message>" as one line to stderr, then ends every
// rank of the job with comm.abort(exit_code).
[[noreturn]] void fail_job(Communicator& comm, std::string_view message,
                           int exit_code = 1) noexcept;
[[noreturn]] void fail_job(Communicator& comm, const std::exception& error,
                           int exit_code = 1) noexcept;

// Returns body()'s result; if body throws, fail_job() with the exception's
// message (the job ends with exit code 1). An InputError is usually raised
// alike on every rank: in a job of several ranks, a rank other than 0 waits
// up to 3 s before it reports one, so that rank 0 reports it once and ends
// the job; a rank that alone meets it still reports it after the wait.
int run_guarded(Communicator& comm, const std::function<int()>& body) noexcept;

// Process-wide (signal dispositions are per process): for SIGINT, SIGTERM,
// SIGHUP, SIGQUIT, SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, a handler
// writes one line "lockstep: rank R: <what happened>; ending the job" with
// async-signal-safe write(). SIGINT and SIGTERM (a user or a scheduler
// asking the job to stop) then exit with 128 + signal; the others restore
// the default action and re-raise the signal, so the rank dies of it. Either
// way the launcher (mpiexec, srun, aprun) ends the other ranks. A stop that
// MPICH's hydra forwarded (sent by the rank's parent, the proxy) ends with
// launcher_pmi.h's linger_until_reaped in a child, so that mpiexec reports
// 143 rather than 9 or 0. Checkpoints
// are written atomically, so a rank stopped mid-write leaves the previous
// one intact. An uncaught exception (std::terminate) prints its
// message the same way and aborts. Call again to update the rank.
void install_failure_handlers(int rank);

// Sleeps a tenth of a second so the launcher forwards the line this rank has
// just written and flushed before the rank dies (MPI_Abort, a re-raised
// signal): MPICH's mpiexec kills every process as soon as one ends and can
// drop output still in its pipes. Async-signal-safe (nanosleep).
void pause_for_launcher() noexcept;

}  // namespace lockstep::distributed
