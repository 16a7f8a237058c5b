#include "nn/cuda/device_context.h"

#include <algorithm>
#include <cstring>
#include <span>
#include <sstream>

#include "common/enum_table.h"

namespace lockstep::nn::cuda {
namespace {

constexpr EnumEntry<ConvMath, cudnnMathType_t> kCudnnMath[] = {
    {ConvMath::kDefault, CUDNN_DEFAULT_MATH},
    {ConvMath::kTensorOp, CUDNN_TENSOR_OP_MATH},
    {ConvMath::kTensorOpAllowConversion, CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION},
    {ConvMath::kFma, CUDNN_FMA_MATH}};

constexpr EnumEntry<Precision, cudnnDataType_t> kCudnnDataType[] = {
    {Precision::kFp32, CUDNN_DATA_FLOAT},
    {Precision::kBf16, CUDNN_DATA_BFLOAT16},
    {Precision::kFp16, CUDNN_DATA_HALF}};

ConvMath to_conv_math(cudnnMathType_t math) {
  return key_of(kCudnnMath, math).value_or(ConvMath::kDefault);
}
cudnnMathType_t to_cudnn_math(ConvMath math) {
  return value_of(kCudnnMath, math).value_or(CUDNN_DEFAULT_MATH);
}
cudnnDataType_t data_type(Precision p) {
  return value_of(kCudnnDataType, p).value_or(CUDNN_DATA_FLOAT);
}

// The algorithm of one direction and its workspace, from the calls of that
// direction on its descriptors in cuDNN's order (forward: x, w, conv, y;
// backward data: w, dy, conv, dx; backward filter: x, dy, conv, dw):
// search is cudnnGet*_v7 (heuristics) or cudnnFind* (timed),
// workspace_size asks what (descriptors, algorithm) needs.
template <typename A, typename B, typename C, typename Perf, typename Algo>
ConvAlgorithm<Algo> choose(
    const char* direction, const Conv2dGeometry& g, const AlgorithmRequirements& need,
    cudnnHandle_t cudnn, A a, B b, cudnnConvolutionDescriptor_t conv, C c,
    cudnnStatus_t (*search)(cudnnHandle_t, A, B, cudnnConvolutionDescriptor_t, C, int, int*, Perf*),
    cudnnStatus_t (*workspace_size)(cudnnHandle_t, A, B, cudnnConvolutionDescriptor_t, C, Algo,
                                    size_t*)) {
  std::array<Perf, 16> results{};
  int count = 0;
  // The descriptor's own math type (a direction chosen before may have set
  // it to its entry's).
  CUDNN_CHECK(cudnnSetConvolutionMathType(conv, to_cudnn_math(need.math)));
  CUDNN_CHECK(
      search(cudnn, a, b, conv, c, static_cast<int>(results.size()), &count, results.data()));
  CUDA_CLEAR_PROBE_ERRORS();  // the search's failed trials are not ours to report later
  std::array<AlgorithmCandidate, 16> candidates{};
  for (int i = 0; i < count; ++i) {
    const Perf& r = results[static_cast<size_t>(i)];
    candidates[static_cast<size_t>(i)] = {
        static_cast<int>(r.algo), r.status == CUDNN_STATUS_SUCCESS,    r.time, r.memory,
        to_conv_math(r.mathType), r.determinism == CUDNN_DETERMINISTIC};
  }
  const std::span<const AlgorithmCandidate> found(candidates.data(), static_cast<size_t>(count));
  // The first usable entry whose (math type, algorithm) cuDNN accepts for
  // these descriptors.
  std::ostringstream refused;
  for (const AlgorithmTry& t : algorithm_order(found, need)) {
    ConvAlgorithm<Algo> chosen{results[t.index].algo, 0, to_cudnn_math(t.math)};
    CUDNN_CHECK(cudnnSetConvolutionMathType(conv, chosen.math));
    const cudnnStatus_t status =
        workspace_size(cudnn, a, b, conv, c, chosen.algo, &chosen.workspace_bytes);
    if (status == CUDNN_STATUS_SUCCESS && chosen.workspace_bytes <= need.workspace_limit)
      return chosen;
    CUDA_CLEAR_PROBE_ERRORS();  // a refused probe is not an error of ours
    refused << "; algo " << static_cast<int>(chosen.algo) << " as " << to_string(t.math) << ": ";
    if (status == CUDNN_STATUS_SUCCESS) {
      refused << "workspace " << chosen.workspace_bytes << " bytes";
    } else {
      refused << cudnnGetErrorString(status);
    }
  }
  throw LibraryError(detail::concat(
      "cuDNN offers no usable ", direction, " algorithm for ", describe(g), " (",
      need.deterministic ? "deterministic, " : "", to_string(need.math), " math, workspace <= ",
      need.workspace_limit, " bytes; candidates: ", describe_candidates(found), refused.str(),
      ") ---> HINT: lower batch_size", need.deterministic ? " or turn off deterministic" : ""));
}

}  // namespace

std::string describe(const Conv2dGeometry& g) {
  std::ostringstream out;
  out << "conv2d (" << g.batch << ", " << g.in_channels << ", " << g.in_h << ", " << g.in_w
      << ") * (" << g.out_channels << ", " << g.in_channels << ", " << g.kernel_h << ", "
      << g.kernel_w << ") stride " << g.stride << " pad " << g.pad;
  return out.str();
}

DeviceContext::DeviceContext(int device, bool deterministic, Precision precision)
    : device_(device), deterministic_(deterministic), precision_(precision) {
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

  for (Upload& upload : uploads_) {
    cudaEvent_t event = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    upload.done.reset(event);
  }
}

DeviceContext::~DeviceContext() noexcept {
  // Let queued work finish before its buffers go; errors are ignored here.
  if (cudaSetDevice(device_) == cudaSuccess && stream_) cudaStreamSynchronize(stream_.get());
}

void DeviceContext::activate() const {
  CUDA_CHECK(cudaSetDevice(device_));
}

void* DeviceContext::workspace(size_t bytes) {
  return bytes == 0 ? nullptr : workspace_.reserve(bytes, stream());
}

size_t DeviceContext::workspace_limit() const {
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return workspace_limit_for(workspace_.bytes(), free_bytes);
}

ConvPlan& DeviceContext::conv_plan(const Conv2dGeometry& g) {
  const ConvKey key{g.batch,    g.in_channels, g.in_h,   g.in_w, g.out_channels,
                    g.kernel_h, g.kernel_w,    g.stride, g.pad};
  if (auto it = conv_plans_.find(key); it != conv_plans_.end()) return *it->second;

  auto plan = std::make_unique<ConvPlan>();
  const cudnnDataType_t type = data_type(precision_);
  set_nchw(plan->x, g.batch, g.in_channels, g.in_h, g.in_w, type);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan->w.get(), type, CUDNN_TENSOR_NCHW,
                                         to_int(g.out_channels, "K"), to_int(g.in_channels, "C"),
                                         to_int(g.kernel_h, "R"), to_int(g.kernel_w, "S")));
  const int pad = to_int(g.pad, "pad"), stride = to_int(g.stride, "stride");
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(plan->conv.get(), pad, pad, stride, stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionMathType(plan->conv.get(), to_cudnn_math(conv_math(precision_))));
  int n = 0, k = 0, p = 0, q = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->conv.get(), plan->x.get(), plan->w.get(),
                                                    &n, &k, &p, &q));
  LOCKSTEP_CHECK(n == g.batch && k == g.out_channels && p == g.out_h() && q == g.out_w(),
                 "cuDNN output shape (", n, ", ", k, ", ", p, ", ", q, ") for ", describe(g));
  set_nchw(plan->y, g.batch, g.out_channels, g.out_h(), g.out_w(), type);
  set_nchw(plan->y32, g.batch, g.out_channels, g.out_h(), g.out_w());
  set_nchw(plan->bias, 1, g.out_channels, 1, 1);
  choose_algorithms(g, *plan);
  workspace(std::max({plan->forward.workspace_bytes, plan->backward_data.workspace_bytes,
                      plan->backward_filter.workspace_bytes}));
  return *conv_plans_.emplace(key, std::move(plan)).first->second;
}

