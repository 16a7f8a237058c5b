// DeviceContext: everything the CUDA backend holds for one device, in one
// object (never one handle per layer): the stream every op is queued on, the
// cuDNN and cuBLAS handles bound to it, the cuDNN workspace, scratch
// buffers, and a per-shape cache of convolution descriptors and algorithms.
//
// Stream: created with cudaStreamDefault flags, i.e. a *blocking* stream, so
// that the legacy default stream (Tensor::copy_from's cudaMemcpy,
// Tensor::zero's cudaMemset) waits for queued backend work and vice versa:
// a tensor copied to the host after a backend op sees its result.
//
// Numerics: convolutions run with CUDNN_FMA_MATH and GEMMs with
// CUBLAS_DEFAULT_MATH, i.e. full float32, never TF32, so that results match
// the CPU backend to float32 rounding.
//
// Algorithms: chosen once per shape and direction, the first time it runs.
// deterministic: cudnnGet*_v7 heuristics restricted to deterministic
// algorithms (the same choice on every run); otherwise cudnnFind*, which
// times every algorithm and takes the fastest. In both cases the workspace
// may use at most min(1 GiB, half the free memory).
//
// Not thread-safe: one thread drives a context at a time. Every entry point
// of the backend calls activate() first, so that thread may change.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "nn/backend.h"
#include "nn/cuda/descriptors.h"

namespace lockstep::nn::cuda {

template <typename Algo>
struct ConvAlgorithm {
  Algo algo{};
  size_t workspace_bytes = 0;
};

// The cuDNN view of one convolution shape; algorithms filled in on first use.
struct ConvPlan {
  TensorDescriptor x;     // (N, C, H, W), also dx
  FilterDescriptor w;     // (K, C, R, S), also dw
  TensorDescriptor y;     // (N, K, P, Q), also dy
  TensorDescriptor bias;  // (1, K, 1, 1), also db
  ConvolutionDescriptor conv;
  std::optional<ConvAlgorithm<cudnnConvolutionFwdAlgo_t>> forward;
  std::optional<ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t>> backward_data;
  std::optional<ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t>> backward_filter;
};

// Scratch buffers, one per purpose, so that two in one op never collide.
enum class Scratch { kSampleIds, kRowValues, kRowValues2, kRowIndices, kCount };

class DeviceContext {
 public:
  // Makes `device` current on the calling thread. Throws LibraryError when
  // the device cannot be used.
  DeviceContext(int device, bool deterministic);
  ~DeviceContext() noexcept;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  bool deterministic() const { return deterministic_; }
  const std::string& device_name() const { return device_name_; }

  // Makes this context's device current on the calling thread.
  void activate() const;
  cudaStream_t stream() const { return stream_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

  // A cuDNN workspace of at least `bytes` bytes (nullptr when 0).
  void* workspace(size_t bytes);
  DeviceBuffer& scratch(Scratch which) { return scratch_.at(static_cast<size_t>(which)); }

  // Descriptors of the convolution g (created on first use of the shape).
  ConvPlan& conv_plan(const Conv2dGeometry& g);
  // The algorithm of each direction for a plan (chosen on first use).
  ConvAlgorithm<cudnnConvolutionFwdAlgo_t> forward_algorithm(const Conv2dGeometry& g,
                                                             ConvPlan& plan);
  ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t> backward_data_algorithm(const Conv2dGeometry& g,
                                                                       ConvPlan& plan);
  ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t> backward_filter_algorithm(const Conv2dGeometry& g,
                                                                           ConvPlan& plan);

  // Copies `bytes` from device memory to host memory and waits for it (and
  // for everything queued before it).
  void copy_to_host(void* host, const void* device_src, size_t bytes);
  // Copies `bytes` from host memory into device memory, ordered on the stream.
  void copy_to_device(void* device_dst, const void* host, size_t bytes);
  void synchronize();

 private:
  struct StreamDeleter {
    void operator()(cudaStream_t s) const noexcept { cudaStreamDestroy(s); }
  };
  struct CudnnDeleter {
    void operator()(cudnnHandle_t h) const noexcept { cudnnDestroy(h); }
  };
  struct CublasDeleter {
    void operator()(cublasHandle_t h) const noexcept { cublasDestroy(h); }
  };
  using ConvKey = std::array<int64_t, 9>;

  size_t workspace_limit() const;

  int device_;
  bool deterministic_;
  std::string device_name_;
  // Destroyed in reverse order: plans and buffers, then handles, then stream.
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<cudnnContext, CudnnDeleter> cudnn_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
  DeviceBuffer workspace_;
  std::array<DeviceBuffer, static_cast<size_t>(Scratch::kCount)> scratch_;
  std::map<ConvKey, std::unique_ptr<ConvPlan>> conv_plans_;
};

// "conv2d (8, 3, 32, 32) * (64, 3, 3, 3) stride 2 pad 1", for messages.
std::string describe(const Conv2dGeometry& g);

}  // namespace lockstep::nn::cuda
