// CpuBackend: the Backend interface over the CPU kernels (nn/cpu/kernels.h)
// of one instruction set (this file is compiled once per set, see
// isa_namespace.h) and one persistent thread pool. Every op is synchronous:
// it returns when its results are in memory, so synchronize() has nothing
// to wait for.
#include <cstring>
#include <memory>
#include <string>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/cpu/kernels.h"
#include "nn/cpu/thread_pool.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

#define LOCKSTEP_STRINGIFY2(x) #x
#define LOCKSTEP_STRINGIFY(x) LOCKSTEP_STRINGIFY2(x)
constexpr const char* kIsaName = LOCKSTEP_STRINGIFY(LOCKSTEP_CPU_ISA);

// How the convolutions run, chosen once: the dispatch below and kernels()
// read it. fp32 takes Winograd's F(4x4, 3x3) for the passes it applies to
// (winograd_passes) unless the options say direct. bf16 takes its direct
// kernels, but those same passes in fp32 Winograd unless the options say
// direct: where the bf16 peak is twice the FMA peak, 4x fewer
// multiplications at half the rate are as fast or faster (resnet20's 16-
// and 64-channel layers 1.1-1.3x on Zen 4, AlexNet-CIFAR's alike), and
// far closer to exact (rms relative error 4e-7 against bf16's 2.3e-3);
// where bf16 is emulated, resnet20 2.4x faster. Winograd on bf16 operands
// is not offered: F(4x4, 3x3)'s transforms magnify their rounding to
// 2.5e-2, 11x bf16's direct products. The choice is the geometry's alone, the same on
// every CPU, so bf16 keeps the same bits on every instruction set.
enum class ConvMethod { kBf16Direct, kBf16Winograd, kWinograd, kDirect };

ConvMethod conv_method(bool bf16, bool winograd) {
  if (bf16) return winograd ? ConvMethod::kBf16Winograd : ConvMethod::kBf16Direct;
  return winograd ? ConvMethod::kWinograd : ConvMethod::kDirect;
}

