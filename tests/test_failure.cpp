// End to end: one failing rank ends the whole MPI job by itself, non-zero,
// with one line naming the rank, and leaves no process behind. Runs
// lockstep_failure_helper (tests/helpers/failure_helper.cpp) under mpiexec,
// inside `timeout` so that a hang fails the test instead of CI. The tests
// assert what ended the job (its messages, exit code, no timeout), not how
// long it took: a loaded machine stretches any time limit.
#include <dirent.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <initializer_list>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/run_command.h"

namespace {

struct JobResult {
  int exit_code = -1;  // 124: timeout killed it
  std::string output;  // stdout and stderr
};

// Runs `timeout 60 mpiexec -n RANKS helper MODE --tag=TAG`.
JobResult run_job(int ranks, const std::string& mode, const std::string& tag) {
  const lockstep::testing::CommandResult job = lockstep::testing::run_command(
      std::string("timeout -k 5 60 ") + LOCKSTEP_MPIEXEC + " -n " + std::to_string(ranks) + " " +
      LOCKSTEP_FAILURE_HELPER + " " + mode + " --tag=" + tag);
  return {job.exit_code, job.output};
}

// Processes whose command line contains `tag` (read from /proc).
std::vector<int> processes_with(const std::string& tag) {
  std::vector<int> found;
  DIR* proc = opendir("/proc");
  if (!proc) return found;
  while (dirent* entry = readdir(proc)) {
    const int pid = std::atoi(entry->d_name);
    if (pid <= 0 || pid == getpid()) continue;
    std::ifstream in("/proc/" + std::string(entry->d_name) + "/cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(tag) != std::string::npos) found.push_back(pid);
  }
  closedir(proc);
  return found;
}

// Runs the job and checks it ended by itself and left nothing behind.
JobResult run_checked(int ranks, const std::string& mode) {
  static int counter = 0;
  const std::string tag =
      "lockstep-failure-" + std::to_string(getpid()) + "-" + std::to_string(++counter) + "-" + mode;
  JobResult result = run_job(ranks, mode, tag);
  EXPECT_NE(result.exit_code, 124) << "the job hung until timeout killed it:\n" << result.output;
  std::vector<int> left = processes_with(tag);
  for (int i = 0; i < 50 && !left.empty(); ++i) {  // allow the launcher's cleanup to finish
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = processes_with(tag);
  }
  EXPECT_TRUE(left.empty()) << left.size() << " process(es) left behind, first pid "
                            << (left.empty() ? 0 : left[0]);
  return result;
}

// Runs the job (run_checked) and expects it to end non-zero with each of
// `parts` somewhere in its output.
JobResult expect_job_fails(int ranks, const std::string& mode,
                           std::initializer_list<std::string> parts) {
  JobResult job = run_checked(ranks, mode);
  EXPECT_NE(job.exit_code, 0) << job.output;
  for (const std::string& part : parts) {
    EXPECT_NE(job.output.find(part), std::string::npos) << "expected \"" << part << "\" in:\n"
                                                        << job.output;
  }
  return job;
}

TEST(FailureEndToEnd, HealthyJobSucceeds) {
  const JobResult job = run_checked(2, "ok");
  EXPECT_EQ(job.exit_code, 0) << job.output;
}

TEST(FailureEndToEnd, ExceptionOnOneRankEndsTheJob) {
  expect_job_fails(2, "throw", {"lockstep: rank 1: helper: bad value in rank 1's input\n"});
}

// Lines of output that contain part.
size_t count_lines_with(const std::string& output, const std::string& part) {
  size_t n = 0;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);) n += line.find(part) != std::string::npos;
  return n;
}

// The same error on every rank is printed once (by rank 0), with no MPI
// abort banner after it.
TEST(FailureEndToEnd, ErrorOnEveryRankIsPrintedOnce) {
  for (int ranks : {1, 3}) {
    const JobResult job = expect_job_fails(ranks, "throw_all", {});
    EXPECT_EQ(count_lines_with(job.output, "bad value in every rank's input"), 1u) << job.output;
    EXPECT_EQ(count_lines_with(job.output, "lockstep: rank 0: helper: bad value"), 1u)
        << job.output;
    EXPECT_EQ(job.output.find("MPI_Abort"), std::string::npos) << job.output;
    EXPECT_EQ(job.exit_code, 1) << job.output;
  }
}

// SIGTERM (a scheduler's wall-time limit) exits with 128 + 15.
TEST(FailureEndToEnd, SigtermExitsWith143) {
  const JobResult job = expect_job_fails(1, "sigterm_all", {"terminated (SIGTERM)"});
  EXPECT_EQ(job.exit_code, 143) << job.output;
}

