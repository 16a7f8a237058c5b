// Tensor: a float32 array with a shape (NCHW for images) that owns its memory
// on one device. No autograd: layers know their own backward.
//
// Copies are explicit (clone(), copy_from()); moving is cheap. resize() keeps
// the allocation when the new shape fits, so a last, smaller batch does not
// reallocate.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace lockstep::nn {

enum class Device { kCpu, kCuda };

std::string to_string(Device device);

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);  // "(64, 1, 28, 28)"

// Frees a tensor's memory on its device (nothing for a view).
struct TensorDeleter {
  Device device = Device::kCpu;
  bool owned = true;
  void operator()(float* p) const noexcept;
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor of the given shape.
  explicit Tensor(Shape shape, Device device = Device::kCpu);

  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  // A tensor over shape_numel(shape) floats at data on device that it does
  // not own: the memory must outlive the view, which never frees it. Used
  // to keep gradients inside the distributed optimizer's buckets. clone()
  // of a view owns its copy; resize() beyond the view's size reallocates
  // (the result owns its memory).
  static Tensor view(float* data, Shape shape, Device device);
  bool is_view() const { return !data_.get_deleter().owned; }
  // A tensor of this shape that holds no memory (data() null): an output
  // its layer left unwritten (BatchNorm2d::map_into). resize() within its
  // size keeps it so; beyond, it allocates.
  static Tensor unallocated(Shape shape, Device device);
  bool allocated() const { return data_ != nullptr || numel_ == 0; }

  Tensor clone() const;
  // Copies values from other (same numel; either device).
  void copy_from(const Tensor& other);

  const Shape& shape() const { return shape_; }
  int64_t dim(size_t i) const { return shape_.at(i); }
  size_t ndim() const { return shape_.size(); }
  int64_t numel() const { return numel_; }
  Device device() const { return device_; }
  bool empty() const { return numel_ == 0; }

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  std::span<float> span() { return {data_.get(), static_cast<size_t>(numel_)}; }
  std::span<const float> span() const { return {data_.get(), static_cast<size_t>(numel_)}; }

  // Same storage, new shape with the same number of elements.
  void reshape(const Shape& shape);
  // New shape; reallocates (zero-filled) only when capacity is too small.
  // Contents are unspecified afterwards.
  void resize(const Shape& shape);
  // Sets every element to zero.
  void zero();

 private:
  Shape shape_;
  int64_t numel_ = 0;
  int64_t capacity_ = 0;
  Device device_ = Device::kCpu;
  std::unique_ptr<float[], TensorDeleter> data_;
};

}  // namespace lockstep::nn
