#include "nn/cuda/device_context.h"

#include <algorithm>
#include <sstream>

namespace lockstep::nn::cuda {
namespace {

constexpr size_t kMaxWorkspaceBytes = size_t{1} << 30;

// The first usable result in cuDNN's order (fastest first): it ran (or would
// run), fits the workspace limit, is deterministic when asked, and does not
// use tensor-core math (TF32 would break parity with the CPU backend).
template <typename Perf>
const Perf* pick(const Perf* results, int count, bool deterministic, size_t limit) {
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[i];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > limit) continue;
    if (deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    if (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)
      continue;
    return &r;
  }
  return nullptr;
}

// query(capacity, &count, results) runs cudnnGet*_v7 or cudnnFind*.
template <typename Perf, typename Query>
auto choose(const char* direction, const Conv2dGeometry& g, bool deterministic, size_t limit,
            Query query) {
  std::array<Perf, 16> results{};
  int count = 0;
  query(static_cast<int>(results.size()), &count, results.data());
  const Perf* best = pick(results.data(), count, deterministic, limit);
  if (best == nullptr) {
    throw LibraryError(detail::concat("cuDNN offers no usable ", direction, " algorithm for ",
                                      describe(g), " (", deterministic ? "deterministic, " : "",
                                      "float32 math, workspace <= ", limit, " bytes; ", count,
                                      " candidates) ---> HINT: lower batch_size",
                                      deterministic ? " or turn off deterministic" : ""));
  }
  return ConvAlgorithm<decltype(best->algo)>{best->algo, best->memory};
}

}  // namespace

std::string describe(const Conv2dGeometry& g) {
  std::ostringstream out;
  out << "conv2d (" << g.batch << ", " << g.in_channels << ", " << g.in_h << ", " << g.in_w
      << ") * (" << g.out_channels << ", " << g.in_channels << ", " << g.kernel_h << ", "
      << g.kernel_w << ") stride " << g.stride << " pad " << g.pad;
  return out.str();
}

DeviceContext::DeviceContext(int device, bool deterministic)
    : device_(device), deterministic_(deterministic) {
  activate();
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device_));
  device_name_ = prop.name;

  cudaStream_t stream = nullptr;
  CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamDefault));  // blocking: see header
  stream_.reset(stream);

  cudnnHandle_t cudnn = nullptr;
  CUDNN_CHECK(cudnnCreate(&cudnn));
  cudnn_.reset(cudnn);
  CUDNN_CHECK(cudnnSetStream(cudnn, stream));

  cublasHandle_t cublas = nullptr;
  CUBLAS_CHECK(cublasCreate(&cublas));
  cublas_.reset(cublas);
  CUBLAS_CHECK(cublasSetStream(cublas, stream));
  CUBLAS_CHECK(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));  // float32, no TF32
}

DeviceContext::~DeviceContext() noexcept {
  // Let queued work finish before its buffers go; errors are ignored here.
  if (cudaSetDevice(device_) == cudaSuccess && stream_) cudaStreamSynchronize(stream_.get());
}

void DeviceContext::activate() const {
  CUDA_CHECK(cudaSetDevice(device_));
}

void* DeviceContext::workspace(size_t bytes) {
  return bytes == 0 ? nullptr : workspace_.reserve(bytes);
}

size_t DeviceContext::workspace_limit() const {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return std::min(kMaxWorkspaceBytes, workspace_.bytes() + free_bytes / 2);
}

ConvPlan& DeviceContext::conv_plan(const Conv2dGeometry& g) {
  const ConvKey key{g.batch,    g.in_channels, g.in_h,   g.in_w, g.out_channels,
                    g.kernel_h, g.kernel_w,    g.stride, g.pad};
  if (auto it = conv_plans_.find(key); it != conv_plans_.end()) return *it->second;

  auto plan = std::make_unique<ConvPlan>();
  set_nchw(plan->x, g.batch, g.in_channels, g.in_h, g.in_w);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                         to_int(g.out_channels, "K"), to_int(g.in_channels, "C"),
                                         to_int(g.kernel_h, "R"), to_int(g.kernel_w, "S")));
  const int pad = to_int(g.pad, "pad"), stride = to_int(g.stride, "stride");
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv.get(), pad, pad, stride, stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.get(), CUDNN_FMA_MATH));
  int n = 0, k = 0, p = 0, q = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv.get(), plan->x.get(), plan->w.get(),
                                                    &n, &k, &p, &q));
  LOCKSTEP_CHECK(n == g.batch && k == g.out_channels && p == g.out_h() && q == g.out_w(),
                 "cuDNN output shape (", n, ", ", k, ", ", p, ", ", q, ") for ", describe(g));
  set_nchw(plan->y, g.batch, g.out_channels, g.out_h(), g.out_w());
  set_nchw(plan->bias, 1, g.out_channels, 1, 1);
  return *conv_plans_.emplace(key, std::move(plan)).first->second;
}

ConvAlgorithm<cudnnConvolutionFwdAlgo_t> DeviceContext::forward_algorithm(const Conv2dGeometry& g,
                                                                          ConvPlan& p) {
  if (!p.forward) {
    p.forward = choose<cudnnConvolutionFwdAlgoPerf_t>(
        "forward", g, deterministic_, workspace_limit(), [&](int capacity, int* count, auto* r) {
          if (deterministic_) {
            CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(
                cudnn(), p.x.get(), p.w.get(), p.conv.get(), p.y.get(), capacity, count, r));
          } else {
            CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(
                cudnn(), p.x.get(), p.w.get(), p.conv.get(), p.y.get(), capacity, count, r));
          }
        });
  }
  return *p.forward;
}

ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t> DeviceContext::backward_data_algorithm(
    const Conv2dGeometry& g, ConvPlan& p) {
  if (!p.backward_data) {
    p.backward_data = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
        "backward-data", g, deterministic_, workspace_limit(),
        [&](int capacity, int* count, auto* r) {
          if (deterministic_) {
            CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                cudnn(), p.w.get(), p.y.get(), p.conv.get(), p.x.get(), capacity, count, r));
          } else {
            CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithm(
                cudnn(), p.w.get(), p.y.get(), p.conv.get(), p.x.get(), capacity, count, r));
          }
        });
  }
  return *p.backward_data;
}

ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t> DeviceContext::backward_filter_algorithm(
    const Conv2dGeometry& g, ConvPlan& p) {
  if (!p.backward_filter) {
    p.backward_filter = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
        "backward-filter", g, deterministic_, workspace_limit(),
        [&](int capacity, int* count, auto* r) {
          if (deterministic_) {
            CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                cudnn(), p.x.get(), p.y.get(), p.conv.get(), p.w.get(), capacity, count, r));
          } else {
            CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithm(
                cudnn(), p.x.get(), p.y.get(), p.conv.get(), p.w.get(), capacity, count, r));
          }
        });
  }
  return *p.backward_filter;
}

void DeviceContext::copy_to_host(void* host, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  CUDA_CHECK(cudaMemcpyAsync(host, device_src, bytes, cudaMemcpyDeviceToHost, stream()));
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void DeviceContext::copy_to_device(void* device_dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  // From pageable memory the call returns once `host` has been staged, so
  // the caller may reuse it at once.
  CUDA_CHECK(cudaMemcpyAsync(device_dst, host, bytes, cudaMemcpyHostToDevice, stream()));
}

void DeviceContext::synchronize() {
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace lockstep::nn::cuda