// Runs `mpiexec -n 4 [WRAPPER] helper until_stopped` `times` times, each
// stopped by SIGTERM to mpiexec once rank 0 is ready; returns "codes: C1
// C2 ..." and the last job's output.
std::string stop_jobs(const std::string& tag, const std::string& wrapper, int times) {
  const std::string script =
      "out=$(mktemp); codes=''; for i in $(seq " + std::to_string(times) +
      "); do : >\"$out\"; timeout -k 5 60 " LOCKSTEP_MPIEXEC " -n 4 " + wrapper +
      " " LOCKSTEP_FAILURE_HELPER " until_stopped --tag=" + tag +
      " >\"$out\" 2>&1 & job=$!; "
      "until grep -q ready \"$out\" || ! kill -0 $job 2>/dev/null; do sleep 0.02; done; "
      "pkill -TERM -P $job; wait $job; codes=\"$codes $?\"; done; "
      "echo \"codes:$codes\"; tail -n 20 \"$out\"; rm -f \"$out\"";
  return lockstep::testing::run_command("bash -c '" + script + "'").output;
}

// A scheduler's wall time: SIGTERM to mpiexec, which forwards it to every
// rank. The job must exit 143 every time, also when each rank runs under a
// wrapper script (binding GPUs or CPUs, as sites do). Hydra's proxy SIGKILLs
// a node's other ranks when one rank's PMI connection closes before a
// finalize (the job then exited 9), and reports 0 for a process it reaps
// after the node's last output pipe closed; cluster_sigterm met the first
// in CI, and the straggler test's wrapper the second.
TEST(FailureEndToEnd, SigtermToTheLauncherExits143EveryTime) {
  const std::string tag = "lockstep-failure-" + std::to_string(getpid()) + "-stopped";
  const std::string direct = stop_jobs(tag, "", 6);
  EXPECT_NE(direct.find("codes: 143 143 143 143 143 143\n"), std::string::npos) << direct;
  // A wrapper that waits for the rank and passes the stop on as 143.
  const std::string wrapped =
      stop_jobs(tag, "sh " LOCKSTEP_SOURCE_DIR "/tests/helpers/trap_wrapper.sh", 3);
  EXPECT_NE(wrapped.find("codes: 143 143 143\n"), std::string::npos) << wrapped;
  EXPECT_TRUE(processes_with(tag).empty()) << "processes left behind";
}

TEST(FailureEndToEnd, SigkillOnOneRankEndsTheJob) {
  expect_job_fails(2, "sigkill", {});
}

TEST(FailureEndToEnd, SigtermOnOneRankEndsTheJob) {
  expect_job_fails(2, "sigterm", {"lockstep: rank 1: terminated (SIGTERM); ending the job\n"});
}

TEST(FailureEndToEnd, SegfaultOnOneRankEndsTheJob) {
  expect_job_fails(
      2, "segv", {"lockstep: rank 1: crashed: invalid memory access (SIGSEGV); ending the job\n"});
}

TEST(FailureEndToEnd, UncaughtExceptionOnOneRankEndsTheJob) {
  expect_job_fails(2, "terminate",
                   {"lockstep: rank 1: uncaught exception: helper: escaped from a thread; "
                    "ending the job\n"});
}

TEST(FailureEndToEnd, ErrorLeavingTheMpiScopeEndsTheJob) {
  expect_job_fails(2, "unwind", {"lockstep: rank 1: an error left MPI's scope; ending the job\n"});
}

TEST(FailureEndToEnd, FingerprintMismatchStopsEveryRankWithOneMessage) {
  expect_job_fails(3, "mismatch",
                   {": ranks disagree on config.batch_size: ranks 0, 2 have 64, rank 1 has 32 "
                    "(start every rank with the same config and data)\n"});
}

// The seconds a stall report says it waited ("has waited 2.1 s"), -1 if none.
double waited_seconds(const std::string& line) {
  const size_t at = line.find("has waited ");
  return at == std::string::npos ? -1.0 : std::atof(line.c_str() + at + 11);
}

// Rank 1 sleeps 120 s before the allreduce (longer than `timeout` allows the
// job): only the watchdog's abort can end it. The helper warns after 0.5 s
// and aborts after 2 s of waiting: a warning comes first, then one abort
// report that waited at least the abort limit.
TEST(FailureEndToEnd, StalledCollectiveIsReportedThenTheJobEnds) {
  const JobResult job =
      expect_job_fails(3, "stall",
                       {"lockstep: rank 0: stall: allreduce #1 [step 3 bucket 1]",
                        "missing ranks: 1", "ending the job (stall abort limit reached)"});
  std::istringstream in(job.output);
  int warnings_before = 0, aborts = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.find("rank 0: stall:") == std::string::npos) continue;
    if (line.find("stall abort limit reached") == std::string::npos) {
      warnings_before += aborts == 0;
      EXPECT_GE(waited_seconds(line), 0.5) << line;
      continue;
    }
    ++aborts;
    EXPECT_GE(waited_seconds(line), 2.0) << "aborted before the limit: " << line;
  }
  EXPECT_EQ(aborts, 1) << job.output;
  EXPECT_GE(warnings_before, 1) << "no warning before the abort:\n" << job.output;
}

}  // namespace
