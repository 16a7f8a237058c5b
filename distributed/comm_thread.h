// CommThread: the one background thread that reduces a step's buckets in
// index order (0, 1, 2, ...), each as soon as it has been handed off,
// whatever order they are handed off in. Every rank therefore issues the
// same collectives in the same order.
//
//   CommThread thread(buckets, bind, [&](size_t b) { reduce(b); });
//   thread.hand_off(b, keep_last);        // announcing thread, per bucket
//   if (thread.kept_last()) reduce(last); // the caller's own thread
//   std::exception_ptr e = thread.wait_all();  // once per step
//
// Threads: hand_off, kept_last and wait_all are called by one thread (the
// one that runs backward and the step). `bind` runs first on the new thread
// (it binds the backend's device there). `work` runs on the new thread.
// Errors: an exception from `work` abandons the rest of the step (no later
// bucket is reduced); wait_all() returns it and the next step starts clean.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace lockstep::distributed {

class CommThread {
 public:
  CommThread(size_t buckets, std::function<void()> bind, std::function<void(size_t)> work);
  // Stops the thread; a bucket in progress is finished first.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Bucket b is ready to reduce. With keep_last, the last bucket is kept
  // for the caller instead when the thread has finished every other one
  // (nothing is left to overlap it with, and waking the thread there and
  // back costs more than a small allreduce): kept_last() then says so.
  void hand_off(size_t b, bool keep_last);
  // The last bucket of this step was kept: the caller reduces it before
  // wait_all().
  bool kept_last() const;
  // Waits until every bucket of the step is reduced (or the thread failed),
  // returns the thread's error (null if none) and resets for the next step.
  std::exception_ptr wait_all();

 private:
  void loop();

  const size_t count_;
  std::function<void(size_t)> work_;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, done_cv_;
  std::vector<bool> ready_;
  size_t next_ = 0;  // next bucket to reduce
  bool kept_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace lockstep::distributed
