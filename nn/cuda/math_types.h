// The math types the CUDA backend uses for each precision in its convolutions and GEMMs:
//   fp32:       float32 tensors, CUDNN_FMA_MATH, cublasSgemm (no TF32): the
//               CPU backend's results to float32 rounding. The default.
//   bf16, fp16: inputs rounded to 16 bits (round to nearest even), products
//               accumulated in float32 on tensor cores (cuDNN: 16-bit tensor
//               descriptors, float32 compute type, CUDNN_TENSOR_OP_MATH;
//               cuBLAS: cublasGemmEx, CUBLAS_COMPUTE_32F); outputs are
//               float32 again. Every other op stays float32, as under
//               PyTorch's autocast; tensors and parameters remain float32.
// CUDA-free, so that app/ and the tests can name it in every build. The
// enumeration itself is nn/precision.h's.
#pragma once

#include "nn/cuda/algorithm_choice.h"
#include "nn/precision.h"

namespace lockstep::nn::cuda {

// The math type of the convolution descriptors (and so of the cuDNN
// results that may be chosen: nn/cuda/algorithm_choice.h).
inline ConvMath conv_math(Precision p) {
  return p == Precision::kFp32 ? ConvMath::kFma : ConvMath::kTensorOp;
}

// What cuDNN's CUDNN_DEFAULT_MATH results are worth beside the descriptor's
// (nn/cuda/algorithm_choice.h): at 16 bits they are algorithms without
// tensor cores, accumulating in float32 all the same; at fp32 they run only
// after every FMA entry and only with the descriptor's CUDNN_FMA_MATH (run as
// DEFAULT they would be TF32).
inline DefaultMathEntries default_math_entries(Precision p) {
  return p == Precision::kFp32 ? DefaultMathEntries::kLastAsDescriptors
                               : DefaultMathEntries::kAsTheyAre;
}

// Bytes per element of convolution and GEMM inputs.
inline int element_bytes(Precision p) {
  return p == Precision::kFp32 ? 4 : 2;
}

}  // namespace lockstep::nn::cuda
