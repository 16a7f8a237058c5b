#include "nn/tensor.h"

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <sstream>

#include "common/error.h"
#include "nn/device_memory.h"

namespace lockstep::nn {
namespace {

constexpr size_t kAlignment = 64;  // one cache line, one AVX-512 vector

float* allocate(Device device, int64_t count) {
  if (count == 0) return nullptr;
  const size_t bytes = static_cast<size_t>(count) * sizeof(float);
  if (device == Device::kCpu) {
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (p == nullptr)
      throw Error(detail::concat("out of host memory allocating ", bytes, " bytes"));
    std::memset(p, 0, rounded);
    return static_cast<float*>(p);
  }
  return device_memory().allocate(bytes);
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == Device::kCpu && src_device == Device::kCpu) {
    std::memcpy(dst, src, bytes);
    return;
  }
  device_memory().copy(dst, src, bytes);
}

void check_dimensions(const Shape& shape) {
  for (int64_t d : shape) LOCKSTEP_CHECK(d >= 0, "negative dimension in ", shape_string(shape));
}

}  // namespace

std::string to_string(Device device) {
  return device == Device::kCpu ? "cpu" : "cuda";
}

int64_t shape_numel(const Shape& shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}

std::string shape_string(const Shape& shape) {
  std::ostringstream out;
  out << "(";
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  out << ")";
  return out.str();
}

void TensorDeleter::operator()(float* p) const noexcept {
  if (p == nullptr || !owned) return;
  if (device == Device::kCpu) {
    std::free(p);
    return;
  }
  if (DeviceMemory* memory = device_memory_or_null()) memory->release(p);
}

Tensor::Tensor(Shape shape, Device device)
    : shape_(std::move(shape)),
      numel_(shape_numel(shape_)),
      capacity_(numel_),
      device_(device),
      data_(allocate(device, numel_), TensorDeleter{device, true}) {
  check_dimensions(shape_);
}

Tensor Tensor::view(float* data, Shape shape, Device device) {
  Tensor out = unallocated(std::move(shape), device);
  LOCKSTEP_CHECK(data != nullptr || out.numel_ == 0, "view of ", shape_string(out.shape_),
                 " over no memory");
  out.data_ = std::unique_ptr<float[], TensorDeleter>(data, TensorDeleter{device, false});
  return out;
}

Tensor Tensor::unallocated(Shape shape, Device device) {
  Tensor out;
  out.shape_ = std::move(shape);
  check_dimensions(out.shape_);
  out.numel_ = shape_numel(out.shape_);
  out.capacity_ = out.numel_;
  out.device_ = device;
  out.data_ = std::unique_ptr<float[], TensorDeleter>(nullptr, TensorDeleter{device, false});
  return out;
}

Tensor Tensor::clone() const {
  Tensor out(shape_, device_);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& other) {
  LOCKSTEP_CHECK(other.numel_ == numel_, "copy_from ", shape_string(other.shape_), " into ",
                 shape_string(shape_));
  copy_bytes(data(), device_, other.data(), other.device_,
             static_cast<size_t>(numel_) * sizeof(float));
}

void Tensor::reshape(const Shape& shape) {
  LOCKSTEP_CHECK(shape_numel(shape) == numel_, "reshape ", shape_string(shape_), " to ",
                 shape_string(shape));
  shape_ = shape;
}

void Tensor::resize(const Shape& shape) {
  const int64_t n = shape_numel(shape);
  if (n > capacity_) {
    data_.reset();
    data_ =
        std::unique_ptr<float[], TensorDeleter>(allocate(device_, n), TensorDeleter{device_, true});
    capacity_ = n;
  }
  shape_ = shape;
  numel_ = n;
}

void Tensor::zero() {
  if (numel_ == 0) return;
  if (device_ == Device::kCpu) {
    std::memset(data(), 0, static_cast<size_t>(numel_) * sizeof(float));
    return;
  }
  device_memory().zero(data(), static_cast<size_t>(numel_) * sizeof(float));
}

}  // namespace lockstep::nn
