// The bucket layout of the distributed optimizer (distributed_optimizer.h:
// "Buckets").
#include <algorithm>
#include <cmath>

#include "distributed/distributed_optimizer.h"
#include "nn/error.h"

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

}  // namespace lockstep::distributed
