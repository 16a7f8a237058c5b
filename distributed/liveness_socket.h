// The liveness monitor's TCP plumbing (distributed/liveness.cpp): a listening
// socket, this host's IPv4 addresses, a connect that tries addresses in
// order under a deadline, and the hello that names the connecting rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::distributed::liveness_detail {

// An owned file descriptor (-1: none).
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// A non-blocking socket listening on every IPv4 interface at an ephemeral
// port, which `port` receives. Throws LibraryError.
Socket listen_any(uint16_t& port);

// The IPv4 addresses (network byte order) of this host's interfaces that are
// up, loopback last.
std::vector<uint32_t> local_ipv4_addresses();

// "192.0.2.10".
std::string format_ipv4(uint32_t address);

// Connects to the first of `addresses` (network order) that answers at
// `port`, trying them in turn until `deadline_seconds` have passed; sends
// the 4-byte hello naming `rank`. Returns a non-blocking socket, or an
// invalid one when none answered.
Socket connect_and_greet(const std::vector<uint32_t>& addresses, uint16_t port, int rank,
                         double deadline_seconds);

// Accepts connections on `listener` until every rank in 1..size-1 has
// greeted or `deadline_seconds` have passed; returns one socket per rank
// (index 0 and ranks that never greeted: invalid).
std::vector<Socket> accept_ranks(const Socket& listener, int size, double deadline_seconds);

}  // namespace lockstep::distributed::liveness_detail
