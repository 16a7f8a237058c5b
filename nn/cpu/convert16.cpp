// The kernels of convert16.h for one instruction set (this file is compiled
// once per set, see isa_namespace.h), one register (kNativeLanes floats) at
// a time: fp16 on vcvtps2ph / vcvtph2ps (F16C, or AVX-512F in the avx512
// build), bf16 with integer operations, lane by lane what the scalar
// float_to_bf16 does: add 0x7fff plus the lowest kept bit, keep the top
// half; a NaN keeps its top half with the quiet bit set.
// GCC 12 warns "'__Y' may be used uninitialized" inside its own AVX-512
// intrinsics (_mm512_undefined_*, GCC bug 105593): silence that one warning
// for this file, which includes the intrinsics first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "nn/cpu/convert16.h"
#include "nn/cpu/simd.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

constexpr int kW = kNativeLanes;
using vu = uint32_t __attribute__((vector_size(sizeof(vn))));
using vh = uint16_t __attribute__((vector_size(sizeof(vn) / 2)));

// fp16 <-> float, one register.
#if defined(__AVX512F__)
constexpr bool kFp16 = true;
inline vn from_fp16(vh h) {
  return (vn)_mm512_cvtph_ps((__m256i)h);
}
inline vh to_fp16(vn v) {
  return (vh)_mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#elif defined(__F16C__) && defined(__AVX__)
constexpr bool kFp16 = true;
inline vn from_fp16(vh h) {
  return (vn)_mm256_cvtph_ps((__m128i)h);
}
inline vh to_fp16(vn v) {
  return (vh)_mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
#else  // a -march=native build on a CPU without F16C: the caller's scalar code
constexpr bool kFp16 = false;
inline vn from_fp16(vh) {
  return vn{};
}
inline vh to_fp16(vn) {
  return vh{};
}
#endif

template <bool Fp16>
inline vn load_half(const uint16_t* p) {
  vh h;
  std::memcpy(&h, p, sizeof h);
  if constexpr (Fp16) return from_fp16(h);
  return (vn)(__builtin_convertvector(h, vu) << 16);
}

template <bool Fp16>
inline void store_half(uint16_t* p, vn v) {
  vh h;
  if constexpr (Fp16) {
    h = to_fp16(v);
  } else {
    const vu bits = (vu)v, top = bits >> 16;
    const vu rounded = (bits + 0x7fffu + (top & 1u)) >> 16;
    h = __builtin_convertvector(v != v ? (top | 0x40u) : rounded, vh);
  }
  std::memcpy(p, &h, sizeof h);
}

// Calls f(i, format) for the whole registers of n elements, format a
// std::bool_constant<fp16>; returns the number of elements they cover.
template <typename F>
int64_t each_register(int64_t n, bool fp16, F&& f) {
  if (fp16 && !kFp16) return 0;
  const int64_t head = n - n % kW;
  for (int64_t i = 0; i < head; i += kW) {
    if (fp16) {
      f(i, std::true_type{});
    } else {
      f(i, std::false_type{});
    }
  }
  return head;
}

int64_t narrow(const float* in, uint16_t* out, int64_t n, bool fp16) {
  return each_register(n, fp16, [=](int64_t i, auto format) {
    store_half<decltype(format)::value>(out + i, loadn(in + i));
  });
}

int64_t widen(const uint16_t* in, float* out, int64_t n, bool fp16) {
  return each_register(n, fp16, [=](int64_t i, auto format) {
    storen(out + i, load_half<decltype(format)::value>(in + i));
  });
}

int64_t add(const uint16_t* in, uint16_t* inout, int64_t n, bool fp16) {
  return each_register(n, fp16, [=](int64_t i, auto format) {
    constexpr bool f = decltype(format)::value;
    store_half<f>(inout + i, load_half<f>(in + i) + load_half<f>(inout + i));
  });
}

int64_t divide(uint16_t* data, int64_t n, float divisor, bool fp16) {
  return each_register(n, fp16, [=](int64_t i, auto format) {
    constexpr bool f = decltype(format)::value;
    store_half<f>(data + i, load_half<f>(data + i) / divisor);
  });
}

}  // namespace

extern const Convert16Kernels kConvert16Kernels{narrow, widen, add, divide};

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
