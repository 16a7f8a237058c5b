#include "nn/precision.h"

#include "nn/error.h"

namespace lockstep::nn {

std::string to_string(Precision precision) {
  return precision == Precision::kBf16 ? "bf16" : "fp32";
}

Precision parse_precision(const std::string& name, const std::string& what) {
  if (name == "fp32") return Precision::kFp32;
  if (name == "bf16") return Precision::kBf16;
  if (name == "fp16") {
    fail_input(what, " = \"fp16\": the CPU backend has no fp16 kernels (fp16 runs on CUDA); ",
               "use \"bf16\" (fp32's range, no loss scaling needed) or \"fp32\"");
  }
  fail_input(what, " = \"", name, "\" is not a precision (fp32 or bf16)");
}

}  // namespace lockstep::nn
