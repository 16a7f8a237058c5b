// The host strategy (host_reduction.h): the allreduce of one bucket, in
// chunks, with 16-bit compression and its overflow check, and writing the
// sums back into Parameter::grad.
#include "distributed/host_reduction.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>
#include <string>

#include "common/clock.h"
#include "common/error.h"

namespace lockstep::distributed {
namespace {

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

// FNV-1a over the bits of values (verify_unchanged).
uint64_t checksum(std::span<const float> values) {
  uint64_t h = 14695981039346656037ull;
  for (float v : values) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    h = (h ^ bits) * 1099511628211ull;
  }
  return h;
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

HostReduction::HostReduction(BucketLayout& layout, Communicator& comm, nn::Backend& backend,
                             HostReductionConfig config)
    : layout_(layout),
      comm_(comm),
      backend_(backend),
      config_(config),
      on_host_(backend.device() == nn::Device::kCpu),
      verify_(config.verify_unchanged && on_host_) {
  host_.resize(layout_.size());
  wire_.resize(layout_.size());
  ready_checksum_.resize(verify_ ? layout_.size() : 0);
  copy_.resize(verify_ ? layout_.size() : 0);
  for (size_t b = 0; b < layout_.size(); ++b) {
    const int64_t numel = layout_.bucket(b).numel;
    if (!on_host_) host_[b] = nn::Tensor({numel}, nn::Device::kCpu);
    if (config_.compression != Compression::kNone) wire_[b].resize(static_cast<size_t>(numel));
  }
  if (config_.overlap) {
    thread_ = std::make_unique<CommThread>(
        layout_.size(), [this] { backend_.bind_thread(); },
        [this](size_t b) {
          reduce(b, Timeline::kCommThread);
          if (on_host_) unpack_on_host(b, Timeline::kCommThread);
        });
  }
}

size_t HostReduction::chunk_values(double chunk_mb, size_t bytes_per_value) {
  const double bytes = chunk_mb * 1024.0 * 1024.0;
  if (bytes <= 0.0) return std::numeric_limits<size_t>::max();
  return std::max<size_t>(1, static_cast<size_t>(bytes / static_cast<double>(bytes_per_value)));
}

float* HostReduction::host_data(size_t b) {
  return host_[b].empty() ? layout_.buffer(b).data() : host_[b].data();
}

void HostReduction::bucket_ready(size_t b, int64_t step) {
  backend_.synchronize();  // the packed buffer is complete before another thread reads it
  if (!on_host_) host_[b].copy_from(layout_.buffer(b));
  if (verify_) {
    ready_checksum_[b] = checksum({host_data(b), static_cast<size_t>(layout_.bucket(b).numel)});
  }
  if (!thread_) return;  // finish() reduces it
  label_step_ = step;
  thread_->hand_off(b, /*keep_last=*/true);
}

void HostReduction::finish(int64_t step) {
  std::exception_ptr error;
  try {
    if (thread_) {
      if (thread_->kept_last()) {
        const size_t b = layout_.size() - 1;
        reduce(b, Timeline::kMainThread);
        if (on_host_) unpack_on_host(b, Timeline::kMainThread);
      }
    } else {
      label_step_ = step;
      for (size_t b = 0; b < layout_.size(); ++b) {
        reduce(b, Timeline::kMainThread);
        if (on_host_) unpack_on_host(b, Timeline::kMainThread);
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
  if (thread_) {
    std::exception_ptr thread_error = thread_->wait_all();
    if (!error) error = thread_error;
  }
  if (!error && !on_host_) {
    for (size_t b = 0; b < layout_.size(); ++b) unpack_on_device(b);
    backend_.synchronize();  // the host copies are free for the next step
  }
  if (error) std::rethrow_exception(error);
}

// On the communication thread or in finish(): no backend calls.
void HostReduction::reduce(size_t b, int tid) {
  const std::span<float> bucket(host_data(b), static_cast<size_t>(layout_.bucket(b).numel));
  if (!verify_) return reduce_values(b, bucket, tid);
  std::vector<float>& copy = copy_[b];
  copy.assign(bucket.begin(), bucket.end());
  try {
    reduce_values(b, copy, tid);
  } catch (...) {
    check_unchanged(b, bucket);
    std::copy(copy.begin(), copy.end(), bucket.begin());
    throw;
  }
  check_unchanged(b, bucket);
  std::copy(copy.begin(), copy.end(), bucket.begin());
}

void HostReduction::check_unchanged(size_t b, std::span<const float> bucket) const {
  if (checksum(bucket) == ready_checksum_[b]) return;
  throw DistributedError(detail::concat(
      "gradient bucket ", b, " (step ", label_step_.load(), ", ", layout_.bucket(b).params.size(),
      " parameters) changed after it was handed to the reduction and before the reduction ended: a "
      "gradient was written after on_grad_ready announced it (verify_unchanged)"));
}

// The prescale, compression and allreduce of one bucket's values, in place.
void HostReduction::reduce_values(size_t b, std::span<float> data, int tid) {
  if (config_.prescale != 1.0f) {
    for (float& v : data) v *= config_.prescale;
  }
  const Compression compression = config_.compression;
  bool local_finite = true;
  if (compression != Compression::kNone) local_finite = to_16bit(data, wire_[b], compression);
  // Every bucket of every step: no ostringstream here (~1 us against a 17 us
  // allreduce of a small model).
  comm_.set_stall_label("step " + std::to_string(label_step_.load()) + " bucket " +
                        std::to_string(b));
  const auto start = Clock::now();
  {
    TimelineSpan span(timeline_, layout_.names(b).allreduce, "allreduce", tid);
    allreduce(b, data);
  }
  const int64_t per_value = compression == Compression::kNone ? 4 : 2;
  count_allreduce(layout_.bucket(b).numel * per_value, seconds_since(start));
  if (compression == Compression::kNone) return;
  // A non-finite contribution makes the sum non-finite on every rank (inf
  // and NaN propagate through add_16bit), so every rank throws here together
  // (or, with keep_non_finite, every rank's caller sees it).
  if (finite_16bit(wire_[b], compression) || config_.keep_non_finite) {
    from_16bit(wire_[b], data, compression);
    return;
  }
  const float local_max = max_abs(data);  // still this rank's gradients
  from_16bit(wire_[b], data, compression);
  throw DistributedError(
      overflow_message(b, compression, local_finite, local_max, max_abs(data), comm_.size()));
}

void HostReduction::allreduce(size_t b, std::span<float> data) {
  const Compression compression = config_.compression;
  if (compression == Compression::kNone) {
    in_chunks(data, chunk_values(config_.allreduce_chunk_mb, sizeof(float)),
              [&](std::span<float> piece) { comm_.allreduce(piece, ReduceOp::kSum); });
    return;
  }
  in_chunks(std::span<uint16_t>(wire_[b]), chunk_values(config_.allreduce_chunk_mb, 2),
            [&](std::span<uint16_t> piece) {
              comm_.allreduce_16bit(piece, compression, ReduceOp::kSum);
            });
}

void HostReduction::unpack_on_host(size_t b, int tid) {
  const auto start = Clock::now();
  {
    TimelineSpan span(timeline_, layout_.names(b).unpack, "unpack", tid);
    layout_.unpack_on_host(b, host_data(b));
  }
  count_unpack(seconds_since(start));
}

void HostReduction::unpack_on_device(size_t b) {
  const auto start = Clock::now();
  {
    TimelineSpan span(timeline_, layout_.names(b).unpack, "unpack");
    layout_.buffer(b).copy_from(host_[b]);
    layout_.unpack_on_device(b, backend_);
  }
  count_unpack(seconds_since(start));
}

}  // namespace lockstep::distributed
