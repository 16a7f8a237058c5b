#include "nn/cpu/thread_pool.h"

#include <chrono>
#include <system_error>

#include "common/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lockstep::nn::cpu {
namespace {

// True on pool workers and on a caller while it runs chunks: nested
// parallel_for calls then run inline.
thread_local bool tls_inside_pool = false;

// How long an idle worker polls for the next job before it sleeps, and how
// many of its polls are plain spins before it starts yielding its core.
constexpr auto kSpin = std::chrono::microseconds(100);
constexpr int kPolls = 200;
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
  claimed_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(max_chunks()));
  for (int c = 0; c < max_chunks(); ++c) claimed_[c].store(0);
  workers_.reserve(threads_ - 1);
  try {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
  } catch (const std::system_error& e) {
    // The destructor does not run for a half-built pool: stop the workers
    // that did start, so that nothing waits on members about to vanish.
    const size_t started = workers_.size();
    stop_workers();
    throw ::lockstep::Error(
        ::lockstep::detail::concat("cannot start ", threads_, " compute threads (", started + 1,
                                   " running): ", e.what(), "; use fewer threads"));
  }
}

ThreadPool::~ThreadPool() {
  stop_workers();
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

// Chunk `chunk` of job `gen` is ours if it is still open for that job:
// claimed_[chunk] holds 2 gen while open and 2 gen + 1 once taken. A worker
// late for an older job cannot claim anything, and a successful claim proves
// job `gen` is unfinished, so the job fields read after seeing `gen` were its
// own.
bool ThreadPool::claim(int chunk, uint64_t gen) {
  uint64_t open = gen << 1;
  if (claimed_[chunk].load(std::memory_order_relaxed) != open) return false;  // no locked op
  return claimed_[chunk].compare_exchange_strong(open, open | 1, std::memory_order_acq_rel);
}

void ThreadPool::run_chunk(Trampoline fn, void* ctx, int64_t n, int count, int chunk) noexcept {
  try {
    fn(ctx, chunk_begin(n, count, chunk), chunk_begin(n, count, chunk + 1), chunk);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
  done_.fetch_add(1, std::memory_order_acq_rel);
}

void ThreadPool::work_on(uint64_t gen, int self) {
  const Trampoline fn = fn_.load(std::memory_order_relaxed);
  void* const ctx = ctx_.load(std::memory_order_relaxed);
  const int64_t n = n_.load(std::memory_order_relaxed);
  const int count = count_.load(std::memory_order_relaxed);
  // Own share first (the self-th of threads_ equal runs of chunks), then
  // unstarted chunks of the others, from the far end.
  const int first = static_cast<int>(chunk_begin(count, threads_, self));
  const int last = static_cast<int>(chunk_begin(count, threads_, self + 1));
  for (int c = first; c < last; ++c) {
    if (claim(c, gen)) run_chunk(fn, ctx, n, count, c);
  }
  for (int c = count - 1; c >= 0; --c) {
    if (claim(c, gen)) run_chunk(fn, ctx, n, count, c);
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
  // Every chunk of the previous job is claimed and done: no worker can use
  // these fields until the new generation is published.
  fn_.store(fn, std::memory_order_relaxed);
  ctx_.store(ctx, std::memory_order_relaxed);
  n_.store(n, std::memory_order_relaxed);
  count_.store(count, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  error_ = nullptr;
  const uint64_t gen = generation_.load(std::memory_order_relaxed) + 1;  // only we write it
  for (int c = 0; c < count; ++c) claimed_[c].store(gen << 1, std::memory_order_relaxed);
  generation_.store(gen);  // seq_cst: publishes the job, pairs with sleepers_
  if (sleepers_.load() > 0) {
    std::lock_guard<std::mutex> lock(sleep_mutex_);
    wake_.notify_all();
  }
  tls_inside_pool = true;
  work_on(gen, 0);
  tls_inside_pool = false;
  // Only chunks that workers are running remain; if one of them has lost its
  // core, yield ours to it instead of spinning.
  for (int i = 0; done_.load(std::memory_order_acquire) != count; ++i) {
    if (i < kWaitSpins) {
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  if (error_) std::rethrow_exception(error_);
}

uint64_t ThreadPool::wait_for_job(uint64_t seen) {
  // Poll briefly, then poll yielding the core (free when nothing else wants
  // it; when our own dispatching thread shares this core on a busy machine,
  // it runs instead of waiting behind us), then sleep.
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 1;; ++i) {
    const uint64_t g = generation_.load(std::memory_order_acquire);
    if (g != seen) return g;
    if (i < kPolls) {
      cpu_relax();
    } else {
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::yield();
    }
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
    work_on(seen, index);
  }
}

}  // namespace lockstep::nn::cpu
