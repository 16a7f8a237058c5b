// The arithmetic precision of the CUDA backend's convolutions and GEMMs:
//   fp32:       float32 tensors, CUDNN_FMA_MATH, cublasSgemm (no TF32): the
//               CPU backend's results to float32 rounding. The default.
//   bf16, fp16: inputs rounded to 16 bits (round to nearest even), products
//               accumulated in float32 on tensor cores (cuDNN: 16-bit tensor
//               descriptors, float32 compute type, CUDNN_TENSOR_OP_MATH;
//               cuBLAS: cublasGemmEx, CUBLAS_COMPUTE_32F); outputs are
//               float32 again. Every other op stays float32, as under
//               PyTorch's autocast; tensors and parameters remain float32.
// CUDA-free, so that app/ and the tests can name it in every build.
#pragma once

#include <optional>
#include <string_view>

#include "common/enum_table.h"
#include "nn/cuda/algorithm_choice.h"

namespace lockstep::nn::cuda {

enum class Precision { kFp32, kBf16, kFp16 };

inline constexpr EnumEntry<Precision, const char*> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};

inline const char* to_string(Precision p) {
  return value_of(kPrecisionNames, p).value_or("?");
}

// "fp32" | "bf16" | "fp16"; nothing otherwise.
inline std::optional<Precision> parse_precision(std::string_view text) {
  return key_of(kPrecisionNames, text);
}

// The math type of the convolution descriptors (and so of the cuDNN
// results that may be chosen: nn/cuda/algorithm_choice.h).
inline ConvMath conv_math(Precision p) {
  return p == Precision::kFp32 ? ConvMath::kFma : ConvMath::kTensorOp;
}

// Bytes per element of convolution and GEMM inputs.
inline int element_bytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

}  // namespace lockstep::nn::cuda
