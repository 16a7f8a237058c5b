#include "distributed/failure.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "common/error.h"
#include "distributed/launcher_pmi.h"

namespace lockstep::distributed {

namespace {

// An InputError (a bad config key, data file or checkpoint) is usually met by
// every rank alike. A rank other than 0 gives rank 0 this long to report it
// and end the job (which ends this rank silently) before it reports its own.
constexpr int kQuietRankGraceMs = 3000;

}  // namespace

void fail_job(Communicator& comm, std::string_view message, int exit_code) noexcept {
  std::string line = "lockstep: rank ";
  try {
    line += std::to_string(comm.rank());
    line += ": ";
    line += message;
    line += "\n";
  } catch (...) {
    line = "lockstep: a rank failed (out of memory while reporting)\n";
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  comm.abort(exit_code);
  std::_Exit(exit_code);  // not reached: abort() does not return
}

void fail_job(Communicator& comm, const std::exception& error, int exit_code) noexcept {
  fail_job(comm, std::string_view(error.what()), exit_code);
}

int run_guarded(Communicator& comm, const std::function<int()>& body) noexcept {
  try {
    return body();
  } catch (const InputError& error) {
    if (comm.rank() != 0 && comm.size() > 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kQuietRankGraceMs));
    }
    fail_job(comm, error);
  } catch (const std::exception& error) {
    fail_job(comm, error);
  } catch (...) {
    fail_job(comm, "unknown exception (not derived from std::exception)");
  }
}

namespace {

// The handlers may only touch preformatted, fixed-size memory.
struct SignalLine {
  int signal;
  const char* what;
  char text[160];
  size_t length;
};

SignalLine g_lines[] = {
    {SIGINT, "interrupted (SIGINT)", {}, 0},
    {SIGTERM, "terminated (SIGTERM)", {}, 0},
    {SIGHUP, "hung up (SIGHUP)", {}, 0},
    {SIGQUIT, "quit (SIGQUIT)", {}, 0},
    {SIGSEGV, "crashed: invalid memory access (SIGSEGV)", {}, 0},
    {SIGBUS, "crashed: bus error (SIGBUS)", {}, 0},
    {SIGFPE, "crashed: arithmetic error (SIGFPE)", {}, 0},
    {SIGILL, "crashed: illegal instruction (SIGILL)", {}, 0},
    {SIGABRT, "aborted (SIGABRT)", {}, 0},
};
int g_rank = -1;
int g_pmi_fd = -1;      // hydra's PMI connection (PMI_FD), -1 without one
HydraAncestry g_hydra;  // the proxy and its child above this rank

// MPICH's mpiexec forwards a SIGTERM (a scheduler's wall time) to every rank
// and, having forwarded it, reports exit code 0 for any rank whose exit its
// proxy reaps only after that rank's output pipes have closed (hydra
// pmip.c, "forced cleanup"): 6 of 30 such jobs exited 0. A child that holds
// stdout and stderr open for a moment after this process exits lets the
// proxy reap it first, with its code. Async-signal-safe (_Fork, no atfork
// handlers; raw system calls only in the child).
void hold_output_past_exit() noexcept {
  if (_Fork() == 0) {
    syscall(SYS_close_range, 3U, ~0U, 0U);  // no MPI, PMI or liveness sockets
    struct timespec linger = {0, 300'000'000};
    nanosleep(&linger, nullptr);
    _exit(0);
  }
}

// The same for a stop that hydra's proxy forwarded to every rank, where the
// moment above is not enough: this rank's PMI connection closing without a
// finalize makes the proxy SIGKILL the node's other ranks, maybe still in
// this handler (the job then exits 9), and a rank it reaps after the last
// pipe closed counts as exit 0. The child keeps the PMI connection and the
// pipes until the proxy has reaped this rank, or the wrapper that runs it
// (launcher_pmi.h).
void linger_with_launcher(int pmi_fd, pid_t watched) noexcept {
  if (_Fork() == 0) {
    const auto fd = static_cast<unsigned>(pmi_fd);
    syscall(SYS_close_range, 3U, fd - 1, 0U);
    syscall(SYS_close_range, fd + 1, ~0U, 0U);
    linger_until_reaped(pmi_fd, watched, 5000);
    _exit(0);
  }
}

void on_signal(int signal, siginfo_t* info, void* /*context*/) {
  const int saved = errno;
  for (const SignalLine& line : g_lines) {
    if (line.signal == signal) {
      ssize_t ignored = write(STDERR_FILENO, line.text, line.length);
      (void)ignored;
    }
  }
  pause_for_launcher();
  errno = saved;
  // Asked to stop: exit with the shell's code for it (128 + signal), which
  // launchers pass on as an exit code rather than as a crash.
  if (signal == SIGINT || signal == SIGTERM) {
    // Sent by hydra's proxy (this rank's parent, or a wrapper's): the
    // launcher stops the job.
    const bool from_launcher = g_pmi_fd >= 0 && info != nullptr && info->si_pid == g_hydra.proxy;
    if (from_launcher && claim_pmi_connection()) {
      linger_with_launcher(g_pmi_fd, g_hydra.proxy_child);
    } else {
      hold_output_past_exit();
    }
    _exit(128 + signal);
  }
  // SA_RESETHAND restored the default action: die of the same signal.
  raise(signal);
}

void on_terminate() noexcept {
  std::string message = "terminated";
  if (std::exception_ptr current = std::current_exception()) {
    try {
      std::rethrow_exception(current);
    } catch (const std::exception& error) {
      message = std::string("uncaught exception: ") + error.what();
    } catch (...) {
      message = "uncaught exception (not derived from std::exception)";
    }
  }
  std::fprintf(stderr, "lockstep: rank %d: %s; ending the job\n", g_rank, message.c_str());
  std::fflush(stderr);
  pause_for_launcher();
  std::signal(SIGABRT, SIG_DFL);  // one line, not a second one for SIGABRT
  std::abort();
}

}  // namespace

void pause_for_launcher() noexcept {
  struct timespec pause = {0, 100'000'000};
  nanosleep(&pause, nullptr);
}

void install_failure_handlers(int rank) {
  g_rank = rank;
  g_hydra = find_hydra_ancestry();
  g_pmi_fd = g_hydra.proxy > 0 ? parse_pmi_fd(std::getenv("PMI_FD")) : -1;
  for (SignalLine& line : g_lines) {
    const int written = std::snprintf(line.text, sizeof(line.text),
                                      "lockstep: rank %d: %s; ending the job\n", rank, line.what);
    line.length = written > 0 ? std::min(static_cast<size_t>(written), sizeof(line.text) - 1) : 0;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESETHAND | SA_NODEFER | SA_SIGINFO;
    sigaction(line.signal, &action, nullptr);
  }
  std::set_terminate(on_terminate);
}

}  // namespace lockstep::distributed
