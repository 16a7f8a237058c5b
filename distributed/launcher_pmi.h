// The few words lockstep says to MPICH's launcher itself: hydra's proxy, over
// the PMI-1 wire protocol on the connection whose descriptor MPICH passes in
// PMI_FD. Everything here is async-signal-safe (raw system calls, no
// allocation), so the SIGTERM handler may use it.
//
// Why lockstep speaks to the proxy at all (MPICH 4.0.2, hydra pmip.c and
// pmip_cb.c):
//  * a PMI connection that closes before a `finalize` is taken for a failed
//    process: the proxy SIGKILLs every other process on its node;
//  * once the proxy has forwarded a signal (mpiexec got SIGTERM), it keeps
//    the real exit code only of a process it reaps while some output pipe on
//    the node is still open, and reaps at most one per event it sees; any
//    other process is reported as having exited 0.
#pragma once

#include <sys/types.h>

#include <string_view>

namespace lockstep::distributed {

// True for the name (/proc/PID/comm) of MPICH's launcher proxy.
bool is_hydra_proxy(std::string_view parent_name);

// Where this process stands under hydra's proxy: the proxy, and the
// proxy's own child on the way down to this process (this process, or a
// wrapper script that ran it: `mpiexec -n 4 ./bind_gpu.sh lockstep ...`).
// -1s when no process within 8 generations above is hydra's proxy.
struct HydraAncestry {
  pid_t proxy = -1;
  pid_t proxy_child = -1;
};
HydraAncestry find_hydra_ancestry();

// PMI_FD's value when hydra's proxy launched this process, directly or
// through wrappers, else null: Slurm's PMI2 sets PMI_FD too, for another
// wire protocol. Not async-signal-safe (reads /proc): call it before the
// handlers need it.
const char* hydra_pmi_fd_variable();

// The descriptor in PMI_FD's value; -1 when absent or not a descriptor > 2.
int parse_pmi_fd(const char* value) noexcept;

// True for the first caller only: the end of a job (end_job) and a stop
// signal's handler may both want the connection, and one exchange at a time
// may use it.
bool claim_pmi_connection() noexcept;

// Sends `cmd=finalize` and waits up to `timeout_ms` for `cmd=finalize_ack`,
// skipping replies to earlier requests. True when acknowledged: the proxy
// then forgets the connection, and closing it is no failure.
bool pmi_finalize(int fd, int timeout_ms) noexcept;

// The last moments of a rank that the launcher asked to stop (a forwarded
// SIGTERM or SIGINT). Call in a child forked from the rank, which then exits
// with its code; `watched` is the process the proxy reaps (the rank, or the
// wrapper that runs it: HydraAncestry::proxy_child). The child holds the
// rank's output pipes and PMI connection, and asks the proxy a harmless
// question (PMI get_maxes) every 20 ms until `watched` has been reaped, so
// that the proxy reaps it with its code while an output pipe is still open;
// then it sends finalize, so that the connection's close kills nothing, and
// returns. Gives up after `max_ms`.
void linger_until_reaped(int pmi_fd, pid_t watched, int max_ms) noexcept;

}  // namespace lockstep::distributed
