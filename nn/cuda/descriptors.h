// RAII owners of cuDNN descriptors and of raw device memory. A descriptor is
// created in the constructor (throwing LibraryError on failure) and destroyed
// in the destructor, which never throws. Movable, not copyable.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "nn/cuda/cuda_check.h"

namespace lockstep::nn::cuda {

template <typename Handle, cudnnStatus_t (*Create)(Handle*), cudnnStatus_t (*Destroy)(Handle)>
class Descriptor {
 public:
  Descriptor() { CUDNN_CHECK(Create(&handle_)); }
  ~Descriptor() noexcept {
    if (handle_ != nullptr) Destroy(handle_);  // status ignored: destructors do not throw
  }
  Descriptor(Descriptor&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  Handle get() const { return handle_; }

 private:
  Handle handle_ = nullptr;
};

using TensorDescriptor =
    Descriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDescriptor =
    Descriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvolutionDescriptor =
    Descriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
               cudnnDestroyConvolutionDescriptor>;
using PoolingDescriptor = Descriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                     cudnnDestroyPoolingDescriptor>;

// cuDNN takes dimensions as int: a larger one is a lockstep bug or a tensor
// no layer here can produce.
inline int to_int(int64_t value, const char* what) {
  LOCKSTEP_CHECK(value >= 0 && value <= INT_MAX, what, " = ", value,
                 " does not fit the int that cuDNN/cuBLAS take");
  return static_cast<int>(value);
}

// A packed NCHW tensor descriptor (float32 unless `type` says otherwise).
inline void set_nchw(const TensorDescriptor& d, int64_t n, int64_t c, int64_t h, int64_t w,
                     cudnnDataType_t type = CUDNN_DATA_FLOAT) {
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.get(), CUDNN_TENSOR_NCHW, type, to_int(n, "N"),
                                         to_int(c, "C"), to_int(h, "H"), to_int(w, "W")));
}

// Whether the current device allocates in stream order (cudaMallocAsync);
// some virtualised GPUs do not.
inline bool stream_ordered_allocation() {
  int device = 0, supported = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
  return supported != 0;
}

// Device memory that grows on demand and never shrinks (scratch space,
// cuDNN workspaces), used only by work queued on one stream. Growing frees
// the old allocation and allocates the new one in that stream's order
// (cudaFreeAsync, cudaMallocAsync): work queued before still sees the old
// memory, and the host never waits. On a device without stream-ordered
// allocation, growing waits for the stream, then cudaFree and cudaMalloc.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer() noexcept {
    if (data_ != nullptr) cudaFree(data_);  // errors at teardown are ignored
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // At least `bytes` bytes for work on `stream` (contents unspecified after
  // growing).
  void* reserve(size_t bytes, cudaStream_t stream) {
    if (bytes <= bytes_) return data_;
    const bool ordered = stream_ordered_allocation();
    if (data_ != nullptr) {
      if (ordered) {
        CUDA_CHECK(cudaFreeAsync(data_, stream));
      } else {
        CUDA_CHECK(cudaStreamSynchronize(stream));  // work queued before may still use it
        CUDA_CHECK(cudaFree(data_));
      }
      data_ = nullptr;
      bytes_ = 0;
    }
    if (ordered) {
      CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
    } else {
      CUDA_CHECK(cudaMalloc(&data_, bytes));
    }
    bytes_ = bytes;
    return data_;
  }
  template <typename T>
  T* reserve_for(int64_t count, cudaStream_t stream) {
    return static_cast<T*>(reserve(static_cast<size_t>(count) * sizeof(T), stream));
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Page-locked host memory that grows on demand (staging of host-device
// copies: a copy from it is a true asynchronous DMA). Growing waits for the
// whole device, which happens only the first times a size is seen.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer() noexcept {
    if (data_ != nullptr) cudaFreeHost(data_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  void* reserve(size_t bytes) {
    if (bytes <= bytes_) return data_;
    if (data_ != nullptr) {
      CUDA_CHECK(cudaFreeHost(data_));  // waits until no copy uses it
      data_ = nullptr;
      bytes_ = 0;
    }
    CUDA_CHECK(cudaMallocHost(&data_, bytes));
    bytes_ = bytes;
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace lockstep::nn::cuda