const char* describe(ConvMethod method) {
  switch (method) {
    case ConvMethod::kBf16Direct:
      return "bf16 direct convolutions";
    case ConvMethod::kBf16Winograd:
      return "bf16 direct convolutions, fp32 Winograd 3x3 where it applies";
    case ConvMethod::kWinograd:
      return "Winograd 3x3 convolutions";
    case ConvMethod::kDirect:
      break;
  }
  return "direct convolutions";
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(int threads, Precision precision, bool bf16_dot, bool winograd)
      : pool_(threads),
        bf16_(precision == Precision::kBf16),
        dot_(bf16_dot),
        conv_(conv_method(bf16_, winograd)) {}

  Device device() const override { return Device::kCpu; }
  std::string name() const override {
    const int n = pool_.threads();
    const std::string bf16 = !bf16_ ? "" : dot_ ? ", bf16 on vdpbf16ps" : ", bf16 emulated";
    return "cpu (" + std::to_string(n) + (n == 1 ? " thread, " : " threads, ") + kIsaName + bf16 +
           ")";
  }
  KernelChoice kernels() const override {
    return {.label = bf16_ && dot_ ? "avx512_bf16" : kIsaName,
            .convolutions = describe(conv_),
            .bf16_emulated = bf16_ && !dot_};
  }

  void conv2d_forward(const Conv2dGeometry& g, const float* x, const float* w, const float* b,
                      float* y) override {
    g.validate();
    if (bf16_direct(g, &WinogradPasses::forward))
      return cpu::conv2d_forward_bf16(pool_, g, x, w, b, y, dot_);
    cpu::conv2d_forward(pool_, g, x, w, b, y, winograd());
  }
  void conv2d_backward_data(const Conv2dGeometry& g, const float* w, const float* dy,
                            float* dx) override {
    g.validate();
    if (bf16_direct(g, &WinogradPasses::backward_data))
      return cpu::conv2d_backward_data_bf16(pool_, g, w, dy, dx, dot_);
    cpu::conv2d_backward_data(pool_, g, w, dy, dx, winograd());
  }
  void conv2d_backward_filter(const Conv2dGeometry& g, const float* x, const float* dy, float* dw,
                              float* db) override {
    g.validate();
    if (bf16_direct(g, &WinogradPasses::backward_filter))
      return cpu::conv2d_backward_filter_bf16(pool_, g, x, dy, dw, db, dot_);
    cpu::conv2d_backward_filter(pool_, g, x, dy, dw, db, winograd());
  }
  // Where both passes that read x run on fp32 Winograd, whose strips map
  // the channels as they transpose them (bf16 runs those passes there too).
  bool conv2d_maps_input(const Conv2dGeometry& g) const override {
    const WinogradPasses passes = winograd_passes(g);
    return winograd() && passes.forward && passes.backward_filter;
  }
  void conv2d_forward_mapped(const Conv2dGeometry& g, const ConvInputMap& map, const float* x,
                             const float* w, const float* b, float* y) override {
    g.validate();
    LOCKSTEP_CHECK(conv2d_maps_input(g), name(), " does not map this convolution's input");
    cpu::conv2d_forward_mapped(pool_, g, map, x, w, b, y);
  }
  void conv2d_backward_filter_mapped(const Conv2dGeometry& g, const ConvInputMap& map,
                                     const float* x, const float* dy, float* dw,
                                     float* db) override {
    g.validate();
    LOCKSTEP_CHECK(conv2d_maps_input(g), name(), " does not map this convolution's input");
    cpu::conv2d_backward_filter_mapped(pool_, g, map, x, dy, dw, db);
  }

  void maxpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) override {
    g.validate();
    cpu::maxpool2d_forward(pool_, g, x, y);
  }
  void maxpool2d_backward(const Pool2dGeometry& g, const float* x, const float* /*y*/,
                          const float* dy, float* dx) override {
    g.validate();
    cpu::maxpool2d_backward(pool_, g, x, dy, dx);
  }

  void avgpool2d_forward(const Pool2dGeometry& g, const float* x, float* y) override {
    g.validate();
    cpu::avgpool2d_forward(pool_, g, x, y);
  }
  void avgpool2d_backward(const Pool2dGeometry& g, const float* dy, float* dx) override {
    g.validate();
    cpu::avgpool2d_backward(pool_, g, dy, dx);
  }
  void row_mean_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    cpu::row_mean_forward(pool_, rows, cols, x, y);
  }
  void row_mean_backward(int64_t rows, int64_t cols, const float* dy, float* dx) override {
    cpu::row_mean_backward(pool_, rows, cols, dy, dx);
  }
  void channel_pad_forward(const ChannelPadGeometry& g, const float* x, float* y) override {
    cpu::channel_pad_forward(pool_, g, x, y);
  }
  void channel_pad_backward(const ChannelPadGeometry& g, const float* dy, float* dx) override {
    cpu::channel_pad_backward(pool_, g, dy, dx);
  }

  void batchnorm_stats(const BatchNormGeometry& g, const float* x, double* sum,
                       double* sumsq) override {
    cpu::batchnorm_stats(pool_, g, x, sum, sumsq);
  }
  void batchnorm_apply(const BatchNormGeometry& g, const float* x, const float* coef, bool relu,
                       float* y) override {
    cpu::batchnorm_apply(pool_, g, x, coef, nullptr, relu, y);
  }
  void batchnorm_apply_add(const BatchNormGeometry& g, const float* x, const float* coef,
                           const float* add, bool relu, float* y) override {
    cpu::batchnorm_apply(pool_, g, x, coef, add, relu, y);
  }
  void batchnorm_backward_sums(const BatchNormGeometry& g, const float* x, const float* y,
                               const float* dy, const float* coef, double* sum_dy,
                               double* sum_dy_xhat) override {
    cpu::batchnorm_backward_sums(pool_, g, x, y, dy, coef, sum_dy, sum_dy_xhat);
  }
  void batchnorm_backward_apply(const BatchNormGeometry& g, const float* x, const float* y,
                                const float* dy, const float* coef, float* dx) override {
    cpu::batchnorm_backward_apply(pool_, g, x, y, dy, coef, dx);
  }

  void batchnorm_train_forward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                               const float* x, bool relu, float* y) override {
    cpu::batchnorm_train_forward(pool_, g, s, x, nullptr, relu, y);
  }
  void batchnorm_train_forward_add(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                   const float* x, const float* add, bool relu, float* y) override {
    cpu::batchnorm_train_forward(pool_, g, s, x, add, relu, y);
  }
  void batchnorm_train_backward(const BatchNormGeometry& g, const BatchNormTrainState& s,
                                const float* x, const float* y, const float* dy, float* dweight,
                                float* dbias, float* dx) override {
    cpu::batchnorm_train_backward(pool_, g, s, x, y, dy, dweight, dbias, dx);
  }
  void batchnorm_eval_coef(int64_t channels, const BatchNormTrainState& s) override {
    cpu::batchnorm_eval_coef(channels, s);
  }
  void relu_forward(int64_t n, const float* x, float* y) override {
    cpu::relu_forward(pool_, n, x, y);
  }
  void relu_backward(int64_t n, const float* y, const float* dy, float* dx) override {
    cpu::relu_backward(pool_, n, y, dy, dx);
  }
  void relu_backward_accumulate(int64_t n, const float* y, const float* dy, float* dx) override {
    cpu::relu_backward_accumulate(pool_, n, y, dy, dx);
  }

  void add_forward(int64_t n, const float* a, const float* b, bool relu, float* y) override {
    cpu::add_forward(pool_, n, a, b, relu, y);
  }

  void dropout_forward(const DropoutGeometry& g, const int64_t* sample_ids, const float* x,
                       float* y, float* mask) override {
    LOCKSTEP_CHECK(g.p >= 0.0f && g.p <= 1.0f, "dropout probability ", g.p, " not in [0, 1]");
    cpu::dropout_forward(pool_, g, sample_ids, x, y, mask);
  }
  void dropout_forward_device_ids(const DropoutGeometry& g, const int64_t* sample_ids,
                                  const float* x, float* y, float* mask) override {
    dropout_forward(g, sample_ids, x, y, mask);  // the backend's memory is the host's
  }
  void dropout_backward(const DropoutGeometry& g, const float* mask, const float* dy,
                        float* dx) override {
    cpu::dropout_backward(pool_, g, mask, dy, dx);
  }

  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    if (bf16_)
      return cpu::gemm_bf16_op(pool_, trans_a, trans_b, m, n, k, alpha, a, b, beta, c, dot_);
    cpu::gemm(pool_, trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  void add_row_bias(int64_t rows, int64_t cols, const float* bias, float* y) override {
    cpu::add_row_bias(pool_, rows, cols, bias, y);
  }
  void sum_rows(int64_t rows, int64_t cols, const float* dy, float* db) override {
    cpu::sum_rows(pool_, rows, cols, dy, db);
  }

  void log_softmax_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    cpu::log_softmax_forward(pool_, rows, cols, x, y);
  }
  void log_softmax_backward(int64_t rows, int64_t cols, const float* y, const float* dy,
                            float* dx) override {
    cpu::log_softmax_backward(pool_, rows, cols, y, dy, dx);
  }
  LossStats nll_loss(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                     float grad_scale, float* dlogp) override {
    return cpu::nll_loss(pool_, rows, cols, logp, labels, grad_scale, dlogp);
  }
  LossStats softmax_cross_entropy(int64_t rows, int64_t cols, const float* logits,
                                  const int32_t* labels, float grad_scale, float* dlogits,
                                  float label_smoothing) override {
    return cpu::softmax_cross_entropy(pool_, rows, cols, logits, labels, grad_scale, dlogits,
                                      label_smoothing);
  }
  void nll_loss_accumulate(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                           float grad_scale, float* dlogp, LossTotals* totals) override {
    int64_t bad = 0;
    const LossStats s = cpu::nll_loss(pool_, rows, cols, logp, labels, grad_scale, dlogp, &bad);
    add_batch_loss(s.loss_sum, s.correct, s.count, bad, *totals);
  }
  void softmax_cross_entropy_accumulate(int64_t rows, int64_t cols, const float* logits,
                                        const int32_t* labels, float grad_scale, float* dlogits,
                                        float label_smoothing, LossTotals* totals) override {
    int64_t bad = 0;
    const LossStats s = cpu::softmax_cross_entropy(pool_, rows, cols, logits, labels, grad_scale,
                                                   dlogits, label_smoothing, &bad);
    add_batch_loss(s.loss_sum, s.correct, s.count, bad, *totals);
  }

  void sgd_update(int64_t n, const SgdParams& p, float* w, const float* grad,
                  float* velocity) override {
    cpu::sgd_update(pool_, n, p, w, grad, velocity);
  }
  void adam_update(int64_t n, const AdamParams& p, float* w, const float* grad, float* m,
                   float* v) override {
    cpu::adam_update(pool_, n, p, w, grad, m, v);
  }
  void fill(int64_t n, float value, float* x) override { cpu::fill(pool_, n, value, x); }
  void scale(int64_t n, float alpha, float* x) override { cpu::scale(pool_, n, alpha, x); }
  void axpy(int64_t n, float alpha, const float* x, float* y) override {
    cpu::axpy(pool_, n, alpha, x, y);
  }
  void copy(int64_t n, const float* src, float* dst) override { cpu::copy(pool_, n, src, dst); }
  bool any_non_finite(std::span<const ConstFloats> arrays) override {
    for (const ConstFloats& a : arrays) {
      if (cpu::any_non_finite(a.n, a.data)) return true;
    }
    return false;
  }
  void gather_batch(const GatherGeometry& g, const int64_t* ids, const uint8_t* images,
                    const int32_t* labels, const float* table, float* y,
                    int32_t* batch_labels) override {
    cpu::gather_batch(pool_, g, ids, images, labels, table, y, batch_labels);
  }

  void upload(const void* host, void* dst, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, host, bytes);
  }
  void download(const void* src, void* host, size_t bytes) override {
    if (bytes > 0) std::memcpy(host, src, bytes);
  }
  void synchronize() override {}

 private:
  cpu::ThreadPool pool_;
  bool bf16_ = false;  // bf16 inputs to convolutions and gemm
  bool dot_ = false;   // on vdpbf16ps
  ConvMethod conv_;

  bool winograd() const {
    return conv_ == ConvMethod::kWinograd || conv_ == ConvMethod::kBf16Winograd;
  }
  // Whether this pass of g runs on the bf16 direct kernels.
  bool bf16_direct(const Conv2dGeometry& g, bool WinogradPasses::*pass) const {
    if (conv_ == ConvMethod::kBf16Direct) return true;
    return conv_ == ConvMethod::kBf16Winograd && !(winograd_passes(g).*pass);
  }
};

}  // namespace

std::unique_ptr<Backend> make_isa_backend(int threads, Precision precision, bool bf16_dot,
                                          bool winograd) {
  return std::make_unique<CpuBackend>(threads, precision, bf16_dot, winograd);
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
