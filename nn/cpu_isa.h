// The instruction sets the CPU backend has kernels for, and the choice
// among them on the CPU that runs the process.
//
// avx2:   AVX2 + FMA + F16C (x86-64-v3), the build's baseline: every CPU a
//         default build runs on has it (AMD since Zen, Intel since Haswell,
//         Xeon Phi KNL).
// avx512: AVX-512 F + BW + VL + DQ (Skylake-SP and later, AMD Zen 4). KNL
//         has F but not BW/VL/DQ, so it takes avx2.
#pragma once

#include <optional>
#include <string>

namespace lockstep::nn {

enum class CpuIsa { kAvx2, kAvx512 };

std::string to_string(CpuIsa isa);  // "avx2", "avx512"
// Parses "avx2" | "avx512"; throws InputError naming `what` (e.g. the
// environment variable) and the value.
CpuIsa parse_cpu_isa(const std::string& name, const std::string& what);

// The widest instruction set this CPU (and OS) supports.
CpuIsa detect_cpu_isa();
// The widest one supported, at most `cap` when given.
CpuIsa choose_cpu_isa(std::optional<CpuIsa> cap);
// True when the CPU has AVX512_BF16 (vdpbf16ps) on top of avx512.
bool cpu_has_avx512_bf16();
// True when the CPU has AMX-BF16 tiles (Intel Sapphire Rapids and later)
// and the kernel lets this process use them (arch_prctl XTILEDATA). No
// kernel uses them yet: the bf16 products run on vdpbf16ps there. An AMX
// tile would plug in where make_cpu_backend chooses vdpbf16ps.
bool cpu_has_amx_bf16();

}  // namespace lockstep::nn