void DeviceContext::choose_algorithms(const Conv2dGeometry& g, ConvPlan& p) {
  const AlgorithmRequirements need{conv_math(precision_), deterministic_, workspace_limit(),
                                   default_math_entries(precision_)};
  const bool heuristic = deterministic_;
  p.forward = choose(
      "forward", g, need, cudnn(), p.x.get(), p.w.get(), p.conv.get(), p.y.get(),
      heuristic ? cudnnGetConvolutionForwardAlgorithm_v7 : cudnnFindConvolutionForwardAlgorithm,
      cudnnGetConvolutionForwardWorkspaceSize);
  p.backward_data =
      choose("backward-data", g, need, cudnn(), p.w.get(), p.y.get(), p.conv.get(), p.x.get(),
             heuristic ? cudnnGetConvolutionBackwardDataAlgorithm_v7
                       : cudnnFindConvolutionBackwardDataAlgorithm,
             cudnnGetConvolutionBackwardDataWorkspaceSize);
  p.backward_filter =
      choose("backward-filter", g, need, cudnn(), p.x.get(), p.y.get(), p.conv.get(), p.w.get(),
             heuristic ? cudnnGetConvolutionBackwardFilterAlgorithm_v7
                       : cudnnFindConvolutionBackwardFilterAlgorithm,
             cudnnGetConvolutionBackwardFilterWorkspaceSize);
}

void DeviceContext::copy_to_host(void* host, const void* device_src, size_t bytes) {
  if (bytes == 0) return;
  std::memcpy(host, download(device_src, bytes), bytes);
}

const void* DeviceContext::download(const void* device_src, size_t bytes) {
  void* staged = download_.reserve(std::max<size_t>(bytes, 1));
  if (bytes == 0) return staged;
  CUDA_CHECK(cudaMemcpyAsync(staged, device_src, bytes, cudaMemcpyDeviceToHost, stream()));
  ++traffic_.reads;
  ++traffic_.waits;
  CUDA_CHECK(cudaStreamSynchronize(stream()));
  return staged;
}

void DeviceContext::copy_to_device(void* device_dst, const void* host, size_t bytes) {
  if (bytes == 0) return;
  Upload& upload = uploads_[upload_ring_.next()];
  // The buffer's previous copy must have run before it is overwritten.
  const cudaError_t done = cudaEventQuery(upload.done.get());
  if (done == cudaErrorNotReady) {
    ++traffic_.throttles;
    CUDA_CHECK(cudaEventSynchronize(upload.done.get()));
  } else {
    CUDA_CHECK(done);
  }
  void* staged = upload.buffer.reserve(bytes);
  std::memcpy(staged, host, bytes);
  CUDA_CHECK(cudaMemcpyAsync(device_dst, staged, bytes, cudaMemcpyHostToDevice, stream()));
  ++traffic_.writes;
  CUDA_CHECK(cudaEventRecord(upload.done.get(), stream()));
}

void DeviceContext::synchronize() {
  ++traffic_.waits;
  CUDA_CHECK(cudaStreamSynchronize(stream()));
}

}  // namespace lockstep::nn::cuda
