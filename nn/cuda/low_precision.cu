// Conversions between the backend's float32 tensors and the 16-bit operands
// of bf16/fp16 convolutions and GEMMs (nn/cuda/precision.h): round to
// nearest even on the way down (PyTorch's .to(torch.bfloat16/half)), exact
// on the way up.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// src: (n) float -> dst: (n) 16-bit
template <typename Low>
__global__ void to_low_kernel(int64_t n, const float* src, Low* dst) {
  CUDA_KERNEL_LOOP(i, n) {
    if constexpr (std::is_same_v<Low, __nv_bfloat16>) {
      dst[i] = __float2bfloat16_rn(src[i]);
    } else {
      dst[i] = __float2half_rn(src[i]);
    }
  }
}

// src: (n) 16-bit -> dst: (n) float
template <typename Low>
__global__ void from_low_kernel(int64_t n, const Low* src, float* dst) {
  CUDA_KERNEL_LOOP(i, n) {
    if constexpr (std::is_same_v<Low, __nv_bfloat16>) {
      dst[i] = __bfloat162float(src[i]);
    } else {
      dst[i] = __half2float(src[i]);
    }
  }
}

}  // namespace

void* to_low_precision(DeviceContext& ctx, Scratch slot, int64_t n, const float* src) {
  LOCKSTEP_CHECK(ctx.precision() != Precision::kFp32, "to_low_precision at fp32");
  uint16_t* dst = ctx.scratch<uint16_t>(slot, std::max<int64_t>(n, 1));
  if (ctx.precision() == Precision::kBf16) {
    launch(to_low_kernel<__nv_bfloat16>, n, ctx.stream(), n, src,
           reinterpret_cast<__nv_bfloat16*>(dst));
  } else {
    launch(to_low_kernel<__half>, n, ctx.stream(), n, src, reinterpret_cast<__half*>(dst));
  }
  return dst;
}

void from_low_precision(DeviceContext& ctx, int64_t n, const void* src, float* dst) {
  LOCKSTEP_CHECK(ctx.precision() != Precision::kFp32, "from_low_precision at fp32");
  if (ctx.precision() == Precision::kBf16) {
    launch(from_low_kernel<__nv_bfloat16>, n, ctx.stream(), n,
           static_cast<const __nv_bfloat16*>(src), dst);
  } else {
    launch(from_low_kernel<__half>, n, ctx.stream(), n, static_cast<const __half*>(src), dst);
  }
}

}  // namespace lockstep::nn::cuda
