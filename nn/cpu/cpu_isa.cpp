// CPUID through the compiler's __builtin_cpu_supports, which also checks
// that the OS saves the AVX-512 register state (XGETBV).
#include "nn/cpu_isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.h"

namespace lockstep::nn {

std::string to_string(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 ? "avx512" : "avx2";
}

CpuIsa parse_cpu_isa(const std::string& name, const std::string& what) {
  if (name == "avx2") return CpuIsa::kAvx2;
  if (name == "avx512") return CpuIsa::kAvx512;
  fail_input(what, " = \"", name, "\" is not an instruction set lockstep has kernels for ",
             "(avx2 or avx512)");
}

CpuIsa detect_cpu_isa() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  return avx512 ? CpuIsa::kAvx512 : CpuIsa::kAvx2;
}

CpuIsa choose_cpu_isa(std::optional<CpuIsa> cap) {
  const CpuIsa best = detect_cpu_isa();
  if (cap && static_cast<int>(*cap) < static_cast<int>(best)) return *cap;
  return best;
}

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return detect_cpu_isa() == CpuIsa::kAvx512 && __builtin_cpu_supports("avx512bf16");
}

bool cpu_has_amx_bf16() {
  __builtin_cpu_init();
  // CPUID leaf 7: EDX bit 22 AMX-BF16, bit 24 AMX-TILE (clang 14's
  // __builtin_cpu_supports does not know them).
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!cpu_has_avx512_bf16() || __get_cpuid_count(7, 0, &a, &b, &c, &d) == 0) return false;
  if ((d & (1u << 22)) == 0 || (d & (1u << 24)) == 0) return false;
  // Linux hands out the 8 KiB of tile state only on request.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

}  // namespace lockstep::nn
