// The communication thread of the reduction strategies (comm_thread.h).
#include "distributed/comm_thread.h"

#include <utility>

namespace lockstep::distributed {

CommThread::CommThread(size_t buckets, std::function<void()> bind, std::function<void(size_t)> work)
    : count_(buckets), work_(std::move(work)), ready_(buckets, false) {
  thread_ = std::thread([this, bind = std::move(bind)] {
    if (bind) bind();
    loop();
  });
}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  work_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommThread::hand_off(size_t b, bool keep_last) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (keep_last && b + 1 == count_ && next_ == b) {
      kept_ = true;
      return;
    }
    ready_[b] = true;
  }
  work_cv_.notify_one();
}

bool CommThread::kept_last() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_;
}

std::exception_ptr CommThread::wait_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (kept_) {
    // The thread waits for a bucket that is never marked ready: the caller
    // has reduced the last one.
    kept_ = false;
    next_ = count_;
  }
  done_cv_.wait(lock, [&] { return next_ == count_; });
  std::exception_ptr error = error_;
  error_ = nullptr;
  next_ = 0;
  ready_.assign(count_, false);
  return error;
}

void CommThread::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || (next_ < count_ && ready_[next_]); });
    if (stop_) return;
    const size_t b = next_;
    lock.unlock();
    std::exception_ptr error;
    try {
      work_(b);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
      next_ = count_;  // the rest of this step is abandoned
    } else {
      ++next_;
    }
    if (next_ == count_) done_cv_.notify_all();
  }
}

}  // namespace lockstep::distributed
