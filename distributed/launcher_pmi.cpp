#include "distributed/launcher_pmi.h"

#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>

namespace lockstep::distributed {

namespace {

bool write_all(int fd, const char* text, size_t length) noexcept {
  size_t sent = 0;
  while (sent < length) {
    const ssize_t n = ::write(fd, text + sent, length - sent);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno != EINTR) {
      return false;
    }
  }
  return true;
}

// Splits the proxy's replies into lines without allocating; remembers
// whether one of them was `cmd=finalize_ack`.
struct ReplyReader {
  char line[256] = {};
  size_t length = 0;
  bool acknowledged = false;

  void take(const char* data, size_t n) noexcept {
    for (size_t i = 0; i < n; ++i) {
      if (data[i] != '\n') {
        if (length < sizeof(line)) line[length++] = data[i];
        continue;
      }
      constexpr char kAck[] = "cmd=finalize_ack";
      if (length >= sizeof(kAck) - 1 && std::memcmp(line, kAck, sizeof(kAck) - 1) == 0) {
        acknowledged = true;
      }
      length = 0;
    }
  }

  // Reads what has arrived within `timeout_ms`; false when the connection
  // closed or failed.
  bool read_some(int fd, int timeout_ms) noexcept {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0) return errno == EINTR;
    if (ready == 0) return true;
    char buffer[256];
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
    take(buffer, static_cast<size_t>(n));
    return true;
  }
};

long long now_ms() noexcept {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<long long>(t.tv_sec) * 1000 + t.tv_nsec / 1'000'000;
}

}  // namespace

bool is_hydra_proxy(std::string_view parent_name) {
  return parent_name == "hydra_pmi_proxy";
}

namespace {

// The name and parent of process `pid` from /proc; false when unreadable.
bool read_process(pid_t pid, std::string& name, pid_t& parent) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  if (!std::getline(comm, name)) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  char state = 0;
  int ppid = 0;
  if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return false;
  parent = ppid;
  return true;
}

}  // namespace

HydraAncestry find_hydra_ancestry() {
  pid_t child = getpid(), pid = getppid();
  for (int generation = 0; generation < 8 && pid > 1; ++generation) {
    std::string name;
    pid_t parent = 0;
    if (!read_process(pid, name, parent)) break;
    if (is_hydra_proxy(name)) return {pid, child};
    child = pid;
    pid = parent;
  }
  return {};
}

const char* hydra_pmi_fd_variable() {
  return find_hydra_ancestry().proxy > 0 ? std::getenv("PMI_FD") : nullptr;
}

bool claim_pmi_connection() noexcept {
  static std::atomic<bool> claimed{false};
  return !claimed.exchange(true);
}

int parse_pmi_fd(const char* value) noexcept {
  if (value == nullptr || *value == '\0') return -1;
  int fd = 0;
  for (const char* c = value; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || fd > 1'000'000) return -1;
    fd = fd * 10 + (*c - '0');
  }
  return fd > 2 ? fd : -1;
}

bool pmi_finalize(int fd, int timeout_ms) noexcept {
  constexpr char kRequest[] = "cmd=finalize\n";
  if (fd < 0 || !write_all(fd, kRequest, sizeof(kRequest) - 1)) return false;
  ReplyReader reader;
  const long long deadline = now_ms() + timeout_ms;
  while (!reader.acknowledged) {
    const long long left = deadline - now_ms();
    if (left <= 0 || !reader.read_some(fd, static_cast<int>(left))) return false;
  }
  return true;
}

void linger_until_reaped(int pmi_fd, pid_t watched, int max_ms) noexcept {
  constexpr char kQuestion[] = "cmd=get_maxes\n";
  ReplyReader reader;
  const long long deadline = now_ms() + max_ms;
  // kill(pid, 0) succeeds for a running process and for a zombie; ESRCH
  // once its parent has reaped it.
  while (now_ms() < deadline && !(::kill(watched, 0) != 0 && errno == ESRCH)) {
    if (!write_all(pmi_fd, kQuestion, sizeof(kQuestion) - 1)) return;
    if (!reader.read_some(pmi_fd, 20)) return;
    timespec pause = {0, 20'000'000};
    nanosleep(&pause, nullptr);
  }
  // pmi_finalize skips the answers still on their way.
  pmi_finalize(pmi_fd, 2000);
}

}  // namespace lockstep::distributed
