// The bucket layout of the distributed optimizer (bucket_layout.h).
#include "distributed/bucket_layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace lockstep::distributed {
namespace {

int64_t mib_to_bytes(double mb, const char* key) {
  if (!std::isfinite(mb) || mb < 0)
    fail_input("distributed optimizer: ", key, " = ", mb, " must be >= 0");
  return static_cast<int64_t>(mb * 1024.0 * 1024.0);
}

}  // namespace

std::vector<GradientBucket> assign_buckets(const std::vector<int64_t>& numels,
                                           double first_bucket_mb, double bucket_cap_mb) {
  const int64_t cap = mib_to_bytes(bucket_cap_mb, "bucket_cap_mb");
  const int64_t first = std::min(mib_to_bytes(first_bucket_mb, "first_bucket_mb"), cap);
  std::vector<GradientBucket> buckets;
  GradientBucket current;
  for (size_t i = numels.size(); i-- > 0;) {
    const int64_t limit = buckets.empty() ? first : cap;
    const int64_t bytes = numels[i] * static_cast<int64_t>(sizeof(float));
    if (!current.params.empty() && (cap == 0 || current.bytes() + bytes > limit)) {
      buckets.push_back(std::move(current));
      current = {};
    }
    current.params.push_back(i);
    current.offsets.push_back(current.numel);
    current.numel += numels[i];
  }
  if (!current.params.empty()) buckets.push_back(std::move(current));
  return buckets;
}

BucketLayout::BucketLayout(const std::vector<nn::Parameter*>& params, nn::Device device,
                           double first_bucket_mb, double bucket_cap_mb, bool buffers, bool views)
    : params_(params) {
  std::vector<int64_t> numels;
  for (const nn::Parameter* p : params_) numels.push_back(p->value.numel());
  buckets_ = assign_buckets(numels, first_bucket_mb, bucket_cap_mb);
  buffers_.resize(buckets_.size());
  param_bucket_.resize(params_.size());
  param_offset_.resize(params_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const std::string index = std::to_string(b);
    names_.push_back(
        {"pack bucket " + index, "allreduce bucket " + index, "unpack bucket " + index});
    if (buffers) buffers_[b] = nn::Tensor({buckets_[b].numel}, device);
    for (size_t j = 0; j < buckets_[b].params.size(); ++j) {
      const size_t i = buckets_[b].params[j];
      param_bucket_[i] = b;
      param_offset_[i] = buckets_[b].offsets[j];
      nn::Tensor& grad = params_[i]->grad;
      if (views && buffers && device == nn::Device::kCpu && grad.numel() > 0) {
        float* home = slot(i);
        std::memcpy(home, grad.data(), static_cast<size_t>(grad.numel()) * sizeof(float));
        grad = nn::Tensor::view(home, grad.shape(), nn::Device::kCpu);
      }
    }
  }
}

BucketLayout::~BucketLayout() {
  // Gradients kept in the buckets get memory of their own again: the model
  // outlives this object.
  for (size_t i = 0; i < params_.size(); ++i) {
    if (in_bucket(i)) params_[i]->grad = params_[i]->grad.clone();
  }
}

float* BucketLayout::slot(size_t i) {
  nn::Tensor& buffer = buffers_[param_bucket_[i]];
  return buffer.empty() ? nullptr : buffer.data() + param_offset_[i];
}

bool BucketLayout::in_bucket(size_t i) {
  return params_[i]->grad.is_view() && params_[i]->grad.data() == slot(i);
}

void BucketLayout::pack(size_t i, bool first_pass, nn::Backend& backend) {
  if (in_bucket(i)) return;  // backward wrote it there
  const nn::Tensor& grad = params_[i]->grad;
  if (first_pass) {
    backend.copy(grad.numel(), grad.data(), slot(i));
  } else {
    backend.axpy(grad.numel(), 1.0f, grad.data(), slot(i));
  }
}

void BucketLayout::unpack_on_host(size_t b, const float* data) {
  const GradientBucket& bucket = buckets_[b];
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    if (in_bucket(bucket.params[j])) continue;  // reduced where it is
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    std::memcpy(grad.data(), data + bucket.offsets[j],
                static_cast<size_t>(grad.numel()) * sizeof(float));
  }
}

void BucketLayout::unpack_on_device(size_t b, nn::Backend& backend) {
  const GradientBucket& bucket = buckets_[b];
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    nn::Tensor& grad = params_[bucket.params[j]]->grad;
    backend.copy(grad.numel(), buffers_[b].data() + bucket.offsets[j], grad.data());
  }
}

}  // namespace lockstep::distributed
