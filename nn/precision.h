// The arithmetic precision of a run's convolutions and GEMMs.
//   fp32: everything in fp32.
//   bf16: the inputs of every convolution and dense-layer product rounded
//         to bfloat16 (nearest even), products summed in fp32; activations
//         stay fp32 in memory between layers; master weights, gradients,
//         optimizer state, losses and softmax stay fp32 (as PyTorch's
//         autocast to bf16 on the CPU).
#pragma once

#include <string>

namespace lockstep::nn {

enum class Precision { kFp32, kBf16 };

std::string to_string(Precision precision);  // "fp32", "bf16"
// Parses "fp32" | "bf16"; "fp16" and anything else throw InputError naming
// `what` (a config key, a flag) and the value.
Precision parse_precision(const std::string& name, const std::string& what);

}  // namespace lockstep::nn
