// Choosing a cuDNN convolution algorithm from the results cuDNN reports
// (cudnnFind* or the cudnnGet*_v7 heuristics), as plain data, so that the
// rule is tested without a GPU (tests/test_cuda_rules.cpp).
//
// cuDNN returns entries for the convolution descriptor's math type and for
// other math types (CUDNN_DEFAULT_MATH, which is TF32 on A100/H100 for
// float32 data). An entry is usable when its math type is the descriptor's;
// at 16 bits also a CUDNN_DEFAULT_MATH entry (an algorithm without a tensor
// core version, as cuDNN reports under CUDNN_TENSOR_OP_MATH: the same
// float32 accumulation, so the same numerics; for small channel counts it
// may be all cuDNN has). The caller sets the descriptor to the chosen
// entry's math type before asking for its workspace and before each call
// (as PyTorch does). The workspace is asked of cuDNN for (descriptor,
// algorithm), not taken from the entry.
//
// CUDA-free: the caller converts cudnnConvolution*AlgoPerf_t into
// AlgorithmCandidate and back.
#pragma once

#include <cstddef>
#include <optional>
#include <span>

#include "common/enum_table.h"

namespace lockstep::nn::cuda {

// The cuDNN math types (cudnnMathType_t).
enum class ConvMath { kDefault, kTensorOp, kTensorOpAllowConversion, kFma };

// One entry of cuDNN's results, fastest first.
struct AlgorithmCandidate {
  int algo = 0;            // cudnnConvolution*Algo_t
  bool succeeded = false;  // status == CUDNN_STATUS_SUCCESS
  float time_ms = 0.0f;    // measured (Find) or -1 (heuristics)
  size_t memory = 0;       // workspace cuDNN reported for this entry's math type
  ConvMath math = ConvMath::kDefault;
  bool deterministic = false;
};

struct AlgorithmRequirements {
  ConvMath math = ConvMath::kFma;  // the convolution descriptor's math type
  bool deterministic = false;
  size_t workspace_limit = 0;     // bytes
  bool default_math_too = false;  // CUDNN_DEFAULT_MATH entries usable too (16-bit data)
};

// The first candidate in cuDNN's order that succeeded, has the descriptor's
// math type (or the default one, when allowed), is deterministic when
// required, and reported memory within the limit; nothing when none
// qualifies. Index into `candidates`.
inline std::optional<size_t> choose_algorithm(std::span<const AlgorithmCandidate> candidates,
                                              const AlgorithmRequirements& need) {
  for (size_t i = 0; i < candidates.size(); ++i) {
    const AlgorithmCandidate& c = candidates[i];
    const bool math =
        c.math == need.math || (need.default_math_too && c.math == ConvMath::kDefault);
    if (!c.succeeded || !math) continue;
    if (need.deterministic && !c.deterministic) continue;
    if (c.memory > need.workspace_limit) continue;
    return i;
  }
  return std::nullopt;
}

inline constexpr EnumEntry<ConvMath, const char*> kConvMathNames[] = {
    {ConvMath::kDefault, "DEFAULT"},
    {ConvMath::kTensorOp, "TENSOR_OP"},
    {ConvMath::kTensorOpAllowConversion, "TENSOR_OP_ALLOW_CONVERSION"},
    {ConvMath::kFma, "FMA"}};

// "FMA", "TENSOR_OP", ... for messages.
inline const char* to_string(ConvMath math) {
  return value_of(kConvMathNames, math).value_or("?");
}

}  // namespace lockstep::nn::cuda
