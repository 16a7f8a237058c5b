// Convolutions on CUDA through cuDNN: the descriptors and the algorithm of
// each shape and direction come from the DeviceContext's cache; the bias is
// added with cudnnAddTensor and its gradient summed with
// cudnnConvolutionBackwardBias, both in float32. Outputs are overwritten
// (beta = 0). At bf16/fp16 precision the operands are rounded to 16 bits
// into scratch buffers, cuDNN accumulates in float32 on tensor cores, and
// the 16-bit result is widened into the float32 output.
#include "nn/cuda/kernels.h"

namespace lockstep::nn::cuda {
namespace {

constexpr float kOne = 1.0f;
constexpr float kZero = 0.0f;

int64_t numel_x(const Conv2dGeometry& g) {
  return g.batch * g.in_channels * g.in_h * g.in_w;
}
int64_t numel_w(const Conv2dGeometry& g) {
  return g.out_channels * g.in_channels * g.kernel_h * g.kernel_w;
}
int64_t numel_y(const Conv2dGeometry& g) {
  return g.batch * g.out_channels * g.out_h() * g.out_w();
}

// An operand in the context's precision: the float32 tensor itself at fp32,
// else its 16-bit copy in scratch buffer `slot`.
const void* operand(DeviceContext& ctx, Scratch slot, int64_t n, const float* x) {
  return ctx.precision() == Precision::kFp32 ? x : to_low_precision(ctx, slot, n, x);
}

// Where an op writes its result: `out` at fp32, else a 16-bit scratch buffer.
void* result(DeviceContext& ctx, int64_t n, float* out) {
  if (ctx.precision() == Precision::kFp32) return out;
  return ctx.scratch<uint16_t>(Scratch::kLowC, n);
}

void widen(DeviceContext& ctx, int64_t n, const void* low, float* out) {
  if (ctx.precision() != Precision::kFp32) from_low_precision(ctx, n, low, out);
}

// An operand of a convolution call: its descriptor, element count and
// float32 data.
template <typename Desc, typename T>
struct Operand {
  Desc desc;
  int64_t n;
  T* data;
};

// out = op(a, b), one cuDNN convolution call (named `what` in errors) in the
// context's precision: a and b rounded into scratch buffers kLowA and kLowB,
// the result widened into out.
template <typename DescA, typename DescB, typename DescOut, typename Algo>
void run(DeviceContext& ctx, const char* what,
         cudnnStatus_t (*op)(cudnnHandle_t, const void*, DescA, const void*, DescB, const void*,
                             cudnnConvolutionDescriptor_t, Algo, void*, size_t, const void*,
                             DescOut, void*),
         const ConvPlan& p, const ConvAlgorithm<Algo>& algo, Operand<DescA, const float> a,
         Operand<DescB, const float> b, Operand<DescOut, float> out) {
  const void* al = operand(ctx, Scratch::kLowA, a.n, a.data);
  const void* bl = operand(ctx, Scratch::kLowB, b.n, b.data);
  void* outl = result(ctx, out.n, out.data);
  void* ws = ctx.workspace(algo.workspace_bytes);
  // The descriptor is shared by the three directions: the chosen entry's math type.
  CUDNN_CHECK(cudnnSetConvolutionMathType(p.conv.get(), algo.math));
  LOCKSTEP_LIBRARY_CHECK(op(ctx.cudnn(), &kOne, a.desc, al, b.desc, bl, p.conv.get(), algo.algo, ws,
                            algo.workspace_bytes, &kZero, out.desc, outl),
                         what, CUDNN_STATUS_SUCCESS, throw_cudnn_error);
  widen(ctx, out.n, outl, out.data);
}

}  // namespace

// x: (N, C, H, W), w: (K, C, R, S), b: (K) or null -> y: (N, K, P, Q)
void conv2d_forward(DeviceContext& ctx, const Conv2dGeometry& g, const float* x, const float* w,
                    const float* b, float* y) {
  if (g.batch == 0) return;
  ConvPlan& p = ctx.conv_plan(g);
  run(ctx, "cudnnConvolutionForward", cudnnConvolutionForward, p, p.forward,
      {p.x.get(), numel_x(g), x}, {p.w.get(), numel_w(g), w}, {p.y.get(), numel_y(g), y});
  if (b != nullptr) {
    CUDNN_CHECK(cudnnAddTensor(ctx.cudnn(), &kOne, p.bias.get(), b, &kOne, p.y32.get(), y));
  }
}

// dy: (N, K, P, Q), w: (K, C, R, S) -> dx: (N, C, H, W)
void conv2d_backward_data(DeviceContext& ctx, const Conv2dGeometry& g, const float* w,
                          const float* dy, float* dx) {
  if (g.batch == 0) return;
  ConvPlan& p = ctx.conv_plan(g);
  run(ctx, "cudnnConvolutionBackwardData", cudnnConvolutionBackwardData, p, p.backward_data,
      {p.w.get(), numel_w(g), w}, {p.y.get(), numel_y(g), dy}, {p.x.get(), numel_x(g), dx});
}

// x: (N, C, H, W), dy: (N, K, P, Q) -> dw: (K, C, R, S), db: (K) or null
void conv2d_backward_filter(DeviceContext& ctx, const Conv2dGeometry& g, const float* x,
                            const float* dy, float* dw, float* db) {
  if (g.batch == 0) {  // no samples: the gradients are zero
    fill(ctx, numel_w(g), 0.0f, dw);
    if (db != nullptr) fill(ctx, g.out_channels, 0.0f, db);
    return;
  }
  ConvPlan& p = ctx.conv_plan(g);
  run(ctx, "cudnnConvolutionBackwardFilter", cudnnConvolutionBackwardFilter, p, p.backward_filter,
      {p.x.get(), numel_x(g), x}, {p.y.get(), numel_y(g), dy}, {p.w.get(), numel_w(g), dw});
  if (db != nullptr) {
    CUDNN_CHECK(cudnnConvolutionBackwardBias(ctx.cudnn(), &kOne, p.y32.get(), dy, &kZero,
                                             p.bias.get(), db));
  }
}

}  // namespace lockstep::nn::cuda
