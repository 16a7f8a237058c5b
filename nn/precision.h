// The arithmetic precision of a run's convolutions and GEMMs, one
// enumeration for every backend (the config key `precision`).
//   fp32: everything in fp32.
//   bf16: the inputs of every convolution and dense-layer product rounded
//         to bfloat16 (nearest even), products summed in fp32; activations
//         stay fp32 in memory between layers; master weights, gradients,
//         optimizer state, losses and softmax stay fp32 (as PyTorch's
//         autocast to bf16).
//   fp16: as bf16 with IEEE half inputs; CUDA only (nn/cuda/math_types.h),
//         with loss scaling (nn/grad_scaler.h).
// The integer values cross the CUDA plugin's ABI: append, never renumber.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/enum_table.h"

namespace lockstep::nn {

enum class Precision { kFp32 = 0, kBf16 = 1, kFp16 = 2 };

inline constexpr EnumEntry<Precision, const char*> kPrecisionNames[] = {
    {Precision::kFp32, "fp32"}, {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}};

inline const char* to_string(Precision precision) {
  return value_of(kPrecisionNames, precision).value_or("?");
}

// "fp32" | "bf16" | "fp16"; nothing otherwise.
inline std::optional<Precision> parse_precision(std::string_view text) {
  return key_of(kPrecisionNames, text);
}

// The CPU backend computes in fp32 or bf16: fp16 is an InputError naming
// `what` (a config key, a flag) with the remedy.
void check_cpu_precision(Precision precision, const std::string& what);

}  // namespace lockstep::nn
