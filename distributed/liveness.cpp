#include "distributed/liveness.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "distributed/liveness_socket.h"
#include "distributed/stall.h"

namespace lockstep::distributed {

using liveness_detail::Socket;

void LivenessPolicy::validate() const {
  const auto check = [](double value, const char* name) {
    if (!std::isfinite(value) || value < 0.0) {
      throw InputError(detail::concat(name, " must be a number of seconds >= 0, got ", value));
    }
  };
  check(heartbeat_seconds, "heartbeat_interval_s");
  check(timeout_seconds, "liveness_timeout_s");
  check(connect_seconds, "liveness connect time");
  if (enabled() && !(heartbeat_seconds > 0.0 && heartbeat_seconds < timeout_seconds)) {
    throw InputError(detail::concat("heartbeat_interval_s (", heartbeat_seconds,
                                    ") must be above 0 and below liveness_timeout_s (",
                                    timeout_seconds, ")"));
  }
}

namespace {

// `ranks` (on `nodes`) grouped by node, in order of first appearance; the
// `whole` nodes named as nodes.
std::string group_by_node(const std::vector<int>& ranks, const std::vector<std::string>& nodes,
                          const std::vector<std::string>& whole) {
  std::vector<std::pair<std::string, std::vector<int>>> by_node;
  for (size_t i = 0; i < ranks.size(); ++i) {
    auto it = std::find_if(by_node.begin(), by_node.end(),
                           [&](const auto& entry) { return entry.first == nodes[i]; });
    if (it == by_node.end()) it = by_node.insert(by_node.end(), {nodes[i], {}});
    it->second.push_back(ranks[i]);
  }
  std::string what;
  for (const auto& [node, node_ranks] : by_node) {
    if (!what.empty()) what += ", ";
    const bool all = std::find(whole.begin(), whole.end(), node) != whole.end();
    const std::string list =
        detail::concat(node_ranks.size() == 1 ? "rank " : "ranks ", format_rank_list(node_ranks));
    what += all ? detail::concat("node ", node, " (", list, ")") : list + " on " + node;
  }
  return what;
}

// The nodes of `nodes` (the listed ranks' nodes) all of whose ranks are
// listed, by `hosts` (every rank's node).
std::vector<std::string> whole_nodes_of(const std::vector<std::string>& nodes,
                                        const std::vector<std::string>& hosts) {
  std::vector<std::string> whole;
  for (const std::string& node : nodes) {
    const auto on_node = [&](const std::vector<std::string>& names) {
      return std::count(names.begin(), names.end(), node);
    };
    const bool seen = std::find(whole.begin(), whole.end(), node) != whole.end();
    if (!seen && on_node(nodes) == on_node(hosts)) whole.push_back(node);
  }
  return whole;
}

}  // namespace

std::string ranks_by_node(const std::vector<int>& ranks, const std::vector<std::string>& hosts) {
  std::vector<std::string> nodes;
  for (const int r : ranks) nodes.push_back(hosts.at(static_cast<size_t>(r)));
  return group_by_node(ranks, nodes, whole_nodes_of(nodes, hosts));
}

std::string unreached_line(const std::vector<int>& absent, const std::vector<std::string>& hosts,
                           const std::string& addresses, int port, double seconds) {
  return detail::concat(
      "liveness: ", absent.empty() ? std::string("a rank") : ranks_by_node(absent, hosts),
      " could not connect to rank 0 (", hosts.at(0), ") at ", addresses, " port ", port, " within ",
      seconds,
      " s: is TCP between the nodes blocked? liveness_timeout_s = 0 turns the monitor off");
}

std::string LivenessLoss::message() const {
  const std::string what = group_by_node(ranks, nodes, whole_nodes);
  std::string line = detail::concat("rank ", reporter, " (", reporter_node, "): lost ", what, ": ");
  if (closed) {
    line += "the connection closed without a goodbye (crashed or killed)";
  } else {
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", silent_seconds);
    line += detail::concat("silent for ", seconds,
                           " s (frozen, cut off by the network or powered off)");
  }
  line += reporter == 0 ? "; ending the job" : "; ending this rank";
  return line;
}

std::string slow_link_line(const LinkTimes& times, double floor_seconds, double factor) {
  // Each node: the shortest longest round trip of its measured ranks, and
  // the shortest median.
  struct Node {
    std::string name;
    double longest, typical;
  };
  std::vector<Node> nodes;
  for (size_t r = 1; r < times.round_trip.size(); ++r) {
    if (times.round_trip[r] <= 0.0) continue;
    auto it = std::find_if(nodes.begin(), nodes.end(),
                           [&](const Node& n) { return n.name == times.nodes[r]; });
    if (it == nodes.end()) {
      nodes.push_back({times.nodes[r], times.round_trip[r], times.typical[r]});
    } else {
      it->longest = std::min(it->longest, times.round_trip[r]);
      it->typical = std::min(it->typical, times.typical[r]);
    }
  }
  if (nodes.empty()) return "";
  const auto slowest =
      std::max_element(nodes.begin(), nodes.end(),
                       [](const Node& a, const Node& b) { return a.longest < b.longest; });
  double fastest = 0.0;  // rank 0 alone on its node: no other node to compare with
  bool others = false;
  for (const Node& n : nodes) {
    if (&n == &*slowest) continue;
    fastest = others ? std::min(fastest, n.typical) : n.typical;
    others = true;
  }
  if (slowest->longest <= floor_seconds || slowest->longest <= factor * fastest) return "";
  std::vector<int> ranks;
  for (size_t r = 1; r < times.nodes.size(); ++r) {
    if (times.nodes[r] == slowest->name) ranks.push_back(static_cast<int>(r));
  }
  char slow[32], fast[32];
  std::snprintf(slow, sizeof(slow), "%.0f", 1e3 * slowest->longest);
  std::snprintf(fast, sizeof(fast), "%.1f", 1e3 * fastest);
  std::string text = detail::concat("slow link: node ", slowest->name, " (",
                                    ranks.size() == 1 ? "rank " : "ranks ", format_rank_list(ranks),
                                    "): heartbeat round trip ", slow, " ms");
  if (others) text += detail::concat(", fastest node ", fast, " ms");
  return text;
}

class LivenessMonitor::Impl {
 public:
  Impl(Communicator& comm, LivenessPolicy policy, OnLoss on_loss)
      : comm_(comm), policy_(policy), on_loss_(std::move(on_loss)) {
    policy_.validate();
    gather_host_names();
    connect_peers();
    if (pipe2(wake_, O_CLOEXEC) != 0) throw LibraryError("liveness: pipe failed");
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() {
    stopping_.store(true);
    const char byte = 0;
    ssize_t ignored = write(wake_[1], &byte, 1);
    (void)ignored;
    if (thread_.joinable()) thread_.join();
    for (Peer& p : peers_) {
      if (p.socket.valid()) send(p.socket.fd(), "q", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    close(wake_[0]);
    close(wake_[1]);
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Peer {
    int rank = 0;
    Socket socket;
    Clock::time_point last_seen;
    bool finished = false;  // said goodbye
    bool closed = false;    // closed without one
    // Rank 0: the probe in flight (sent at probe_sent) and the round trips
    // since take_link_times().
    bool probing = false;
    Clock::time_point probe_sent;
    std::vector<double> round_trips;  // at most one a heartbeat
  };

  void gather_host_names() {
    std::array<char, 64> mine{};
    std::strncpy(mine.data(), comm_.host_name().c_str(), mine.size() - 1);
    for (const auto& name : comm_.allgather_value(mine)) hosts_.emplace_back(name.data());
  }

  void connect_peers();
  void run();
  bool poll_once(double seconds);
  std::vector<const Peer*> lost_peers(double limit_seconds, double* silent) const;
  void send_heartbeats();
  void report(std::vector<const Peer*> lost, double silent);

 public:
  LinkTimes take_link_times() {
    LinkTimes times;
    if (comm_.rank() != 0) return times;
    times.nodes = hosts_;
    times.round_trip.assign(hosts_.size(), 0.0);
    times.typical.assign(hosts_.size(), 0.0);
    std::lock_guard lock(links_mutex_);
    for (Peer& p : peers_) {
      std::vector<double>& trips = p.round_trips;
      if (trips.empty()) continue;
      std::sort(trips.begin(), trips.end());
      times.round_trip[static_cast<size_t>(p.rank)] = trips.back();
      times.typical[static_cast<size_t>(p.rank)] = trips[trips.size() / 2];
      trips.clear();
    }
    return times;
  }

 private:
  std::mutex links_mutex_;  // the round-trip fields of peers_

  Communicator& comm_;
  LivenessPolicy policy_;
  OnLoss on_loss_;
  std::vector<std::string> hosts_;
  std::vector<Peer> peers_;  // rank 0: every other rank; others: rank 0
  int wake_[2] = {-1, -1};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Rank 0 listens and broadcasts where; the others connect; all agree whether
// every connection was made.
void LivenessMonitor::Impl::connect_peers() {
  struct Where {
    uint32_t count = 0;
    uint16_t port = 0;
    std::array<uint32_t, 16> addresses{};
  } where;
  Socket listener;
  if (comm_.rank() == 0) {
    listener = liveness_detail::listen_any(where.port);
    const std::vector<uint32_t> mine = liveness_detail::local_ipv4_addresses();
    where.count = static_cast<uint32_t>(std::min(mine.size(), where.addresses.size()));
    std::copy_n(mine.begin(), where.count, where.addresses.begin());
  }
  comm_.broadcast_values(std::span<Where>(&where, 1), 0);
  std::vector<uint32_t> addresses(where.addresses.begin(), where.addresses.begin() + where.count);
  // Which ranks rank 0 did not hear from: every rank names them alike.
  std::vector<int64_t> unreached(static_cast<size_t>(comm_.size()), 0);
  bool connected = true;
  if (comm_.rank() == 0) {
    std::vector<Socket> sockets =
        liveness_detail::accept_ranks(listener, comm_.size(), policy_.connect_seconds);
    for (int r = 1; r < comm_.size(); ++r) {
      if (!sockets[static_cast<size_t>(r)].valid()) unreached[static_cast<size_t>(r)] = 1;
      peers_.push_back({r, std::move(sockets[static_cast<size_t>(r)]), Clock::now()});
    }
  } else {
    if (hosts_[static_cast<size_t>(comm_.rank())] == hosts_[0]) {
      addresses.insert(addresses.begin(), htonl(INADDR_LOOPBACK));  // same node: loopback first
    }
    Socket s = liveness_detail::connect_and_greet(addresses, where.port, comm_.rank(),
                                                  policy_.connect_seconds);
    connected = s.valid();
    peers_.push_back({0, std::move(s), Clock::now()});
  }
  comm_.broadcast_values(std::span<int64_t>(unreached), 0);
  std::vector<int> absent;
  for (int r = 1; r < comm_.size(); ++r) {
    if (unreached[static_cast<size_t>(r)] != 0) absent.push_back(r);
  }
  std::array<int64_t, 1> ok = {connected && absent.empty() ? 1 : 0};
  comm_.allreduce(std::span<int64_t>(ok), ReduceOp::kMin);
  if (ok[0] == 1) return;
  std::string to;
  for (const uint32_t a : addresses)
    to += (to.empty() ? "" : ", ") + liveness_detail::format_ipv4(a);
  throw LibraryError(unreached_line(absent, hosts_, to, where.port, policy_.connect_seconds));
}

void LivenessMonitor::Impl::run() {
  pthread_setname_np(pthread_self(), kLivenessThreadName);
  const auto interval = std::chrono::duration<double>(policy_.heartbeat_seconds);
  Clock::time_point next_beat = Clock::now();
  while (!stopping_.load()) {
    if (Clock::now() >= next_beat) {
      send_heartbeats();
      next_beat = Clock::now() + std::chrono::duration_cast<Clock::duration>(interval);
    }
    if (!poll_once(std::chrono::duration<double>(next_beat - Clock::now()).count())) return;
    double silent = 0.0;
    std::vector<const Peer*> lost = lost_peers(policy_.timeout_seconds, &silent);
    if (lost.empty()) continue;
    // A node's ranks fail together: collect what else closes in the next
    // moment, and the ranks silent for half the limit (a frozen node's
    // ranks fell silent up to a heartbeat apart), so that the report names
    // the node once. A rank that lost rank 0's connection waits a little
    // longer: the launcher may be ending the job, which is not news.
    const bool lost_root = comm_.rank() != 0;
    if (!poll_once(lost_root && lost[0]->closed ? 2.0 : 0.5)) return;
    lost = lost_peers(policy_.companion_seconds(), nullptr);
    if (lost.empty()) continue;
    report(lost, silent);
    return;
  }
}

// The peers closed without a goodbye or silent past the limit; `silent`
// (when given) receives the longest silence among them.
std::vector<const LivenessMonitor::Impl::Peer*> LivenessMonitor::Impl::lost_peers(
    double limit_seconds, double* silent) const {
  std::vector<const Peer*> lost;
  for (const Peer& p : peers_) {
    if (p.finished) continue;
    const double quiet = std::chrono::duration<double>(Clock::now() - p.last_seen).count();
    if (p.closed || quiet > limit_seconds) {
      lost.push_back(&p);
      if (silent != nullptr) *silent = std::max(*silent, quiet);
    }
  }
  return lost;
}

// Waits up to `seconds` for heartbeats, goodbyes and closed connections;
// false when the monitor is stopping.
bool LivenessMonitor::Impl::poll_once(double seconds) {
  std::vector<pollfd> fds;
  fds.push_back({wake_[0], POLLIN, 0});
  for (const Peer& p : peers_) {
    fds.push_back({p.finished || p.closed ? -1 : p.socket.fd(), POLLIN, 0});
  }
  const int timeout = seconds <= 0.0 ? 0 : static_cast<int>(seconds * 1000.0) + 1;
  if (poll(fds.data(), fds.size(), timeout) < 0) return !stopping_.load();
  if (stopping_.load()) return false;
  for (size_t i = 0; i < peers_.size(); ++i) {
    if (fds[i + 1].fd < 0 || fds[i + 1].revents == 0) continue;
    Peer& p = peers_[i];
    char buffer[256];
    const ssize_t n = recv(p.socket.fd(), buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n > 0) {
      p.last_seen = Clock::now();
      const auto has = [&](char c) { return std::memchr(buffer, c, static_cast<size_t>(n)); };
      if (has('q') != nullptr) p.finished = true;
      if (has('p') != nullptr) send(p.socket.fd(), "e", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (has('e') != nullptr && p.probing) {
        const double trip = std::chrono::duration<double>(p.last_seen - p.probe_sent).count();
        std::lock_guard lock(links_mutex_);
        if (p.round_trips.size() < 100000) p.round_trips.push_back(trip);
        p.probing = false;
      }
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      p.closed = true;
    }
  }
  return true;
}

void LivenessMonitor::Impl::send_heartbeats() {
  const bool root = comm_.rank() == 0;
  for (Peer& p : peers_) {
    if (p.finished || p.closed) continue;
    // Rank 0's heartbeat is a probe when none is in flight to that rank.
    const bool probe = root && !p.probing;
    // A full buffer means the peer reads nothing: its silence says so.
    if (send(p.socket.fd(), probe ? "p" : "h", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1 && probe) {
      p.probing = true;
      p.probe_sent = Clock::now();
    }
  }
}

void LivenessMonitor::Impl::report(std::vector<const Peer*> lost, double silent) {
  LivenessLoss loss;
  loss.reporter = comm_.rank();
  loss.reporter_node = hosts_[static_cast<size_t>(comm_.rank())];
  loss.closed = std::any_of(lost.begin(), lost.end(), [](const Peer* p) { return p->closed; });
  loss.silent_seconds = silent;
  for (const Peer* p : lost) {
    loss.ranks.push_back(p->rank);
    loss.nodes.push_back(hosts_[static_cast<size_t>(p->rank)]);
  }
  loss.whole_nodes = whole_nodes_of(loss.nodes, hosts_);
  if (on_loss_) {
    on_loss_(loss);
    return;
  }
  const std::string line = "lockstep: " + loss.message() + "\n";
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  comm_.abort(1);
}

LivenessMonitor::LivenessMonitor(Communicator& comm, LivenessPolicy policy, OnLoss on_loss)
    : impl_(std::make_unique<Impl>(comm, policy, std::move(on_loss))) {}

LivenessMonitor::~LivenessMonitor() = default;

LinkTimes LivenessMonitor::take_link_times() {
  return impl_->take_link_times();
}

std::unique_ptr<LivenessMonitor> start_liveness(Communicator& comm, const LivenessPolicy& policy,
                                                LivenessMonitor::OnLoss on_loss) {
  policy.validate();
  if (comm.size() <= 1 || !policy.enabled()) return nullptr;
  return std::make_unique<LivenessMonitor>(comm, policy, std::move(on_loss));
}

}  // namespace lockstep::distributed
