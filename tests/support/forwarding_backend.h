// ForwardingBackend: a Backend that hands every op to another one, telling
// on_op(name) first. A test fake derives from it and overrides on_op (to
// count or refuse ops) or the few ops it changes, so a new Backend op is
// forwarded here once, not added to every fake.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "nn/backend.h"

namespace lockstep::testing {

class ForwardingBackend : public nn::Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<nn::Backend> inner) : inner_(std::move(inner)) {}

  nn::Device device() const override { return inner_->device(); }
  std::string name() const override { return inner_->name(); }
  nn::KernelChoice kernels() const override { return inner_->kernels(); }
  void conv2d_forward(const nn::Conv2dGeometry& g, const float* x, const float* w, const float* b,
                      float* y) override {
    on_op("conv2d_forward");
    inner_->conv2d_forward(g, x, w, b, y);
  }
  void conv2d_backward_data(const nn::Conv2dGeometry& g, const float* w, const float* dy,
                            float* dx) override {
    on_op("conv2d_backward_data");
    inner_->conv2d_backward_data(g, w, dy, dx);
  }
  void conv2d_backward_filter(const nn::Conv2dGeometry& g, const float* x, const float* dy,
                              float* dw, float* db) override {
    on_op("conv2d_backward_filter");
    inner_->conv2d_backward_filter(g, x, dy, dw, db);
  }
  bool conv2d_maps_input(const nn::Conv2dGeometry& g) const override {
    return inner_->conv2d_maps_input(g);
  }
  void conv2d_forward_mapped(const nn::Conv2dGeometry& g, const nn::ConvInputMap& map,
                             const float* x, const float* w, const float* b, float* y) override {
    on_op("conv2d_forward_mapped");
    inner_->conv2d_forward_mapped(g, map, x, w, b, y);
  }
  void conv2d_backward_filter_mapped(const nn::Conv2dGeometry& g, const nn::ConvInputMap& map,
                                     const float* x, const float* dy, float* dw,
                                     float* db) override {
    on_op("conv2d_backward_filter_mapped");
    inner_->conv2d_backward_filter_mapped(g, map, x, dy, dw, db);
  }
  void maxpool2d_forward(const nn::Pool2dGeometry& g, const float* x, float* y) override {
    on_op("maxpool2d_forward");
    inner_->maxpool2d_forward(g, x, y);
  }
  void maxpool2d_backward(const nn::Pool2dGeometry& g, const float* x, const float* y,
                          const float* dy, float* dx) override {
    on_op("maxpool2d_backward");
    inner_->maxpool2d_backward(g, x, y, dy, dx);
  }
  void avgpool2d_forward(const nn::Pool2dGeometry& g, const float* x, float* y) override {
    on_op("avgpool2d_forward");
    inner_->avgpool2d_forward(g, x, y);
  }
  void avgpool2d_backward(const nn::Pool2dGeometry& g, const float* dy, float* dx) override {
    on_op("avgpool2d_backward");
    inner_->avgpool2d_backward(g, dy, dx);
  }
  void row_mean_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    on_op("row_mean_forward");
    inner_->row_mean_forward(rows, cols, x, y);
  }
  void row_mean_backward(int64_t rows, int64_t cols, const float* dy, float* dx) override {
    on_op("row_mean_backward");
    inner_->row_mean_backward(rows, cols, dy, dx);
  }
  void channel_pad_forward(const nn::ChannelPadGeometry& g, const float* x, float* y) override {
    on_op("channel_pad_forward");
    inner_->channel_pad_forward(g, x, y);
  }
  void channel_pad_backward(const nn::ChannelPadGeometry& g, const float* dy, float* dx) override {
    on_op("channel_pad_backward");
    inner_->channel_pad_backward(g, dy, dx);
  }
  void batchnorm_stats(const nn::BatchNormGeometry& g, const float* x, double* sum,
                       double* sumsq) override {
    on_op("batchnorm_stats");
    inner_->batchnorm_stats(g, x, sum, sumsq);
  }
  void batchnorm_apply(const nn::BatchNormGeometry& g, const float* x, const float* coef, bool relu,
                       float* y) override {
    on_op("batchnorm_apply");
    inner_->batchnorm_apply(g, x, coef, relu, y);
  }
  void batchnorm_apply_add(const nn::BatchNormGeometry& g, const float* x, const float* coef,
                           const float* add, bool relu, float* y) override {
    on_op("batchnorm_apply_add");
    inner_->batchnorm_apply_add(g, x, coef, add, relu, y);
  }
  void batchnorm_backward_sums(const nn::BatchNormGeometry& g, const float* x, const float* y,
                               const float* dy, const float* coef, double* sum_dy,
                               double* sum_dy_xhat) override {
    on_op("batchnorm_backward_sums");
    inner_->batchnorm_backward_sums(g, x, y, dy, coef, sum_dy, sum_dy_xhat);
  }
  void batchnorm_backward_apply(const nn::BatchNormGeometry& g, const float* x, const float* y,
                                const float* dy, const float* coef, float* dx) override {
    on_op("batchnorm_backward_apply");
    inner_->batchnorm_backward_apply(g, x, y, dy, coef, dx);
  }
  void batchnorm_train_forward(const nn::BatchNormGeometry& g, const nn::BatchNormTrainState& s,
                               const float* x, bool relu, float* y) override {
    on_op("batchnorm_train_forward");
    inner_->batchnorm_train_forward(g, s, x, relu, y);
  }
  void batchnorm_train_forward_add(const nn::BatchNormGeometry& g, const nn::BatchNormTrainState& s,
                                   const float* x, const float* add, bool relu, float* y) override {
    on_op("batchnorm_train_forward_add");
    inner_->batchnorm_train_forward_add(g, s, x, add, relu, y);
  }
  void batchnorm_train_backward(const nn::BatchNormGeometry& g, const nn::BatchNormTrainState& s,
                                const float* x, const float* y, const float* dy, float* dweight,
                                float* dbias, float* dx) override {
    on_op("batchnorm_train_backward");
    inner_->batchnorm_train_backward(g, s, x, y, dy, dweight, dbias, dx);
  }
  void batchnorm_eval_coef(int64_t channels, const nn::BatchNormTrainState& s) override {
    on_op("batchnorm_eval_coef");
    inner_->batchnorm_eval_coef(channels, s);
  }
  void relu_forward(int64_t n, const float* x, float* y) override {
    on_op("relu_forward");
    inner_->relu_forward(n, x, y);
  }
  void relu_backward(int64_t n, const float* y, const float* dy, float* dx) override {
    on_op("relu_backward");
    inner_->relu_backward(n, y, dy, dx);
  }
  void relu_backward_accumulate(int64_t n, const float* y, const float* dy, float* dx) override {
    on_op("relu_backward_accumulate");
    inner_->relu_backward_accumulate(n, y, dy, dx);
  }
  void add_forward(int64_t n, const float* a, const float* b, bool relu, float* y) override {
    on_op("add_forward");
    inner_->add_forward(n, a, b, relu, y);
  }
  void dropout_forward(const nn::DropoutGeometry& g, const int64_t* sample_ids, const float* x,
                       float* y, float* mask) override {
    on_op("dropout_forward");
    inner_->dropout_forward(g, sample_ids, x, y, mask);
  }
  void dropout_forward_device_ids(const nn::DropoutGeometry& g, const int64_t* sample_ids,
                                  const float* x, float* y, float* mask) override {
    on_op("dropout_forward_device_ids");
    inner_->dropout_forward_device_ids(g, sample_ids, x, y, mask);
  }
  void dropout_backward(const nn::DropoutGeometry& g, const float* mask, const float* dy,
                        float* dx) override {
    on_op("dropout_backward");
    inner_->dropout_backward(g, mask, dy, dx);
  }
  void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const float* a, const float* b, float beta, float* c) override {
    on_op("gemm");
    inner_->gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c);
  }
  void add_row_bias(int64_t rows, int64_t cols, const float* bias, float* y) override {
    on_op("add_row_bias");
    inner_->add_row_bias(rows, cols, bias, y);
  }
  void sum_rows(int64_t rows, int64_t cols, const float* dy, float* db) override {
    on_op("sum_rows");
    inner_->sum_rows(rows, cols, dy, db);
  }
  void log_softmax_forward(int64_t rows, int64_t cols, const float* x, float* y) override {
    on_op("log_softmax_forward");
    inner_->log_softmax_forward(rows, cols, x, y);
  }
  void log_softmax_backward(int64_t rows, int64_t cols, const float* y, const float* dy,
                            float* dx) override {
    on_op("log_softmax_backward");
    inner_->log_softmax_backward(rows, cols, y, dy, dx);
  }
  nn::LossStats nll_loss(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                         float grad_scale, float* dlogp) override {
    on_op("nll_loss");
    return inner_->nll_loss(rows, cols, logp, labels, grad_scale, dlogp);
  }
  nn::LossStats softmax_cross_entropy(int64_t rows, int64_t cols, const float* logits,
                                      const int32_t* labels, float grad_scale, float* dlogits,
                                      float label_smoothing) override {
    on_op("softmax_cross_entropy");
    return inner_->softmax_cross_entropy(rows, cols, logits, labels, grad_scale, dlogits,
                                         label_smoothing);
  }
  void nll_loss_accumulate(int64_t rows, int64_t cols, const float* logp, const int32_t* labels,
                           float grad_scale, float* dlogp, nn::LossTotals* totals) override {
    on_op("nll_loss_accumulate");
    inner_->nll_loss_accumulate(rows, cols, logp, labels, grad_scale, dlogp, totals);
  }
  void softmax_cross_entropy_accumulate(int64_t rows, int64_t cols, const float* logits,
                                        const int32_t* labels, float grad_scale, float* dlogits,
                                        float label_smoothing, nn::LossTotals* totals) override {
    on_op("softmax_cross_entropy_accumulate");
    inner_->softmax_cross_entropy_accumulate(rows, cols, logits, labels, grad_scale, dlogits,
                                             label_smoothing, totals);
  }
  void sgd_update(int64_t n, const nn::SgdParams& p, float* w, const float* grad,
                  float* velocity) override {
    on_op("sgd_update");
    inner_->sgd_update(n, p, w, grad, velocity);
  }
  void adam_update(int64_t n, const nn::AdamParams& p, float* w, const float* grad, float* m,
                   float* v) override {
    on_op("adam_update");
    inner_->adam_update(n, p, w, grad, m, v);
  }
  void fill(int64_t n, float value, float* x) override {
    on_op("fill");
    inner_->fill(n, value, x);
  }
  void scale(int64_t n, float alpha, float* x) override {
    on_op("scale");
    inner_->scale(n, alpha, x);
  }
  void axpy(int64_t n, float alpha, const float* x, float* y) override {
    on_op("axpy");
    inner_->axpy(n, alpha, x, y);
  }
  void copy(int64_t n, const float* src, float* dst) override {
    on_op("copy");
    inner_->copy(n, src, dst);
  }
  bool any_non_finite(std::span<const nn::ConstFloats> arrays) override {
    on_op("any_non_finite");
    return inner_->any_non_finite(arrays);
  }
  void gather_batch(const nn::GatherGeometry& g, const int64_t* ids, const uint8_t* images,
                    const int32_t* labels, const float* table, float* y,
                    int32_t* batch_labels) override {
    on_op("gather_batch");
    inner_->gather_batch(g, ids, images, labels, table, y, batch_labels);
  }
  void upload(const void* host, void* dst, size_t bytes) override {
    on_op("upload");
    inner_->upload(host, dst, bytes);
  }
  void download(const void* src, void* host, size_t bytes) override {
    on_op("download");
    inner_->download(src, host, bytes);
  }
  void synchronize() override {
    on_op("synchronize");
    inner_->synchronize();
  }
  nn::HostTraffic host_traffic() const override { return inner_->host_traffic(); }
  void* native_stream() override {
    on_op("native_stream");
    return inner_->native_stream();
  }
  void bind_thread() override {
    on_op("bind_thread");
    inner_->bind_thread();
  }

 protected:
  // Called with the op's name ("conv2d_forward", "copy") before it runs.
  virtual void on_op(std::string_view op) {}

 private:
  std::unique_ptr<nn::Backend> inner_;
};

}  // namespace lockstep::testing
