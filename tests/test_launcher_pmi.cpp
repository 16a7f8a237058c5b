// The PMI-1 words lockstep says to hydra's proxy (distributed/launcher_pmi.h),
// against a stand-in proxy on a socket pair. The end-to-end check with the
// real proxy is test_failure.cpp's forwarded SIGTERM.
#include "distributed/launcher_pmi.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace lockstep::distributed {
namespace {

struct SocketPair {
  int ours = -1, theirs = -1;
  SocketPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    ours = fds[0];
    theirs = fds[1];
  }
  ~SocketPair() {
    if (ours >= 0) close(ours);
    if (theirs >= 0) close(theirs);
  }
};

// Reads one line (without its newline) from fd; "" at the end.
std::string read_line(int fd) {
  std::string line;
  char c = 0;
  while (read(fd, &c, 1) == 1) {
    if (c == '\n') return line;
    line += c;
  }
  return line;
}

void write_text(int fd, const std::string& text) {
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
}

TEST(LauncherPmi, ParsesOnlyADescriptorAboveTheStandardStreams) {
  EXPECT_EQ(parse_pmi_fd("7"), 7);
  EXPECT_EQ(parse_pmi_fd("123"), 123);
  EXPECT_EQ(parse_pmi_fd(nullptr), -1);
  EXPECT_EQ(parse_pmi_fd(""), -1);
  EXPECT_EQ(parse_pmi_fd("2"), -1);  // stderr is no PMI connection
  EXPECT_EQ(parse_pmi_fd("7x"), -1);
  EXPECT_EQ(parse_pmi_fd("-7"), -1);
  EXPECT_EQ(parse_pmi_fd("99999999999"), -1);
}

// Only hydra's proxy speaks PMI-1 on PMI_FD; Slurm's PMI2 sets it too.
TEST(LauncherPmi, OnlyHydrasProxyIsTakenForTheLauncher) {
  EXPECT_TRUE(is_hydra_proxy("hydra_pmi_proxy"));
  EXPECT_FALSE(is_hydra_proxy("slurmstepd"));
  EXPECT_FALSE(is_hydra_proxy("bash"));
  EXPECT_FALSE(is_hydra_proxy(""));
  // This test's parent is ctest or a shell, not a proxy.
  EXPECT_EQ(hydra_pmi_fd_variable(), nullptr);
}

TEST(LauncherPmi, FinalizeSkipsEarlierRepliesAndWaitsForTheAck) {
  SocketPair pair;
  std::string asked;
  std::thread proxy([&] {
    asked = read_line(pair.theirs);
    // A late answer to an earlier question, split across writes, first.
    write_text(pair.theirs, "cmd=maxes kvsname_max=256 ");
    write_text(pair.theirs, "keylen_max=64 vallen_max=1024\ncmd=finalize_ack\n");
  });
  EXPECT_TRUE(pmi_finalize(pair.ours, 10'000));
  proxy.join();
  EXPECT_EQ(asked, "cmd=finalize");
}

TEST(LauncherPmi, FinalizeFailsWhenTheProxyAnswersSomethingElseAndCloses) {
  SocketPair pair;
  std::thread proxy([&] {
    read_line(pair.theirs);
    write_text(pair.theirs, "cmd=finalize_nack\n");
    close(pair.theirs);
    pair.theirs = -1;
  });
  EXPECT_FALSE(pmi_finalize(pair.ours, 10'000));
  proxy.join();
}

TEST(LauncherPmi, FinalizeGivesUpWhenTheProxyIsSilent) {
  SocketPair pair;
  EXPECT_FALSE(pmi_finalize(pair.ours, 50));
  EXPECT_EQ(read_line(pair.theirs), "cmd=finalize");
}

TEST(LauncherPmi, FinalizeFailsOnAClosedConnection) {
  EXPECT_FALSE(pmi_finalize(-1, 10));
}

// The test plays hydra's proxy for a "rank" it forked: the rank forks the
// lingering child and exits 143; the proxy reaps a child only when an event
// arrives, as hydra does. The rank must be reaped, with its code, before the
// finalize that ends the conversation.
TEST(LauncherPmi, LingeringChildAsksUntilTheRankIsReapedThenFinalizes) {
  SocketPair pair;
  const pid_t rank = fork();
  ASSERT_GE(rank, 0);
  if (rank == 0) {
    close(pair.ours);
    const pid_t me = getpid();
    if (fork() == 0) {
      linger_until_reaped(pair.theirs, me, 20'000);
      _exit(0);
    }
    _exit(143);
  }
  close(pair.theirs);
  pair.theirs = -1;
  int questions = 0, rank_status = -1;
  bool reaped_before_finalize = false, finalized = false;
  for (std::string line = read_line(pair.ours); !line.empty(); line = read_line(pair.ours)) {
    if (rank_status == -1) {
      int status = 0;
      if (waitpid(rank, &status, WNOHANG) == rank) rank_status = status;
    }
    if (line == "cmd=get_maxes") {
      ++questions;
      write_text(pair.ours, "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024\n");
    } else if (line == "cmd=finalize") {
      reaped_before_finalize = rank_status != -1;
      finalized = true;
      write_text(pair.ours, "cmd=finalize_ack\n");
    } else {
      ADD_FAILURE() << "unexpected request: " << line;
    }
  }
  if (rank_status == -1) waitpid(rank, &rank_status, 0);
  EXPECT_GE(questions, 1);
  EXPECT_TRUE(finalized);
  EXPECT_TRUE(reaped_before_finalize) << "finalize came before the rank was reaped";
  ASSERT_TRUE(WIFEXITED(rank_status));
  EXPECT_EQ(WEXITSTATUS(rank_status), 143);
}

}  // namespace
}  // namespace lockstep::distributed
