// The CPU backend's thread pool: every index runs exactly once, small work
// stays on the caller, workers take part, errors reach the caller, nested
// and concurrent calls complete.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "nn/cpu/thread_pool.h"

namespace lockstep::nn::cpu {
namespace {

TEST(CpuThreadPool, EveryIndexRunsOnceInContiguousChunks) {
  ThreadPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  for (int64_t n : {1, 2, 3, 7, 1000, 100003}) {
    std::vector<std::atomic<int>> hits(n);
    std::vector<std::atomic<int>> chunk_seen(pool.max_chunks());
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e, int chunk) {
      EXPECT_LT(b, e);
      EXPECT_EQ(b, ThreadPool::chunk_begin(n, pool.chunks(n, 1), chunk));
      chunk_seen[chunk]++;
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " i " << i;
    for (int c = 0; c < pool.chunks(n, 1); ++c) EXPECT_EQ(chunk_seen[c].load(), 1);
  }
}

TEST(CpuThreadPool, SmallWorkRunsInlineOnTheCaller) {
  ThreadPool pool(2);
  EXPECT_EQ(pool.chunks(100, 1000), 1);
  EXPECT_EQ(pool.chunks(2000, 1000), 2);
  EXPECT_EQ(pool.chunks(1000000, 1000), 2 * ThreadPool::kChunksPerThread);
  EXPECT_EQ(ThreadPool(1).chunks(1000000, 1000), 1);
  const auto caller = std::this_thread::get_id();
  int calls = 0;
  pool.parallel_for(100, 1000, [&](int64_t b, int64_t e, int chunk) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 100);
    EXPECT_EQ(chunk, 0);
    ++calls;
  });
  EXPECT_EQ(calls, 1);
  pool.parallel_for(0, 1, [&](int64_t, int64_t, int) { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST(CpuThreadPool, UsesTheWorkersForLargeWork) {
  // Chunks run on the caller or on a worker (an idle thread takes chunks
  // nobody started), each exactly once. A chunk on the caller waits until
  // another chunk has started on a worker: only a worker can take it, so
  // this ends only when the workers do take work, however loaded the machine.
  ThreadPool pool(2);
  std::atomic<int> off_caller{0}, runs{0};
  const auto caller = std::this_thread::get_id();
  for (int job = 0; job < 20; ++job) {
    std::atomic<bool> worker_started{false};
    pool.parallel_for(2, 1, [&](int64_t, int64_t, int) {
      runs++;
      if (std::this_thread::get_id() != caller) {
        off_caller++;
        worker_started = true;
        return;
      }
      while (!worker_started) std::this_thread::yield();
    });
  }
  EXPECT_EQ(runs.load(), 40);
  EXPECT_GE(off_caller.load(), 20);  // every job ran a chunk on a worker (or both)
}

TEST(CpuThreadPool, ExceptionInAWorkerReachesTheCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.parallel_for(10, 1,
                                 [&](int64_t b, int64_t, int) {
                                   if (b > 0) throw std::runtime_error("chunk failed");
                                 }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(10, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 45);
}

TEST(CpuThreadPool, NestedAndConcurrentCallsComplete) {
  ThreadPool pool(2);
  std::atomic<int64_t> total{0};
  pool.parallel_for(4, 1, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) {
      pool.parallel_for(100, 1, [&](int64_t ib, int64_t ie, int) { total += ie - ib; });
    }
  });
  EXPECT_EQ(total.load(), 400);

  std::atomic<int64_t> a{0}, c{0};
  auto work = [&](std::atomic<int64_t>& counter) {
    for (int round = 0; round < 200; ++round) {
      pool.parallel_for(1000, 1, [&](int64_t b, int64_t e, int) { counter += e - b; });
    }
  };
  std::thread other([&] { work(c); });
  work(a);
  other.join();
  EXPECT_EQ(a.load(), 200000);
  EXPECT_EQ(c.load(), 200000);
}

TEST(CpuThreadPool, ManyQuickJobsInARow) {
  ThreadPool pool(2);
  int64_t checksum = 0;
  std::vector<int64_t> part(pool.max_chunks());
  for (int round = 0; round < 2000; ++round) {
    pool.parallel_for(64, 1, [&](int64_t b, int64_t e, int chunk) { part[chunk] = e - b; });
    for (int64_t p : part) checksum += p;
  }
  EXPECT_EQ(checksum, 2000 * 64);
}

}  // namespace
}  // namespace lockstep::nn::cpu
