// CudaBackend: the Backend interface over the CUDA ops (nn/cuda/kernels.h)
// and one DeviceContext. Each entry point makes the context's device current
// on the calling thread, then queues its work on the context's stream.
#include "nn/cuda/cuda_backend.h"

#include <cstdio>
#include <sstream>

#include "common/error.h"
#include "nn/cuda/device_context.h"
#include "nn/cuda/kernels.h"

namespace lockstep::nn {
namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int device, bool deterministic, Precision precision)
      : ctx_(device, deterministic, precision) {}

  Device device() const override { return Device::kCuda; }
  std::string name() const override {
    const bool fp32 = ctx_.precision() == Precision::kFp32;
    return "cuda:" + std::to_string(ctx_.device()) + " (" + ctx_.device_name() +
           (fp32 ? "" : std::string(", ") + nn::to_string(ctx_.precision())) + ")";
  }
  KernelChoice kernels() const override { return {.label = "cuda"}; }

  void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b,
                      float* y) override {
    g.validate();
    cuda::conv2d_forward(active(), g, x, w, b, y);
  }
  void conv2d_backward_data(const Conv2dGeometry& g, const float* w, const float* dy,
                            float* dx) override {
    g.validate();
    cuda::conv2d_backward_data(active(), g, w, dy, dx);
  }
  void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                              float* db) override {
    g.validate();
    cuda::conv2d_backward_filter(active(), g, x, dy, dw, db);
  }

  void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) override {
    g.validate();
    cuda::maxpool2d_forward(active(), g, x, y);
  }
  void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* /*y*/,
                          const float* dy, float* dx) override {
    g.validate();
    cuda::maxpool2d_backward(active(), g, x, dy, dx);
  }

  void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) override {
    cuda::avgpool2d_forward(active(), g, x, y);
  }
  void avgpool2d_backward(const Pool2dGeometry& g, const float* dy, float* dx) override {
    cuda::avgpool2d_backward(active(), g, dy, dx);
  }
  void row_mean_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    cuda::row_mean_forward(active(), rows, cols, x, y);
  }
  void row_mean_backward(int64_t rows, int64_t cols, const float* dy, float* dx) override {
    cuda::row_mean_backward(active(), rows, cols, dy, dx);
  }
  void channel_pad_forward(const ChannelPadGeometry& g, const float* x, float* y) override {
    cuda::channel_pad_forward(active(), g, x, y);
  }
  void channel_pad_backward(const ChannelPadGeometry& g, const float* dy, float* dx) override {
    cuda::channel_pad_backward(active(), g, dy, dx);
  }
  void add_forward(int64_t n, const float* a, const float* b, bool relu, float* y) override {
    cuda::add_forward(active(), n, a, b, relu, y);
  }
  void batchnorm_stats(const BatchNormGeometry& g, const float* x, double* sum,
                       double* sumsq) override {
    cuda::batchnorm_stats(active(), g, x, sum, sumsq);
  }
  void batchnorm_apply(const BatchNormGeometry& g, const float* x, const float* coef, bool relu,
                       float* y) override {
    cuda::batchnorm_apply(active(), g, x, coef, nullptr, relu, y);
  }
  void batchnorm_apply_add(const BatchNormGeometry& g, const float* x, const float* coef,
                           const float* add, bool relu, float* y) override {
    cuda::batchnorm_apply(active(), g, x, coef, add, relu, y);
  }
  void batchnorm_backward_sums(const BatchNormGeometry& g, const float* x, const float* y,
                               const float* dy, const float* coef, double* sum_dy,
                               double* sum_dy_xhat) override {
    cuda::batchnorm_backward_sums(active(), g, x, y, dy, coef, sum_dy, sum_dy_xhat);
  }
  void batchnorm_backward_apply(const BatchNormGeometry& g, const float* x, const float* y,
                                const float* dy, const float* coef, float* dx) override {
    cuda::batchnorm_backward_apply(active(), g, x, y, dy, coef, dx);
  }

  void batchnorm_train_forward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                               const float* x, bool relu, float* y) override {
    cuda::batchnorm_train_forward(active(), g, s, x, nullptr, relu, y);
  }
  void batchnorm_train_forward_add(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                   const float* x, const float* add, bool relu, float* y) override {
    cuda::batchnorm_train_forward(active(), g, s, x, add, relu, y);
  }
  void batchnorm_train_backward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                const float* x, const float* y, const float* dy, float* dweight,
                                float* dbias, float* dx) override {
    cuda::batchnorm_train_backward(active(), g, s, x, y, dy, dweight, dbias, dx);
  }
  void batchnorm_eval_coef(int64_t channels, const BatchNormTrainState& s) override {
    cuda::batchnorm_eval_coef(active(), channels, s);
  }

  void relu_forward(int64_t n, const float* x, float* y) override {
    cuda::relu_forward(active(), n, x, y);
  }
  void relu_backward(int64_t n, const float* y, const float* dy, float* dx) override {
    cuda::relu_backward(active(), n, y, dy, dx);
  }
  void relu_backward_accumulate(int64_t n, const float* y, const float* dy, float* dx) override {
    cuda::relu_backward_accumulate(active(), n, y, dy, dx);
  }

  void dropout_forward(const DropoutGeometry& g, const int64_t* sample_ids, const float* x,
                       float* y, float* mask) override {
    LOCKSTEP_CHECK(g.p >= 0.0f && g.p < 1.0f, "dropout probability ", g.p, " not in [0, 1)");
    cuda::dropout_forward(active(), g, sample_ids, x, y, mask);
  }
  void dropout_forward_device_ids(const DropoutGeometry& g, const int64_t* sample_ids,
                                  const float* x, float* y, float* mask) override {
    LOCKSTEP_CHECK(g.p >= 0.0f && g.p < 1.0f, "dropout probability ", g.p, " not in [0, 1)");
    cuda::dropout_forward_device_ids(active(), g, sample_ids, x, y, mask);
  }
  void dropout_backward(const DropoutGeometry& g, const float* mask, const float* dy,
                        float* dx) override {
    cuda::dropout_backward(active(), g, mask, dy, dx);
  }

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    cuda::gemm(active(), trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  void add_row_bias(int64_t rows, int64_t cols, const float* bias, float* y) override {
    cuda::add_row_bias(active(), rows, cols, bias, y);
  }
  void sum_rows(int64_t rows, int64_t cols, const float* dy, float* db) override {
    cuda::sum_rows(active(), rows, cols, dy, db);
  }

  void log_softmax_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    cuda::log_softmax_forward(active(), rows, cols, x, y);
  }
  void log_softmax_backward(int64_t rows, int64_t cols, const float* y, const float* dy,
                            float* dx) override {
    cuda::log_softmax_backward(active(), rows, cols, y, dy, dx);
  }
  LossStats nll_loss(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                     float grad_scale, float* dlogp) override {
    return cuda::nll_loss(active(), rows, cols, logp, labels, grad_scale, dlogp);
  }
  LossStats softmax_cross_entropy(int64_t rows, int64_t cols, const float* logits,
                                  const int32_t* labels, float grad_scale, float* dlogits,
                                  float label_smoothing) override {
    return cuda::softmax_cross_entropy(active(), rows, cols, logits, labels, grad_scale, dlogits,
                                       label_smoothing);
  }
  void nll_loss_accumulate(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                           float grad_scale, float* dlogp, LossTotals* totals) override {
    cuda::nll_loss_accumulate(active(), rows, cols, logp, labels, grad_scale, dlogp, totals);
  }
  void softmax_cross_entropy_accumulate(int64_t rows, int64_t cols, const float* logits,
                                        const int32_t* labels, float grad_scale, float* dlogits,
                                        float label_smoothing, LossTotals* totals) override {
    cuda::softmax_cross_entropy_accumulate(active(), rows, cols, logits, labels, grad_scale,
                                           dlogits, label_smoothing, totals);
  }

  void sgd_update(int64_t n, const SgdParams& p, float* w, const float* grad,
                  float* velocity) override {
    cuda::sgd_update(active(), n, p, w, grad, velocity);
  }
  void adam_update(int64_t n, const AdamParams& p, float* w, const float* grad, float* m,
                   float* v) override {
    cuda::adam_update(active(), n, p, w, grad, m, v);
  }
  void fill(int64_t n, float value, float* x) override { cuda::fill(active(), n, value, x); }
  void scale(int64_t n, float alpha, float* x) override { cuda::scale(active(), n, alpha, x); }
  void axpy(int64_t n, float alpha, const float* x, float* y) override {
    cuda::axpy(active(), n, alpha, x, y);
  }
  void copy(int64_t n, const float* src, float* dst) override { cuda::copy(active(), n, src, dst); }
  bool any_non_finite(std::span<const ConstFloats> arrays) override {
    return cuda::any_non_finite(active(), arrays);
  }
  void gather_batch(const GatherGeometry& g, const int64_t* ids, const uint8_t* images,
                    const int32_t* labels, const float* table, float* y,
                    int32_t* batch_labels) override {
    cuda::gather_batch(active(), g, ids, images, labels, table, y, batch_labels);
  }
  void upload(const void* host, void* dst, size_t bytes) override {
    active().copy_to_device(dst, host, bytes);
  }
  void download(const void* src, void* host, size_t bytes) override {
    active().copy_to_host(host, src, bytes);
  }
  void synchronize() override { active().synchronize(); }
  HostTraffic host_traffic() const override { return ctx_.traffic(); }
  void* native_stream() override { return ctx_.stream(); }
  void bind_thread() override { ctx_.activate(); }

 private:
  // The context, its device made current on the calling thread.
  cuda::DeviceContext& active() {
    ctx_.activate();
    return ctx_;
  }

  cuda::DeviceContext ctx_;
};

