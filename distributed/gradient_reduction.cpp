// The reduction side of the distributed optimizer: the communication
// thread's loop, the allreduce of one bucket (with 16-bit compression and
// its overflow check), and writing results back into Parameter::grad.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "distributed/device_reducer.h"
#include "distributed/distributed_optimizer.h"
#include "nn/error.h"

namespace lockstep::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Why a compressed bucket's sum is not finite. local_finite: this rank's
// own rounded gradients were (local_max: their largest |g| before rounding);
// sum_max: the largest |g| of the reduced bucket (inf or NaN).
std::string overflow_message(size_t bucket, Compression compression, bool local_finite,
                             float local_max, float sum_max, int size) {
  const bool fp16 = compression == Compression::kFp16;
  const char* remedy = "): use bf16, gradient_predivide_factor, or a smaller lr";
  if (!local_finite && fp16 && std::isfinite(local_max)) {
    return detail::concat("fp16 gradient overflow in bucket ", bucket, " (max |g| = ", local_max,
                          " > 65504", remedy);
  }
  if (local_finite && fp16 && std::isinf(sum_max)) {
    return detail::concat("fp16 gradient overflow in bucket ", bucket, " (in the sum over ", size,
                          " ranks: a rank's gradient or the sum exceeds 65504; max |g| on this "
                          "rank = ",
                          local_max, remedy);
  }
  const std::string format = to_string(compression);
  if (!local_finite) {
    return detail::concat("non-finite gradient in bucket ", bucket, " (", format,
                          " compression, max |g| = ", local_max,
                          " on this rank): the loss diverged; lower the learning rate");
  }
  return detail::concat("non-finite gradient in bucket ", bucket, " (", format,
                        " compression, in the sum over ", size, " ranks: ", sum_max,
                        "; max |g| on this rank = ", local_max,
                        "): the loss diverged on another rank; lower the learning rate");
}

// reduce(piece) over consecutive pieces of data of at most `chunk` values
// (one call for an empty span).
template <typename T, typename Reduce>
void in_chunks(std::span<T> data, size_t chunk, const Reduce& reduce) {
  size_t offset = 0;
  do {
    const size_t n = std::min(chunk, data.size() - offset);
    reduce(data.subspan(offset, n));
    offset += n;
  } while (offset < data.size());
}

}  // namespace

size_t DistributedOptimizer::chunk_values(size_t bytes_per_value) const {
  const double bytes = config_.allreduce_chunk_mb * 1024.0 * 1024.0;
  if (bytes <= 0.0) return std::numeric_limits<size_t>::max();
  return std::max<size_t>(1, static_cast<size_t>(bytes / static_cast<double>(bytes_per_value)));
}

void DistributedOptimizer::comm_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stop_ || (next_bucket_ < state_.size() && state_[next_bucket_].ready);
    });
    if (stop_) return;
    const size_t b = next_bucket_;
    lock.unlock();
    std::exception_ptr error;
    try {
      reduce_bucket(b, Timeline::kCommThread);
      if (on_host_ && !reducer_) unpack_on_host(b, Timeline::kCommThread);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    if (error) {
      error_ = error;
      next_bucket_ = state_.size();  // the rest of this step is abandoned
    } else {
      ++next_bucket_;
    }
    if (next_bucket_ == state_.size()) done_cv_.notify_all();
  }
}

// Called on the communication thread (overlap) or in synchronize(): no
// backend calls (host memory, or the DeviceReducer's queue).
void DistributedOptimizer::reduce_bucket(size_t b, int tid) {
  if (reducer_) return enqueue_on_device(b, tid);
  BucketState& s = state_[b];
  std::span<float> data(s.host_data(), static_cast<size_t>(buckets_[b].numel));
  if (prescale_ != 1.0f) {
    for (float& v : data) v *= prescale_;
  }
  const Compression compression = config_.compression;
  bool local_finite = true;
  if (compression != Compression::kNone) local_finite = to_16bit(data, s.wire, compression);
  set_label(b);
  const auto start = Clock::now();
  {
    TimelineSpan span(config_.timeline, s.allreduce_name, "allreduce", tid);
    if (compression == Compression::kNone) {
      in_chunks(data, chunk_values(sizeof(float)),
                [&](std::span<float> piece) { grad_comm_.allreduce(piece, ReduceOp::kSum); });
    } else {
      in_chunks(std::span<uint16_t>(s.wire), chunk_values(sizeof(uint16_t)),
                [&](std::span<uint16_t> piece) {
                  grad_comm_.allreduce_16bit(piece, compression, ReduceOp::kSum);
                });
    }
  }
  count_allreduce(b, seconds_since(start));
  if (compression == Compression::kNone) return;
  // A non-finite contribution makes the sum non-finite on every rank (inf
  // and NaN propagate through add_16bit), so every rank throws here together
  // (or, with keep_non_finite, every rank's caller sees it).
  const bool finite = finite_16bit(s.wire, compression);
  if (finite || config_.keep_non_finite) {
    from_16bit(s.wire, data, compression);
    return;
  }
  const float local_max = max_abs(data);  // still this rank's gradients
  from_16bit(s.wire, data, compression);
  throw DistributedError(
      overflow_message(b, compression, local_finite, local_max, max_abs(data), grad_comm_.size()));
}

// Device buffers with a DeviceReducer: queued behind the bucket's pack
// (marked in hand_off), completed in synchronize().
void DistributedOptimizer::enqueue_on_device(size_t b, int tid) {
  BucketState& s = state_[b];
  set_label(b);
  const auto start = Clock::now();
  {
    TimelineSpan span(config_.timeline, s.allreduce_name, "allreduce", tid);
    reducer_->enqueue_allreduce(b, s.buffer.span(), ReduceOp::kSum);
  }
  count_allreduce(b, seconds_since(start));
}

void DistributedOptimizer::set_label(size_t b) {
  int64_t step = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    step = label_step_;
  }
  // Every bucket of every step: no ostringstream here (~1 us against a 17 us
  // allreduce of a small model).
  grad_comm_.set_stall_label("step " + std::to_string(step) + " bucket " + std::to_string(b));
}

void DistributedOptimizer::count_allreduce(size_t b, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allreduce_seconds += seconds;
  stats_.bytes_reduced += wire_bytes(b);
  ++stats_.allreduces;
}

int64_t DistributedOptimizer::wire_bytes(size_t b) const {
  const int64_t per_value = config_.compression == Compression::kNone ? 4 : 2;
  return buckets_[b].numel * per_value;
}

void DistributedOptimizer::unpack_on_host(size_t b, int tid) {
  const GradientBucket& bucket = buckets_[b];
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, state_[b].unpack_name, "unpack", tid);
  const float* data = state_[b].host_data();
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    if (in_bucket(bucket.params[j])) continue;  // reduced where it is
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    std::memcpy(grad.data(), data + bucket.offsets[j],
                static_cast<size_t>(grad.numel()) * sizeof(float));
  }
  const double elapsed = seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.unpack_seconds += elapsed;
}

void DistributedOptimizer::unpack_on_device(size_t b) {
  BucketState& s = state_[b];
  const GradientBucket& bucket = buckets_[b];
  const auto start = Clock::now();
  TimelineSpan span(config_.timeline, s.unpack_name, "unpack");
  if (!reducer_) s.buffer.copy_from(s.host);
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    backend_.copy(grad.numel(), s.buffer.data() + bucket.offsets[j], grad.data());
  }
  const double elapsed = seconds_since(start);
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.unpack_seconds += elapsed;
}

}  // namespace lockstep::distributed
