// make_cpu_backend: the CpuBackend of the widest instruction set this CPU
// supports, at most the caller's cap.
#include <memory>

#include "nn/backend.h"
#include "nn/cpu/isa_backends.h"
#include "nn/cpu_isa.h"
#include "nn/error.h"

namespace lockstep::nn {

std::unique_ptr<Backend> make_cpu_backend(const CpuBackendOptions& options) {
  LOCKSTEP_CHECK(options.threads >= 0, "make_cpu_backend: negative thread count ", options.threads);
  switch (choose_cpu_isa(options.isa_cap)) {
    case CpuIsa::kAvx512:
      return cpu::avx512::make_isa_backend(options.threads, options.precision,
                                           cpu_has_avx512_bf16());
    case CpuIsa::kAvx2:
      break;
  }
  return cpu::avx2::make_isa_backend(options.threads, options.precision, false);
}

std::unique_ptr<Backend> make_cpu_backend(int threads) {
  return make_cpu_backend(CpuBackendOptions{.threads = threads});
}

}  // namespace lockstep::nn
