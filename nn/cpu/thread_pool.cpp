#include "nn/cpu/thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lockstep::nn::cpu {
namespace {

// True on pool workers and on a caller while it runs its own chunk: nested
// parallel_for calls then run inline.
thread_local bool tls_inside_pool = false;

// How long an idle worker polls for the next job before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);
// Polls of the dispatching thread before it starts yielding its core.
constexpr int kWaitSpins = 2000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

}  // namespace

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  threads_ = threads > 0 ? threads : 1;
  workers_.reserve(threads_ - 1);
  for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_chunk(const Job& job, int chunk) noexcept {
  const int64_t begin = chunk_begin(job.n, job.count, chunk);
  const int64_t end = chunk_begin(job.n, job.count, chunk + 1);
  try {
    job.fn(job.ctx, begin, end, chunk);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run(int64_t n, int count, Trampoline fn, void* ctx) {
  std::unique_lock<std::mutex> owner(dispatch_mutex_, std::try_to_lock);
  if (tls_inside_pool || !owner.owns_lock()) {
    for (int c = 0; c < count; ++c) {
      fn(ctx, chunk_begin(n, count, c), chunk_begin(n, count, c + 1), c);
    }
    return;
  }
  job_ = Job{fn, ctx, n, count};
  error_ = nullptr;
  pending_.store(static_cast<int>(workers_.size()));
  generation_.fetch_add(1);  // seq_cst: pairs with sleepers_ in wait_for_job
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  tls_inside_pool = true;
  run_chunk(job_, 0);
  tls_inside_pool = false;
  // The other chunks finish about when ours does; if a worker has lost its
  // core (an oversubscribed machine), yield ours to it instead of spinning.
  for (int i = 0; pending_.load(std::memory_order_acquire) != 0; ++i) {
    if (i < kWaitSpins) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (error_) std::rethrow_exception(error_);
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
    cpu_relax();
  }
  std::unique_lock<std::mutex> lock(sleep_mutex_);
  sleepers_.fetch_add(1);  // seq_cst: the dispatcher either sees us or we see it
  wake_.wait(lock, [&] { return generation_.load() != seen; });
  sleepers_.fetch_sub(1);
  return generation_.load();
}

void ThreadPool::worker_loop(int index) {
  tls_inside_pool = true;
  uint64_t seen = 0;
  for (;;) {
    seen = wait_for_job(seen);
    if (stop_.load()) return;
    // Every worker acknowledges every job, so job_ is never rewritten while a
    // worker may still read it.
    if (index < job_.count) run_chunk(job_, index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace lockstep::nn::cpu
