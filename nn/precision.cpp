#include "nn/precision.h"

#include "common/enum_table.h"
#include "common/error.h"

namespace lockstep::nn {

constexpr EnumEntry<Precision, const char*> kPrecisionNames[] = {{Precision::kFp32, "fp32"},
                                                                 {Precision::kBf16, "bf16"}};

std::string to_string(Precision precision) {
  return value_of(kPrecisionNames, precision).value_or("fp32");
}

Precision parse_precision(const std::string& name, const std::string& what) {
  if (const auto precision = key_of(kPrecisionNames, name)) return *precision;
  if (name == "fp16") {
    fail_input(what, " = \"fp16\": the CPU backend has no fp16 kernels (fp16 runs on CUDA); ",
               "use \"bf16\" (fp32's range, no loss scaling needed) or \"fp32\"");
  }
  fail_input(what, " = \"", name, "\" is not a precision (", names_of(kPrecisionNames, " or "),
             ")");
}

}  // namespace lockstep::nn
