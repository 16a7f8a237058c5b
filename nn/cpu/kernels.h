// The CPU backend's kernels, one free function per Backend op (same
// arguments, plus the thread pool that parallelises it). CpuBackend only
// forwards to these; see nn/backend.h for shapes and semantics.
#pragma once

#include "nn/cpu/isa_namespace.h"

#include <cstdint>

#include "nn/backend.h"
#include "nn/cpu/thread_pool.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {

// conv.cpp; winograd: 3x3 convolutions with stride 1 may take Winograd's
// F(4x4, 3x3) (conv_winograd.cpp), which differs from the direct
// convolution by rounding.
void conv2d_forward(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y, bool winograd);
void conv2d_backward_data(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx, bool winograd);
void conv2d_backward_filter(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                            const float* dy, float* dw, float* db, bool winograd);
// The passes of g that the three ops above run on Winograd when `winograd`
// is true (decided here alone: a bf16 backend hands these passes to them).
struct WinogradPasses {
  bool forward = false, backward_data = false, backward_filter = false;
};
WinogradPasses winograd_passes(const Conv2dGeometry& g);
// conv2d_forward and conv2d_backward_filter on Winograd with x mapped as it
// is read (Backend::conv2d_maps_input): only for the geometries whose
// forward and weight-gradient passes winograd_passes gives (unchecked here:
// the backend checks once).
void conv2d_forward_mapped(ThreadPool& pool, const Conv2dGeometry& g, const ConvInputMap& map,
                           const float* x, const float* w, const float* b, float* y);
void conv2d_backward_filter_mapped(ThreadPool& pool, const Conv2dGeometry& g,
                                   const ConvInputMap& map, const float* x, const float* dy,
                                   float* dw, float* db);

// conv_bf16.cpp, conv_bf16_filter.cpp: the same ops with the inputs of
// every product rounded to bf16 (gemm_bf16.h); dot: on vdpbf16ps.
void conv2d_forward_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x, const float* w,
                         const float* b, float* y, bool dot);
void conv2d_backward_data_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* w,
                               const float* dy, float* dx, bool dot);
void conv2d_backward_filter_bf16(ThreadPool& pool, const Conv2dGeometry& g, const float* x,
                                 const float* dy, float* dw, float* db, bool dot);
void gemm_bf16_op(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                  float alpha, const float* a, const float* b, float beta, float* c, bool dot);

// pool.cpp
void maxpool2d_forward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, float* y);
void maxpool2d_backward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, const float* dy,
                        float* dx);

// avg_pool.cpp
void avgpool2d_forward(ThreadPool& pool, const Pool2dGeometry& g, const float* x, float* y);
void avgpool2d_backward(ThreadPool& pool, const Pool2dGeometry& g, const float* dy, float* dx);
void row_mean_forward(ThreadPool& pool, int64_t rows, int64_t cols, const float* x, float* y);
void row_mean_backward(ThreadPool& pool, int64_t rows, int64_t cols, const float* dy, float* dx);
void channel_pad_forward(ThreadPool& pool, const ChannelPadGeometry& g, const float* x, float* y);
void channel_pad_backward(ThreadPool& pool, const ChannelPadGeometry& g, const float* dy,
                          float* dx);

// add.cpp
void add_forward(ThreadPool& pool, int64_t n, const float* a, const float* b, bool relu, float* y);

// batchnorm.cpp
void batchnorm_stats(ThreadPool& pool, const BatchNormGeometry& g, const float* x, double* sum,
                     double* sumsq);
// add null: batchnorm_apply; otherwise batchnorm_apply_add.
void batchnorm_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                     const float* coef, const float* add, bool relu, float* y);
// add null: batchnorm_train_forward; otherwise batchnorm_train_forward_add.
void batchnorm_train_forward(ThreadPool& pool, const BatchNormGeometry& g,
                             const BatchNormTrainState& s, const float* x, const float* add,
                             bool relu, float* y);
void batchnorm_backward_sums(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                             const float* y, const float* dy, const float* coef, double* sum_dy,
                             double* sum_dy_xhat);
void batchnorm_backward_apply(ThreadPool& pool, const BatchNormGeometry& g, const float* x,
                              const float* y, const float* dy, const float* coef, float* dx);
void batchnorm_train_backward(ThreadPool& pool, const BatchNormGeometry& g,
                              const BatchNormTrainState& s, const float* x, const float* y,
                              const float* dy, float* dweight, float* dbias, float* dx);
void batchnorm_eval_coef(int64_t channels, const BatchNormTrainState& s);

// elementwise.cpp
void relu_forward(ThreadPool& pool, int64_t n, const float* x, float* y);
void relu_backward(ThreadPool& pool, int64_t n, const float* y, const float* dy, float* dx);
void relu_backward_accumulate(ThreadPool& pool, int64_t n, const float* y, const float* dy,
                              float* dx);
void dropout_forward(ThreadPool& pool, const DropoutGeometry& g, const int64_t* sample_ids,
                     const float* x, float* y, float* mask);
void dropout_backward(ThreadPool& pool, const DropoutGeometry& g, const float* mask,
                      const float* dy, float* dx);
void fill(ThreadPool& pool, int64_t n, float value, float* x);
void scale(ThreadPool& pool, int64_t n, float alpha, float* x);
void axpy(ThreadPool& pool, int64_t n, float alpha, const float* x, float* y);
void copy(ThreadPool& pool, int64_t n, const float* src, float* dst);
bool any_non_finite(int64_t n, const float* x);

// gather.cpp
void gather_batch(ThreadPool& pool, const GatherGeometry& g, const int64_t* ids,
                  const uint8_t* images, const int32_t* labels, const float* table, float* y,
                  int32_t* batch_labels);

// dense.cpp
void gemm(ThreadPool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c);
void add_row_bias(ThreadPool& pool, int64_t rows, int64_t cols, const float* bias, float* y);
void sum_rows(ThreadPool& pool, int64_t rows, int64_t cols, const float* dy, float* db);

// softmax_loss.cpp
void log_softmax_forward(ThreadPool& pool, int64_t rows, int64_t cols, const float* x, float* y);
void log_softmax_backward(ThreadPool& pool, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx);
// bad_labels null: a label outside [0, cols) is an InputError; otherwise
// such rows add nothing, get a zero gradient and are counted there.
LossStats nll_loss(ThreadPool& pool, int64_t rows, int64_t cols, const float* logp,
                   const int32_t* labels, float grad_scale, float* dlogp,
                   int64_t* bad_labels = nullptr);
LossStats softmax_cross_entropy(ThreadPool& pool, int64_t rows, int64_t cols, const float* logits,
                                const int32_t* labels, float grad_scale, float* dlogits,
                                float label_smoothing, int64_t* bad_labels = nullptr);

// optimizers.cpp
void sgd_update(ThreadPool& pool, int64_t n, const SgdParams& p, float* w, const float* grad,
                float* velocity);
void adam_update(ThreadPool& pool, int64_t n, const AdamParams& p, float* w, const float* grad,
                 float* m, float* v);

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
