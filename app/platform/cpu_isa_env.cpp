#include "app/platform/cpu_isa_env.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace lockstep::app {

std::optional<nn::CpuIsa> cpu_isa_cap_from_environment() {
  const char* value = std::getenv("LOCKSTEP_CPU_ISA");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return nn::parse_cpu_isa(value, "environment variable LOCKSTEP_CPU_ISA");
}

bool cpu_winograd_from_environment() {
  const char* value = std::getenv("LOCKSTEP_CPU_WINOGRAD");
  if (value == nullptr || *value == '\0') return true;
  const std::string text = value;
  if (text != "0" && text != "1") {
    fail_input("environment variable LOCKSTEP_CPU_WINOGRAD = \"", text,
               "\": expected 0 (direct convolutions) or 1 (Winograd where it applies)");
  }
  return text == "1";
}

nn::CpuBackendOptions cpu_backend_options(int threads, nn::Precision precision) {
  return {.threads = threads,
          .isa_cap = cpu_isa_cap_from_environment(),
          .precision = precision,
          .winograd = cpu_winograd_from_environment()};
}

std::string cpu_isa_description() {
  // The kernels as the backends name them (one thread each, nothing run).
  const nn::KernelChoice fp32 = nn::make_cpu_backend(cpu_backend_options(1))->kernels();
  const nn::KernelChoice bf16 =
      nn::make_cpu_backend(cpu_backend_options(1, nn::Precision::kBf16))->kernels();
  const auto cap = cpu_isa_cap_from_environment();
  std::string out = fp32.description();
  if (!cpu_winograd_from_environment()) out += " (LOCKSTEP_CPU_WINOGRAD=0)";
  out += "; bf16: " + bf16.convolutions + ", products " +
         (bf16.bf16_emulated ? "emulated" : "on vdpbf16ps") + " (CPU has " +
         nn::to_string(nn::detect_cpu_isa()) + (nn::cpu_has_avx512_bf16() ? " + avx512_bf16" : "") +
         (nn::cpu_has_amx_bf16() ? " + amx_bf16, not used yet" : "") + ")";
  if (cap) out += ", capped by LOCKSTEP_CPU_ISA=" + nn::to_string(*cap);
  return out;
}

std::string bf16_emulation_note(const nn::KernelChoice& kernels) {
  if (!kernels.bf16_emulated) return "";
  const std::string why = nn::cpu_has_avx512_bf16()
                              ? "LOCKSTEP_CPU_ISA=" + kernels.label + " leaves out AVX512_BF16"
                              : "this CPU has no AVX512_BF16";
  return "note: bf16 products are emulated (" + why +
         "): the same bits as on vdpbf16ps, but slower than fp32 where Winograd does not take "
         "the convolution (mnist_net 2x, AlexNet-CIFAR 1.2x slower on AMD Zen 4 under AVX2); "
         "precision = \"fp32\" trains faster here";
}

}  // namespace lockstep::app
