// The CUDA backend's ops, one free function per Backend op, mirroring
// nn/cpu/kernels.h (same arguments, the DeviceContext in place of the thread
// pool). CudaBackend only forwards to these; see nn/backend.h for shapes and
// semantics. Every function queues its work on ctx.stream() and returns;
// those that return values to the host (the losses) wait for them.
//
//   cuDNN:        conv.cpp (convolutions), cudnn_ops.cpp (max-pool forward,
//                 log-softmax)
//   cuBLAS:       dense.cu (gemm)
//   16-bit:       low_precision.cu (conversions for bf16/fp16 precision)
//   own kernels:  pool.cu (max-pool backward), avg_pool.cu (average pooling,
//                 row means, padding shortcut, residual add), batchnorm.cu,
//                 elementwise.cu (ReLU among them), gather.cu (batches of a
//                 resident data set), dense.cu (row bias, column sums),
//                 softmax_loss.cu, optimizers.cu
#pragma once

#include <cstdint>

#include "nn/backend.h"
#include "nn/cuda/device_context.h"

namespace lockstep::nn::cuda {

// conv.cpp
void conv2d_forward(DeviceContext& ctx, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y);
void conv2d_backward_data(DeviceContext& ctx, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx);
void conv2d_backward_filter(DeviceContext& ctx, const Conv2dGeometry& g, const float* x,
                            const float* dy, float* dw, float* db);

// cudnn_ops.cpp
void maxpool2d_forward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x, float* y);
void log_softmax_forward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* x, float* y);
void log_softmax_backward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx);

// pool.cu
void maxpool2d_backward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x,
                        const float* dy, float* dx);

// avg_pool.cu
void avgpool2d_forward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x, float* y);
void avgpool2d_backward(DeviceContext& ctx, const Pool2dGeometry& g, const float* dy, float* dx);
void row_mean_forward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* x, float* y);
void row_mean_backward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* dy, float* dx);
void channel_pad_forward(DeviceContext& ctx, const ChannelPadGeometry& g, const float* x, float* y);
void channel_pad_backward(DeviceContext& ctx, const ChannelPadGeometry& g, const float* dy,
                          float* dx);
void add_forward(DeviceContext& ctx, int64_t n, const float* a, const float* b, bool relu,
                 float* y);

// batchnorm.cu
void batchnorm_stats(DeviceContext& ctx, const BatchNormGeometry& g, const float* x, double* sum,
                     double* sumsq);
// add null: Backend::batchnorm_apply; otherwise batchnorm_apply_add.
void batchnorm_apply(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                     const float* coef, const float* add, bool relu, float* y);
void batchnorm_backward_sums(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                             const float* y, const float* dy, const float* coef, double* sum_dy,
                             double* sum_dy_xhat);
void batchnorm_backward_apply(DeviceContext& ctx, const BatchNormGeometry& g, const float* x,
                              const float* y, const float* dy, const float* coef, float* dx);
// The training passes with the per-channel arithmetic on the device; add
// as batchnorm_apply's.
void batchnorm_train_forward(DeviceContext& ctx, const BatchNormGeometry& g,
                             const BatchNormTrainState& s, const float* x, const float* add,
                             bool relu, float* y);
void batchnorm_train_backward(DeviceContext& ctx, const BatchNormGeometry& g,
                              const BatchNormTrainState& s, const float* x, const float* y,
                              const float* dy, float* dweight, float* dbias, float* dx);
void batchnorm_eval_coef(DeviceContext& ctx, int64_t channels, const BatchNormTrainState& s);

// elementwise.cu
void relu_forward(DeviceContext& ctx, int64_t n, const float* x, float* y);
void relu_backward(DeviceContext& ctx, int64_t n, const float* y, const float* dy, float* dx);
void dropout_forward(DeviceContext& ctx, const DropoutGeometry& g, const int64_t* sample_ids,
                     const float* x, float* y, float* mask);
// The same with sample_ids in device memory (nothing copied).
void dropout_forward_device_ids(DeviceContext& ctx, const DropoutGeometry& g,
                                const int64_t* sample_ids, const float* x, float* y, float* mask);
void dropout_backward(DeviceContext& ctx, const DropoutGeometry& g, const float* mask,
                      const float* dy, float* dx);
void fill(DeviceContext& ctx, int64_t n, float value, float* x);
bool any_non_finite(DeviceContext& ctx, std::span<const ConstFloats> arrays);
void scale(DeviceContext& ctx, int64_t n, float alpha, float* x);
void axpy(DeviceContext& ctx, int64_t n, float alpha, const float* x, float* y);
// dx += dy * (y > 0)
void relu_backward_accumulate(DeviceContext& ctx, int64_t n, const float* y, const float* dy,
                              float* dx);
void copy(DeviceContext& ctx, int64_t n, const float* src, float* dst);

// gather.cu
void gather_batch(DeviceContext& ctx, const GatherGeometry& g, const int64_t* ids,
                  const uint8_t* images, const int32_t* labels, const float* table, float* y,
                  int32_t* batch_labels);

// dense.cu
void gemm(DeviceContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c);
void add_row_bias(DeviceContext& ctx, int64_t rows, int64_t cols, const float* bias, float* y);
void sum_rows(DeviceContext& ctx, int64_t rows, int64_t cols, const float* dy, float* db);

// softmax_loss.cu
LossStats nll_loss(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
                   const int32_t* labels, float grad_scale, float* dlogp);
LossStats softmax_cross_entropy(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float grad_scale, float* dlogits,
                                float label_smoothing);
// The same rows, added to totals (device memory) by a one-thread kernel.
void nll_loss_accumulate(DeviceContext& ctx, int64_t rows, int64_t cols, const float* logp,
                         const int32_t* labels, float grad_scale, float* dlogp, LossTotals* totals);
void softmax_cross_entropy_accumulate(DeviceContext& ctx, int64_t rows, int64_t cols,
                                      const float* logits, const int32_t* labels, float grad_scale,
                                      float* dlogits, float label_smoothing, LossTotals* totals);

// low_precision.cu (bf16/fp16 precision only): src (n floats) rounded to
// the context's 16-bit type into scratch buffer `slot`, which is returned;
// and back from 16 bits into float32.
void* to_low_precision(DeviceContext& ctx, Scratch slot, int64_t n, const float* src);
void from_low_precision(DeviceContext& ctx, int64_t n, const void* src, float* dst);

// optimizers.cu
void sgd_update(DeviceContext& ctx, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity);
void adam_update(DeviceContext& ctx, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v);

}  // namespace lockstep::nn::cuda
