// Conversions between the backend's float32 tensors and the 16-bit operands
// of bf16/fp16 convolutions and GEMMs (nn/cuda/math_types.h): round to
// nearest even on the way down (PyTorch's .to(torch.bfloat16/half)), exact
// on the way up.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// src: (n) -> dst: (n), float to a 16-bit type or back. The types'
// constructors from float are __float2bfloat16 and __float2half, which
// round to nearest even.
template <typename From, typename To>
__global__ void convert_kernel(int64_t n, const From* src, To* dst) {
  CUDA_KERNEL_LOOP(i, n) {
    dst[i] = static_cast<To>(src[i]);
  }
}

// f(Low{}) with the context's 16-bit type (__nv_bfloat16 or __half).
template <typename F>
void with_low_type(const DeviceContext& ctx, const char* what, F f) {
  LOCKSTEP_CHECK(ctx.precision() != Precision::kFp32, what, " at fp32");
  if (ctx.precision() == Precision::kBf16) return f(__nv_bfloat16{});
  f(__half{});
}

}  // namespace

void* to_low_precision(DeviceContext& ctx, Scratch slot, int64_t n, const float* src) {
  uint16_t* dst = nullptr;
  with_low_type(ctx, "to_low_precision", [&](auto low) {
    using Low = decltype(low);
    dst = ctx.scratch<uint16_t>(slot, std::max<int64_t>(n, 1));
    launch(convert_kernel<float, Low>, n, ctx.stream(), n, src, reinterpret_cast<Low*>(dst));
  });
  return dst;
}

void from_low_precision(DeviceContext& ctx, int64_t n, const void* src, float* dst) {
  with_low_type(ctx, "from_low_precision", [&](auto low) {
    using Low = decltype(low);
    launch(convert_kernel<Low, float>, n, ctx.stream(), n, static_cast<const Low*>(src), dst);
  });
}

}  // namespace lockstep::nn::cuda
