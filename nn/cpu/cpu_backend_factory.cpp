// make_cpu_backend: the CpuBackend of the widest instruction set this CPU
// supports, at most the caller's cap; likewise the 16-bit conversions.
#include <memory>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/cpu/convert16.h"
#include "nn/cpu/isa_backends.h"
#include "nn/cpu_isa.h"

namespace lockstep::nn {

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  LOCKSTEP_CHECK(options.threads >= 0, "make_cpu_backend: negative thread count ", options.threads);
  check_cpu_precision(options.precision, "precision");
  switch (choose_cpu_isa(options.isa_cap)) {
    case CpuIsa::kAvx512:
      // bf16 on vdpbf16ps where the CPU has it; the slot for AMX tiles
      // (cpu_has_amx_bf16) when they exist.
      return cpu::avx512::make_isa_backend(options.threads, options.precision,
                                           cpu_has_avx512_bf16(), options.winograd);
    case CpuIsa::kAvx2:
      break;
  }
  return cpu::avx2::make_isa_backend(options.threads, options.precision, false, options.winograd);
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return make_cpu_backend(CpuBackendOptions{.threads = threads});
}

namespace cpu {

const Convert16Kernels& convert16_kernels(CpuIsa isa) {
  LOCKSTEP_CHECK(static_cast<int>(isa) <= static_cast<int>(detect_cpu_isa()),
                 "convert16_kernels: this CPU has no ", to_string(isa));
  return isa == CpuIsa::kAvx512 ? avx512::kConvert16Kernels : avx2::kConvert16Kernels;
}

const Bf16Kernels& bf16_kernels(CpuIsa isa) {
  LOCKSTEP_CHECK(static_cast<int>(isa) <= static_cast<int>(detect_cpu_isa()),
                 "bf16_kernels: this CPU has no ", to_string(isa));
  return isa == CpuIsa::kAvx512 ? avx512::kBf16Kernels : avx2::kBf16Kernels;
}

const Convert16Kernels& convert16_kernels() {
  static const Convert16Kernels& widest = convert16_kernels(detect_cpu_isa());
  return widest;
}

}  // namespace cpu
}  // namespace lockstep::nn
