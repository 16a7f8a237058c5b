#include "nn/precision.h"

#include "common/error.h"

namespace lockstep::nn {

void check_cpu_precision(Precision precision, const std::string& what) {
  if (precision == Precision::kFp16) {
    fail_input(what, " = \"fp16\": the CPU backend has no fp16 kernels (fp16 runs on CUDA); ",
               "use \"bf16\" (fp32's range, no loss scaling needed) or \"fp32\"");
  }
}

}  // namespace lockstep::nn
