// BucketLayout: which parameter's gradient goes to which fusion bucket, at
// which offset, and the bucket buffers themselves. It decides nothing about
// communication: the reduction strategies (reduction_strategy.h) read and
// write the buffers it owns.
//
// Order: buckets are fixed at construction in REVERSE parameter order (the
// order backward announces gradients). Walking the parameters from the last,
// a bucket is closed before a parameter that would take it past its limit,
// so a bucket exceeds its limit only when one parameter alone does. The
// first bucket's limit is first_bucket_mb, the others' bucket_cap_mb;
// bucket_cap_mb = 0 gives one bucket per parameter.
//
// Views: with `views`, every Parameter::grad (CPU tensors only) is moved
// into its slot and becomes an nn::Tensor::view of it, so backward writes
// gradients where they are reduced (PyTorch DDP's gradient_as_bucket_view);
// the destructor gives each gradient its own memory back. A gradient
// replaced after construction is no longer in_bucket() and is copied.
//
// Threads: pack() and unpack_on_device() call the backend and run on the
// thread that owns it; unpack_on_host() touches host memory only and may run
// on the communication thread (buckets are disjoint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nn/backend.h"
#include "nn/layer.h"

namespace lockstep::distributed {

// One fusion buffer: parameters (indices into the parameter list) in
// announce order, each at an element offset.
struct GradientBucket {
  std::vector<size_t> params;
  std::vector<int64_t> offsets;
  int64_t numel = 0;
  int64_t bytes() const { return numel * static_cast<int64_t>(sizeof(float)); }
};

// The bucket assignment for parameters of the given element counts (forward
// order), as described above. Throws InputError on a negative or non-finite
// limit.
std::vector<GradientBucket> assign_buckets(const std::vector<int64_t>& numels,
                                           double first_bucket_mb, double bucket_cap_mb);

// Timeline span names of one bucket, built once.
struct BucketNames {
  std::string pack, allreduce, unpack;
};

class BucketLayout {
 public:
  // params: the model's parameters (forward order), on `device`, outliving
  // this object. buffers: allocate one buffer per bucket on `device`
  // (false: assignment only, slot() is null). views: needs buffers and CPU.
  BucketLayout(const std::vector<nn::Parameter*>& params, nn::Device device, double first_bucket_mb,
               double bucket_cap_mb, bool buffers, bool views);
  ~BucketLayout();
  BucketLayout(const BucketLayout&) = delete;
  BucketLayout& operator=(const BucketLayout&) = delete;

  size_t size() const { return buckets_.size(); }
  const std::vector<GradientBucket>& buckets() const { return buckets_; }
  const GradientBucket& bucket(size_t b) const { return buckets_[b]; }
  const BucketNames& names(size_t b) const { return names_[b]; }
  nn::Tensor& buffer(size_t b) { return buffers_[b]; }
  size_t bucket_of(size_t param) const { return param_bucket_[param]; }

  // Where parameter i's gradient goes in its bucket's buffer (null without
  // buffers), and whether Parameter::grad is a view of exactly that.
  float* slot(size_t param);
  bool in_bucket(size_t param);

  // Puts parameter i's gradient into its slot: copies it on the first pass,
  // adds it on later ones; nothing when it lives there already.
  void pack(size_t param, bool first_pass, nn::Backend& backend);
  // Copies bucket b's values from `data` (host memory laid out as the
  // bucket) into the host gradients that are not views of the bucket.
  void unpack_on_host(size_t b, const float* data);
  // Copies bucket b's buffer into every gradient of it, through the backend.
  void unpack_on_device(size_t b, nn::Backend& backend);

 private:
  std::vector<nn::Parameter*> params_;
  std::vector<GradientBucket> buckets_;
  std::vector<BucketNames> names_;
  std::vector<nn::Tensor> buffers_;
  std::vector<size_t> param_bucket_;   // bucket of each parameter
  std::vector<int64_t> param_offset_;  // element offset in that bucket
};

}  // namespace lockstep::distributed
