// The instruction-set features the compiler was told it may use for this
// build (its predefined macros under the build's -march), as constant data
// only: app/platform/cpu_baseline.cpp reads it before any code compiled with these
// flags may run. Names as in cpu_baseline.cpp's table.
#include "app/platform/cpu_baseline.h"

#ifndef LOCKSTEP_BUILD_TARGET
#define LOCKSTEP_BUILD_TARGET "x86-64-v3"
#endif

namespace lockstep::app {

extern const char kCpuBuildTarget[] = LOCKSTEP_BUILD_TARGET;

extern const char* const kCpuBuildFeatures[] = {
#ifdef __SSE3__
    "sse3",
#endif
#ifdef __SSSE3__
    "ssse3",
#endif
#ifdef __SSE4_1__
    "sse4.1",
#endif
#ifdef __SSE4_2__
    "sse4.2",
#endif
#ifdef __POPCNT__
    "popcnt",
#endif
#ifdef __GCC_HAVE_SYNC_COMPARE_AND_SWAP_16
    "cx16",
#endif
#ifdef __PCLMUL__
    "pclmul",
#endif
#ifdef __AES__
    "aes",
#endif
#ifdef __XSAVE__
    "xsave",
#endif
#ifdef __RDRND__
    "rdrnd",
#endif
#ifdef __MOVBE__
    "movbe",
#endif
#ifdef __LZCNT__
    "lzcnt",
#endif
#ifdef __BMI__
    "bmi",
#endif
#ifdef __BMI2__
    "bmi2",
#endif
#ifdef __AVX__
    "avx",
#endif
#ifdef __AVX2__
    "avx2",
#endif
#ifdef __FMA__
    "fma",
#endif
#ifdef __F16C__
    "f16c",
#endif
#ifdef __RDSEED__
    "rdseed",
#endif
#ifdef __ADX__
    "adx",
#endif
#ifdef __SHA__
    "sha",
#endif
#ifdef __GFNI__
    "gfni",
#endif
#ifdef __VAES__
    "vaes",
#endif
#ifdef __VPCLMULQDQ__
    "vpclmulqdq",
#endif
#ifdef __AVXVNNI__
    "avxvnni",
#endif
#ifdef __AVX512F__
    "avx512f",
#endif
#ifdef __AVX512DQ__
    "avx512dq",
#endif
#ifdef __AVX512CD__
    "avx512cd",
#endif
#ifdef __AVX512BW__
    "avx512bw",
#endif
#ifdef __AVX512VL__
    "avx512vl",
#endif
#ifdef __AVX512IFMA__
    "avx512ifma",
#endif
#ifdef __AVX512VBMI__
    "avx512vbmi",
#endif
#ifdef __AVX512VBMI2__
    "avx512vbmi2",
#endif
#ifdef __AVX512VNNI__
    "avx512vnni",
#endif
#ifdef __AVX512BITALG__
    "avx512bitalg",
#endif
#ifdef __AVX512VPOPCNTDQ__
    "avx512vpopcntdq",
#endif
#ifdef __AVX512BF16__
    "avx512bf16",
#endif
    nullptr,
};

}  // namespace lockstep::app
