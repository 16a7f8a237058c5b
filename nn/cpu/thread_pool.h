// ThreadPool: a fixed set of worker threads behind a blocking parallel_for.
//
// parallel_for(n, grain, fn) splits [0, n) into chunks(n, grain) contiguous
// ranges of at least `grain` items (up to kChunksPerThread per thread) and
// calls fn(begin, end, chunk) for each. A single chunk (small n) runs inline
// without touching the workers. The split depends only on (n, grain,
// threads()), so results are reproducible whichever thread runs a chunk.
//
// Thread t (the caller is thread 0) first runs its own share of the chunks,
// the t-th of threads() equal runs, so that consecutive ops over the same
// samples find them in the same core's cache; then it takes chunks nobody
// has started, from the far end. A worker that is slow to wake or loses its
// core (an oversubscribed machine) thus holds up at most one chunk. Workers
// spin for a few tens of microseconds after a job (the next op of a training
// step usually follows at once), then sleep on a condition variable. A call
// made from inside a chunk, or while another thread is using the pool, runs
// all its chunks inline on the calling thread: the pool never deadlocks and
// concurrent callers stay correct.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace lockstep::nn::cpu {

class ThreadPool {
 public:
  // threads: total threads including the caller (0: hardware threads).
  // Throws lockstep::Error when the system cannot start that many threads
  // (the ones started are stopped first).
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return threads_; }

  static constexpr int kChunksPerThread = 4;

  // Number of chunks parallel_for(n, grain, ...) uses: 1..max_chunks().
  int chunks(int64_t n, int64_t grain) const {
    const int64_t by_grain = n / (grain > 0 ? grain : 1);
    if (by_grain <= 1) return 1;
    return by_grain < max_chunks() ? static_cast<int>(by_grain) : max_chunks();
  }
  int max_chunks() const { return threads_ == 1 ? 1 : threads_ * kChunksPerThread; }

  // Start of chunk `chunk` of `count` over [0, n).
  static int64_t chunk_begin(int64_t n, int count, int chunk) {
    return n / count * chunk + std::min<int64_t>(chunk, n % count);
  }

  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    const int count = chunks(n, grain);
    if (count <= 1) {
      if (n > 0) fn(int64_t{0}, n, 0);
      return;
    }
    using Fn = std::remove_reference_t<F>;
    run(
        n, count, [](void* ctx, int64_t b, int64_t e, int c) { (*static_cast<Fn*>(ctx))(b, e, c); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Trampoline = void (*)(void* ctx, int64_t begin, int64_t end, int chunk);

  void run(int64_t n, int count, Trampoline fn, void* ctx);
  // Runs the chunks of job `gen` this thread can claim, its own first.
  void work_on(uint64_t gen, int self);
  void run_chunk(Trampoline fn, void* ctx, int64_t n, int count, int chunk) noexcept;
  bool claim(int chunk, uint64_t gen);
  void worker_loop(int index);
  // Wakes every worker with stop_ set and joins it.
  void stop_workers();
  uint64_t wait_for_job(uint64_t seen);

  int threads_ = 1;
  std::vector<std::thread> workers_;
  std::mutex dispatch_mutex_;  // held by the thread that owns the workers
  // The current job. Written only while no chunk of the previous job can
  // still be claimed; atomics because a late worker may read them while a
  // new job is being set up (it then fails to claim anything).
  std::atomic<Trampoline> fn_{nullptr};
  std::atomic<void*> ctx_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int> count_{0};
  std::atomic<uint64_t> generation_{0};
  // claimed_[t]: 2 gen while chunk t of job gen is open, 2 gen + 1 once taken.
  std::unique_ptr<std::atomic<uint64_t>[]> claimed_;
  std::atomic<int> done_{0};  // chunks of the current job finished
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stop_{false};
  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::mutex error_mutex_;
  std::exception_ptr error_;
};

}  // namespace lockstep::nn::cpu
