// Choosing a cuDNN convolution algorithm from the results cuDNN reports
// (cudnnFind* or the cudnnGet*_v7 heuristics), as plain data, so that the
// rule is tested without a GPU (tests/test_cuda_rules.cpp).
//
// cuDNN returns entries for the convolution descriptor's math type and for
// other math types (CUDNN_DEFAULT_MATH, which is TF32 on A100/H100 for
// float32 data). An entry is usable when its math type is the descriptor's.
// CUDNN_DEFAULT_MATH entries (algorithms cuDNN has no version of for the
// descriptor's math type, "returned as such") are usable too:
//   - at 16 bits as they are (no tensor cores, the same float32
//     accumulation; for small channel counts they may be all cuDNN has), in
//     cuDNN's order among the others;
//   - at fp32 only after every FMA entry, and run with the descriptor's
//     CUDNN_FMA_MATH, never with their own (TF32): if cuDNN labels its
//     float32 kernels DEFAULT, they still run, and only as FMA kernels.
// The caller tries the usable entries in algorithm_order's order: it sets the
// descriptor to the entry's run math type, asks cuDNN for the workspace of
// (descriptor, algorithm) (not the entry's figure), and takes the first that
// cuDNN accepts; the math type is set again before each call (as PyTorch
// does).
//
// CUDA-free: the caller converts cudnnConvolution*AlgoPerf_t into
// AlgorithmCandidate and back.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

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

// What CUDNN_DEFAULT_MATH entries are worth (see the top of this file).
enum class DefaultMathEntries {
  kRefused,
  kAsTheyAre,          // 16 bits: in cuDNN's order, run as DEFAULT
  kLastAsDescriptors,  // fp32: after the descriptor's own, run with its math type
};

struct AlgorithmRequirements {
  ConvMath math = ConvMath::kFma;  // the convolution descriptor's math type
  bool deterministic = false;
  size_t workspace_limit = 0;  // bytes
  DefaultMathEntries default_math = DefaultMathEntries::kRefused;
};

// A usable entry and the math type to run it with.
struct AlgorithmTry {
  size_t index = 0;  // into the candidates
  ConvMath math = ConvMath::kFma;
  bool operator==(const AlgorithmTry&) const = default;
};

// The usable candidates (succeeded, deterministic when required, reported
// memory within the limit, a usable math type) in the order to try them.
inline std::vector<AlgorithmTry> algorithm_order(std::span<const AlgorithmCandidate> candidates,
                                                 const AlgorithmRequirements& need) {
  std::vector<AlgorithmTry> order, last;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const AlgorithmCandidate& c = candidates[i];
    if (!c.succeeded) continue;
    if (need.deterministic && !c.deterministic) continue;
    if (c.memory > need.workspace_limit) continue;
    if (c.math == need.math) {
      order.push_back({i, c.math});
    } else if (c.math == ConvMath::kDefault) {
      if (need.default_math == DefaultMathEntries::kAsTheyAre) order.push_back({i, c.math});
      if (need.default_math == DefaultMathEntries::kLastAsDescriptors)
        last.push_back({i, need.math});
    }
  }
  order.insert(order.end(), last.begin(), last.end());
  return order;
}

// The first of algorithm_order, if any.
inline std::optional<size_t> choose_algorithm(std::span<const AlgorithmCandidate> candidates,
                                              const AlgorithmRequirements& need) {
  const std::vector<AlgorithmTry> order = algorithm_order(candidates, need);
  if (order.empty()) return std::nullopt;
  return order.front().index;
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

// Every candidate for an error message: "algo 1 FMA 0.400 ms 2097152 B
// deterministic; algo 6 DEFAULT failed; ...".
inline std::string describe_candidates(std::span<const AlgorithmCandidate> candidates) {
  std::ostringstream out;
  for (const AlgorithmCandidate& c : candidates) {
    if (&c != candidates.data()) out << "; ";
    out << "algo " << c.algo << " " << to_string(c.math);
    if (!c.succeeded) {
      out << " failed";
      continue;
    }
    if (c.time_ms >= 0) {
      char ms[32];
      std::snprintf(ms, sizeof(ms), " %.3f ms", static_cast<double>(c.time_ms));
      out << ms;
    }
    out << " " << c.memory << " B" << (c.deterministic ? " deterministic" : "");
  }
  return candidates.empty() ? "none" : out.str();
}

}  // namespace lockstep::nn::cuda