// "13.0" from CUDA's 13000-style version numbers.
std::string cuda_version_string(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "79.1 GiB"
std::string gibibytes(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

}  // namespace

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the (non-sticky) error so later calls do not report it
    return 0;
  }
  return count;
}

std::string cuda_devices_description() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    return std::string("CUDA: no device visible (") +
           (status != cudaSuccess ? cudaGetErrorString(status) : "the runtime reports 0 devices") +
           ")";
  }
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  const size_t cudnn = cudnnGetVersion();  // 91900 for 9.19.0
  std::ostringstream out;
  out << "CUDA: runtime " << cuda_version_string(runtime) << ", driver "
      << cuda_version_string(driver) << ", cuDNN " << cudnn / 10000 << "." << cudnn % 10000 / 100
      << "." << cudnn % 100 << ", " << count << (count == 1 ? " device" : " devices") << " visible";
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      out << "\ncuda:" << d << " (properties unavailable)";
      continue;
    }
    out << "\ncuda:" << d << " " << prop.name << " (sm_" << prop.major << prop.minor << ", "
        << gibibytes(prop.totalGlobalMem) << ", " << prop.multiProcessorCount << " SMs)";
  }
  return out.str();
}

void cuda_upload(Backend& backend, const void* host, void* device, size_t bytes) {
  LOCKSTEP_CHECK(dynamic_cast<CudaBackend*>(&backend) != nullptr, "cuda_upload on the ",
                 backend.name(), " backend");
  backend.upload(host, device, bytes);
}

std::unique_ptr<Backend> make_cuda_backend(int device_index, bool deterministic,
                                           Precision precision) {
  const int count = cuda_device_count();
  if (device_index < 0 || device_index >= count) {
    const std::string seen = count == 0 ? "none is visible: " + cuda_devices_description()
                                        : std::to_string(count) + " are visible";
    fail_input("CUDA device ", device_index, " requested, but ", seen,
               " ---> HINT: use --device cpu, or check CUDA_VISIBLE_DEVICES and the ranks ",
               "per node");
  }
  return std::make_unique<CudaBackend>(device_index, deterministic, precision);
}

}  // namespace lockstep::nn
