// parallel_for: body(i) for i in [0, n) on a few std::threads that take
// indices in increasing order from a shared counter (for per-file work such
// as decoding or encoding images, where items vary in cost).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace lockstep::data {

// threads <= 0: every core; when the system cannot start as many threads,
// the ones it started do the work. The first exception thrown by body stops the
// remaining work and is rethrown here after every thread has joined.
template <typename Body>
void parallel_for(int64_t n, int64_t threads, const Body& body) {
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::clamp<int64_t>(threads, 1, std::max<int64_t>(n, 1));
  std::atomic<int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t i = next++; i < n && !failed; i = next++) {
      try {
        body(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // the system has no more threads: the ones started do the work
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace lockstep::data
