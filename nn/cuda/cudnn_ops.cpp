// Max-pool forward and log-softmax on CUDA through cuDNN. Descriptors are
// cheap host objects, made per call. NaN propagates as on the CPU.
// (Max-pool *backward* is our own kernel, pool.cu: cuDNN does not document
// which of tied maxima receives the gradient, and ours must be the first.
// ReLU is ours too, elementwise.cu: cuDNN does not document its backward
// where y is NaN, nor whether its forward keeps -0.0.)
#include "nn/cuda/kernels.h"

namespace lockstep::nn::cuda {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

// x: (N, C, H, W) -> y: (N, C, P, Q); windows without padding, floor mode
void maxpool2d_forward(DeviceContext& ctx, const Pool2dGeometry& g, const float* x, float* y) {
  if (g.batch == 0) return;
  TensorDescriptor xd, yd;
  set_nchw(xd, g.batch, g.channels, g.in_h, g.in_w);
  set_nchw(yd, g.batch, g.channels, g.out_h(), g.out_w());
  PoolingDescriptor pd;
  const int k = to_int(g.kernel, "kernel"), s = to_int(g.stride, "stride");
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(pd.get(), CUDNN_POOLING_MAX_DETERMINISTIC,
                                          CUDNN_PROPAGATE_NAN, k, k, 0, 0, s, s));
  int n = 0, c = 0, p = 0, q = 0;
  CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(pd.get(), xd.get(), &n, &c, &p, &q));
  LOCKSTEP_CHECK(p == g.out_h() && q == g.out_w(), "cuDNN pooling output ", p, "x", q,
                 " differs from ", g.out_h(), "x", g.out_w());
  CUDNN_CHECK(cudnnPoolingForward(ctx.cudnn(), pd.get(), &kOne, xd.get(), x, &kZero, yd.get(), y));
}

// x, y: (rows, cols); y = x - logsumexp(x) per row
void log_softmax_forward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* x, float* y) {
  if (rows == 0 || cols == 0) return;
  TensorDescriptor d;
  set_nchw(d, rows, cols, 1, 1);
  CUDNN_CHECK(cudnnSoftmaxForward(ctx.cudnn(), CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE,
                                  &kOne, d.get(), x, &kZero, d.get(), y));
}

// y, dy, dx: (rows, cols); dx = dy - exp(y) * sum(dy) per row
void log_softmax_backward(DeviceContext& ctx, int64_t rows, int64_t cols, const float* y,
                          const float* dy, float* dx) {
  if (rows == 0 || cols == 0) return;
  TensorDescriptor d;
  set_nchw(d, rows, cols, 1, 1);
  CUDNN_CHECK(cudnnSoftmaxBackward(ctx.cudnn(), CUDNN_SOFTMAX_LOG, CUDNN_SOFTMAX_MODE_INSTANCE,
                                   &kOne, d.get(), y, d.get(), dy, &kZero, d.get(), dx));
}

}  // namespace lockstep::nn::cuda
