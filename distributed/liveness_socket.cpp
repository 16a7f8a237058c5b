#include "distributed/liveness_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"

namespace lockstep::distributed::liveness_detail {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_left(Clock::time_point deadline) {
  return std::chrono::duration<double>(deadline - Clock::now()).count();
}

int poll_ms(double seconds) {
  return seconds <= 0.0 ? 0 : static_cast<int>(seconds * 1000.0) + 1;
}

void make_nonblocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

[[noreturn]] void fail(const char* what) {
  throw LibraryError(detail::concat("liveness: ", what, " failed: ", std::strerror(errno)));
}

// Waits until `fd` is writable (a non-blocking connect finished) and reports
// whether the connection was made.
bool finish_connect(int fd, double seconds) {
  pollfd p{fd, POLLOUT, 0};
  if (poll(&p, 1, poll_ms(seconds)) != 1) return false;
  int error = 0;
  socklen_t length = sizeof(error);
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) == 0 && error == 0;
}

// Reads the 4-byte hello (the rank, network order) within `seconds`; -1 when
// none came.
int read_hello(int fd, double seconds) {
  uint32_t hello = 0;
  size_t got = 0;
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(seconds));
  while (got < sizeof(hello)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, poll_ms(seconds_left(deadline))) != 1) return -1;
    const ssize_t n = recv(fd, reinterpret_cast<char*>(&hello) + got, sizeof(hello) - got, 0);
    if (n <= 0) return -1;
    got += static_cast<size_t>(n);
  }
  return static_cast<int>(ntohl(hello));
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Socket listen_any(uint16_t& port) {
  Socket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) fail("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  if (bind(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) fail("bind");
  if (listen(s.fd(), SOMAXCONN) != 0) fail("listen");
  socklen_t length = sizeof(address);
  if (getsockname(s.fd(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    fail("getsockname");
  }
  port = ntohs(address.sin_port);
  make_nonblocking(s.fd());
  return s;
}

std::vector<uint32_t> local_ipv4_addresses() {
  std::vector<uint32_t> external, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (const ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if (!(i->ifa_flags & IFF_UP)) continue;
      const uint32_t a = reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
      (i->ifa_flags & IFF_LOOPBACK ? loopback : external).push_back(a);
    }
    freeifaddrs(list);
  }
  external.insert(external.end(), loopback.begin(), loopback.end());
  return external;
}

std::string format_ipv4(uint32_t address) {
  char text[INET_ADDRSTRLEN] = {};
  in_addr a{};
  a.s_addr = address;
  inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

Socket connect_and_greet(const std::vector<uint32_t>& addresses, uint16_t port, int rank,
                         double deadline_seconds) {
  const Clock::time_point deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_seconds));
  // Rank 0 may not listen yet on the first try; each address gets up to 2 s
  // a round, and rounds repeat until the deadline.
  while (seconds_left(deadline) > 0.0) {
    for (const uint32_t a : addresses) {
      Socket s(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
      if (!s.valid()) fail("socket");
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_addr.s_addr = a;
      address.sin_port = htons(port);
      const int r = connect(s.fd(), reinterpret_cast<sockaddr*>(&address), sizeof(address));
      if (r != 0 && errno != EINPROGRESS) continue;
      if (r != 0 && !finish_connect(s.fd(), std::min(2.0, seconds_left(deadline)))) continue;
      const int one = 1;
      setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      const uint32_t hello = htonl(static_cast<uint32_t>(rank));
      if (send(s.fd(), &hello, sizeof(hello), MSG_NOSIGNAL) == sizeof(hello)) return s;
    }
    pollfd none{-1, 0, 0};
    poll(&none, 0, 100);  // between rounds: rank 0 is still starting
  }
  return Socket();
}

std::vector<Socket> accept_ranks(const Socket& listener, int size, double deadline_seconds) {
  std::vector<Socket> peers(static_cast<size_t>(size));
  int greeted = 0;
  const Clock::time_point deadline =
      Clock::now() +
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(deadline_seconds));
  while (greeted < size - 1 && seconds_left(deadline) > 0.0) {
    pollfd p{listener.fd(), POLLIN, 0};
    if (poll(&p, 1, poll_ms(seconds_left(deadline))) != 1) continue;
    Socket s(accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!s.valid()) {
      // Out of descriptors: every later accept fails the same way, and the
      // deadline's message would blame the network.
      if (errno == EMFILE || errno == ENFILE) {
        throw LibraryError(detail::concat(
            "liveness: rank 0 cannot accept the other ranks' connections: ", std::strerror(errno),
            " (it holds one per rank: raise the open-file limit, ulimit -n / RLIMIT_NOFILE, to "
            "more than ",
            size, ")"));
      }
      continue;
    }
    const int rank = read_hello(s.fd(), std::max(1.0, seconds_left(deadline)));
    if (rank <= 0 || rank >= size || peers[static_cast<size_t>(rank)].valid()) continue;
    make_nonblocking(s.fd());
    const int one = 1;
    setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    peers[static_cast<size_t>(rank)] = std::move(s);
    ++greeted;
  }
  return peers;
}

}  // namespace lockstep::distributed::liveness_detail
