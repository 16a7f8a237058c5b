// CommThread (distributed/comm_thread.h): buckets reduced in index order
// whatever the hand-off order, the last bucket kept for the caller when the
// thread is idle, errors returned once and the next step clean.
#include "distributed/comm_thread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

namespace lockstep::distributed {
namespace {

// Records the buckets its work function is called with, and the thread.
struct Recorder {
  std::mutex mutex;
  std::vector<size_t> order;
  std::vector<std::thread::id> threads;
  size_t fail_at = static_cast<size_t>(-1);
  void work(size_t b) {
    std::lock_guard lock(mutex);
    order.push_back(b);
    threads.push_back(std::this_thread::get_id());
    if (b == fail_at) throw std::runtime_error("bucket " + std::to_string(b) + " failed");
  }
};

TEST(CommThreadQueue, ReducesInIndexOrderWhateverTheHandOffOrder) {
  Recorder rec;
  std::atomic<int> binds{0};
  std::thread::id bound_on;
  {
    CommThread thread(
        4,
        [&] {
          bound_on = std::this_thread::get_id();
          ++binds;
        },
        [&](size_t b) { rec.work(b); });
    for (int step = 0; step < 3; ++step) {
      for (size_t b : {2u, 0u, 3u, 1u}) thread.hand_off(b, /*keep_last=*/false);
      EXPECT_FALSE(thread.kept_last());
      EXPECT_EQ(thread.wait_all(), nullptr);
    }
  }
  EXPECT_EQ(binds.load(), 1);
  EXPECT_EQ(rec.order, (std::vector<size_t>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
  for (std::thread::id id : rec.threads) {
    EXPECT_EQ(id, bound_on);  // every bucket on the bound thread
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(CommThreadQueue, KeepsTheLastBucketWhenEveryOtherIsDone) {
  Recorder rec;
  CommThread thread(2, {}, [&](size_t b) { rec.work(b); });
  // A single bucket: nothing else to wait for, so it is always kept.
  CommThread single(1, {}, [&](size_t b) { rec.work(b); });
  single.hand_off(0, /*keep_last=*/true);
  EXPECT_TRUE(single.kept_last());
  EXPECT_EQ(single.wait_all(), nullptr);
  EXPECT_TRUE(rec.order.empty());  // the caller's to reduce
  EXPECT_FALSE(single.kept_last());

  // Without keep_last the last bucket goes to the thread.
  thread.hand_off(0, false);
  thread.hand_off(1, false);
  EXPECT_EQ(thread.wait_all(), nullptr);
  EXPECT_EQ(rec.order, (std::vector<size_t>{0, 1}));
}

TEST(CommThreadQueue, LastBucketGoesToTheThreadWhileEarlierOnesArePending) {
  Recorder rec;
  CommThread thread(3, {}, [&](size_t b) { rec.work(b); });
  // Bucket 2 handed off before 0 and 1: the thread is not idle at bucket 2.
  thread.hand_off(2, /*keep_last=*/true);
  EXPECT_FALSE(thread.kept_last());
  thread.hand_off(0, true);
  thread.hand_off(1, true);
  EXPECT_EQ(thread.wait_all(), nullptr);
  EXPECT_EQ(rec.order, (std::vector<size_t>{0, 1, 2}));
}

TEST(CommThreadQueue, AnErrorAbandonsTheStepAndTheNextStepIsClean) {
  Recorder rec;
  rec.fail_at = 1;
  CommThread thread(3, {}, [&](size_t b) { rec.work(b); });
  for (size_t b = 0; b < 3; ++b) thread.hand_off(b, false);
  std::exception_ptr error = thread.wait_all();
  ASSERT_NE(error, nullptr);
  try {
    std::rethrow_exception(error);
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "bucket 1 failed");
  }
  EXPECT_EQ(rec.order, (std::vector<size_t>{0, 1}));  // bucket 2 never reduced
  rec.fail_at = static_cast<size_t>(-1);
  for (size_t b = 0; b < 3; ++b) thread.hand_off(b, false);
  EXPECT_EQ(thread.wait_all(), nullptr);
  EXPECT_EQ(rec.order, (std::vector<size_t>{0, 1, 0, 1, 2}));
}

}  // namespace
}  // namespace lockstep::distributed
