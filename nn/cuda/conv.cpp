// Convolutions on CUDA through cuDNN: the descriptors and the algorithm of
// each shape and direction come from the DeviceContext's cache; the bias is
// added with cudnnAddTensor and its gradient summed with
// cudnnConvolutionBackwardBias. Outputs are overwritten (beta = 0).
#include "nn/cuda/kernels.h"

namespace lockstep::nn::cuda {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

}  // namespace

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void conv2d_forward(DeviceContext& ctx, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y) {
  if (g.batch == 0) return;
  ConvPlan& p = ctx.conv_plan(g);
  const auto algo = ctx.forward_algorithm(g, p);
  void* ws = ctx.workspace(algo.workspace_bytes);
  CUDNN_CHECK(cudnnConvolutionForward(ctx.cudnn(), &kOne, p.x.get(), x, p.w.get(), w, p.conv.get(),
                                      algo.algo, ws, algo.workspace_bytes, &kZero, p.y.get(), y));
  if (b != nullptr) {
    CUDNN_CHECK(cudnnAddTensor(ctx.cudnn(), &kOne, p.bias.get(), b, &kOne, p.y.get(), y));
  }
}

// dy: (N, K, P, Q), w: (K, C, R, S) -> dx: (N, C, H, W)
void conv2d_backward_data(DeviceContext& ctx, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx) {
  if (g.batch == 0) return;
  ConvPlan& p = ctx.conv_plan(g);
  const auto algo = ctx.backward_data_algorithm(g, p);
  void* ws = ctx.workspace(algo.workspace_bytes);
  CUDNN_CHECK(cudnnConvolutionBackwardData(ctx.cudnn(), &kOne, p.w.get(), w, p.y.get(), dy,
                                           p.conv.get(), algo.algo, ws, algo.workspace_bytes,
                                           &kZero, p.x.get(), dx));
}

// x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) or null
void conv2d_backward_filter(DeviceContext& ctx, const Conv2dGeometry& g, const float* x,
                            const float* dy, float* dw, float* db) {
  if (g.batch == 0) {  // no samples: the gradients are zero
    fill(ctx, g.out_channels * g.in_channels * g.kernel_h * g.kernel_w, 0.0f, dw);
    if (db != nullptr) fill(ctx, g.out_channels, 0.0f, db);
    return;
  }
  ConvPlan& p = ctx.conv_plan(g);
  const auto algo = ctx.backward_filter_algorithm(g, p);
  void* ws = ctx.workspace(algo.workspace_bytes);
  CUDNN_CHECK(cudnnConvolutionBackwardFilter(ctx.cudnn(), &kOne, p.x.get(), x, p.y.get(), dy,
                                             p.conv.get(), algo.algo, ws, algo.workspace_bytes,
                                             &kZero, p.w.get(), dw));
  if (db != nullptr) {
    CUDNN_CHECK(
        cudnnConvolutionBackwardBias(ctx.cudnn(), &kOne, p.y.get(), dy, &kZero, p.bias.get(), db));
  }
}

}  // namespace lockstep::nn::cuda
