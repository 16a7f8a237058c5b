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
// Numerics (nn/cuda/math_types.h): at fp32, convolutions run with
// CUDNN_FMA_MATH and GEMMs with CUBLAS_DEFAULT_MATH, i.e. full float32, never
// TF32, so that results match the CPU backend to float32 rounding; at bf16 and
// fp16, 16-bit descriptors with float32 compute and CUDNN_TENSOR_OP_MATH.
//
// Algorithms: chosen for all three directions when a shape is first seen,
// among cuDNN's results of the descriptor's math type only
// (nn/cuda/algorithm_choice.h). deterministic: cudnnGet*_v7 heuristics
// restricted to deterministic algorithms (the same choice on every run);
// otherwise cudnnFind*, which times every algorithm and takes the fastest.
// The workspace may use at most min(1 GiB, half the free memory); its size
// is asked of cuDNN for (descriptor, chosen algorithm), and it grows then,
// once per new shape, in stream order (no host wait).
//
// Host copies go through page-locked staging buffers. traffic() counts
// every host wait (a stream synchronise, a download), every copy either
// way, and every upload that had to wait for its staging buffer.
//
// Not thread-safe: one thread drives a context at a time. Every entry point
// of the backend calls activate() first, so that thread may change.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "nn/backend.h"
#include "nn/cuda/descriptors.h"
#include "nn/cuda/host_rules.h"
#include "nn/cuda/math_types.h"

namespace lockstep::nn::cuda {

template <typename Algo>
struct ConvAlgorithm {
  Algo algo{};
  size_t workspace_bytes = 0;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // set on the descriptor before each call
};

// The cuDNN view of one convolution shape, with the algorithm of each
// direction. x, w, y are in the context's precision; y32 is y in float32
// (the bias is added to, and summed from, float32 tensors).
struct ConvPlan {
  TensorDescriptor x;     // (N, C, H, W), also dx
  FilterDescriptor w;     // (K, C, R, S), also dw
  TensorDescriptor y;     // (N, K, P, Q), also dy
  TensorDescriptor y32;   // (N, K, P, Q), float32
  TensorDescriptor bias;  // (1, K, 1, 1), also db, float32
  ConvolutionDescriptor conv;
  ConvAlgorithm<cudnnConvolutionFwdAlgo_t> forward;
  ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t> backward_data;
  ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t> backward_filter;
};

// Scratch buffers, one per purpose, so that two in one op never collide.
// kLow*: 16-bit copies of an op's operands (bf16/fp16 precision); kFlag: one
// int that kernels set to report a condition (any_non_finite).
enum class Scratch { kSampleIds, kRowResults, kPartialSums, kLowA, kLowB, kLowC, kFlag, kCount };

class DeviceContext {
 public:
  // Makes `device` current on the calling thread. Throws LibraryError when
  // the device cannot be used.
  DeviceContext(int device, bool deterministic, Precision precision = Precision::kFp32);
  ~DeviceContext() noexcept;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  int device() const { return device_; }
  bool deterministic() const { return deterministic_; }
  Precision precision() const { return precision_; }
  const std::string& device_name() const { return device_name_; }

  // Makes this context's device current on the calling thread.
  void activate() const;
  cudaStream_t stream() const { return stream_.get(); }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

  // The cuDNN workspace for an algorithm needing `bytes` (nullptr when 0);
  // conv_plan() has already grown it for every algorithm of its shape.
  void* workspace(size_t bytes);
  // A scratch buffer of at least `count` elements of T, on this stream.
  template <typename T>
  T* scratch(Scratch which, int64_t count) {
    return scratch_.at(static_cast<size_t>(which)).reserve_for<T>(count, stream());
  }

  // Descriptors and algorithms of the convolution g (created, and the
  // workspace grown, when the shape is first seen).
  ConvPlan& conv_plan(const Conv2dGeometry& g);

  // Copies `bytes` from device memory to host memory through the pinned
  // download buffer and waits for it (and for everything queued before it).
  void copy_to_host(void* host, const void* device_src, size_t bytes);
  // The same, returning the pinned buffer itself (valid until the next
  // download): one host wait, no second copy.
  const void* download(const void* device_src, size_t bytes);
  // Copies `bytes` from host memory into device memory, ordered on the
  // stream, through a pinned upload buffer; `host` may be reused at once.
  void copy_to_device(void* device_dst, const void* host, size_t bytes);
  void synchronize();
  const HostTraffic& traffic() const { return traffic_; }

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
  struct EventDeleter {
    void operator()(cudaEvent_t e) const noexcept { cudaEventDestroy(e); }
  };
  using ConvKey = std::array<int64_t, 9>;

  size_t workspace_limit() const;
  void choose_algorithms(const Conv2dGeometry& g, ConvPlan& plan);

  int device_;
  bool deterministic_;
  Precision precision_;
  std::string device_name_;
  // Destroyed in reverse order: plans and buffers, then handles, then stream.
  std::unique_ptr<CUstream_st, StreamDeleter> stream_;
  std::unique_ptr<cudnnContext, CudnnDeleter> cudnn_;
  std::unique_ptr<cublasContext, CublasDeleter> cublas_;
  DeviceBuffer workspace_;
  std::array<DeviceBuffer, static_cast<size_t>(Scratch::kCount)> scratch_;
  // Uploads rotate through a few pinned buffers, each reused only after the
  // copy out of it has run, so the host rarely waits for the device.
  struct Upload {
    PinnedBuffer buffer;
    std::unique_ptr<CUevent_st, EventDeleter> done;
  };
  static constexpr size_t kUploadSlots = 4;
  std::array<Upload, kUploadSlots> uploads_;
  UploadRing<kUploadSlots> upload_ring_;
  PinnedBuffer download_;
  HostTraffic traffic_;
  std::map<ConvKey, std::unique_ptr<ConvPlan>> conv_plans_;
};

// "conv2d (8, 3, 32, 32) * (64, 3, 3, 3) stride 2 pad 1", for messages.
std::string describe(const Conv2dGeometry& g);

}  // namespace lockstep::nn::cuda
