// The span conversions and the reduction step of compression.h: AVX-512
// (16 values at a time) or F16C (8, fp16 only) when the compiler targets
// them, the scalar conversions for the rest. All paths give the same bits:
// vcvtps2ph rounds to nearest-even like float_to_fp16 (tests check it), and
// the bf16 vector code is float_to_bf16's integer rounding lane by lane.
// GCC 12 warns "'__Y' may be used uninitialized" inside its own AVX-512
// intrinsics (_mm512_undefined_*, GCC bug 105593): silence that one warning
// for this file, which includes the intrinsics first.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cstring>

#if defined(__AVX512F__) || (defined(__F16C__) && defined(__AVX__))
#include <immintrin.h>
#define LOCKSTEP_HALF_VECTOR 1
#else
#define LOCKSTEP_HALF_VECTOR 0
#endif

#include "distributed/compression.h"
#include "nn/error.h"

namespace lockstep::distributed {
namespace {

bool is_fp16(Compression format) {
  LOCKSTEP_CHECK(format == Compression::kFp16 || format == Compression::kBf16,
                 "16-bit conversion needs fp16 or bf16, got ", to_string(format));
  return format == Compression::kFp16;
}

float widen(uint16_t v, bool fp16) {
  return fp16 ? fp16_to_float(v) : bf16_to_float(v);
}
uint16_t narrow(float x, bool fp16) {
  return fp16 ? float_to_fp16(x) : float_to_bf16(x);
}

#if defined(__AVX512F__)
constexpr size_t kLanes = 16;
using Vec = __m512;

// 16 values at p (fp16 or bf16) as floats.
Vec load16(const uint16_t* p, bool fp16) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if (fp16) return _mm512_cvtph_ps(h);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// 16 floats rounded to nearest-even into p.
void store16(uint16_t* p, Vec v, bool fp16) {
  __m256i h;
  if (fp16) {
    h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else {
    // float_to_bf16: bits + 0x7fff + (bit 16), top half; NaN keeps a quiet bit.
    const __m512i f = _mm512_castps_si512(v);
    const __m512i top = _mm512_srli_epi32(f, 16);
    const __m512i odd = _mm512_and_si512(top, _mm512_set1_epi32(1));
    const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd);
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(f, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(top, _mm512_set1_epi32(0x40)));
    h = _mm512_cvtepi32_epi16(r);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}
Vec vload(const float* p) {
  return _mm512_loadu_ps(p);
}
void vstore(float* p, Vec v) {
  _mm512_storeu_ps(p, v);
}
Vec vadd(Vec a, Vec b) {
  return _mm512_add_ps(a, b);
}
Vec vdiv(Vec a, float d) {
  return _mm512_div_ps(a, _mm512_set1_ps(d));
}
bool vector_ok(bool) {
  return true;
}

#elif LOCKSTEP_HALF_VECTOR
constexpr size_t kLanes = 8;
using Vec = __m256;

Vec load16(const uint16_t* p, bool) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
void store16(uint16_t* p, Vec v, bool) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
Vec vload(const float* p) {
  return _mm256_loadu_ps(p);
}
void vstore(float* p, Vec v) {
  _mm256_storeu_ps(p, v);
}
Vec vadd(Vec a, Vec b) {
  return _mm256_add_ps(a, b);
}
Vec vdiv(Vec a, float d) {
  return _mm256_div_ps(a, _mm256_set1_ps(d));
}
bool vector_ok(bool fp16) {
  return fp16;  // bf16 takes the scalar path
}

#else
constexpr size_t kLanes = 0;
bool vector_ok(bool) {
  return false;
}
#endif

// The number of leading elements the vector loops handle.
size_t vector_part(size_t n, bool fp16) {
  if constexpr (kLanes == 0) {
    return 0;
  } else {
    return vector_ok(fp16) ? n - n % kLanes : 0;
  }
}

}  // namespace

bool to_16bit(std::span<const float> in, std::span<uint16_t> out, Compression format) {
  const bool fp16 = is_fp16(format);
  LOCKSTEP_CHECK(in.size() == out.size(), "to_16bit of ", in.size(), " into ", out.size());
  const size_t n = in.size(), head = vector_part(n, fp16);
#if LOCKSTEP_HALF_VECTOR
  for (size_t i = 0; i < head; i += kLanes) store16(out.data() + i, vload(in.data() + i), fp16);
#endif
  for (size_t i = head; i < n; ++i) out[i] = narrow(in[i], fp16);
  return finite_16bit(out, format);
}

bool finite_16bit(std::span<const uint16_t> data, Compression format) {
  // All exponent bits set: infinity or NaN.
  const uint16_t exponent = is_fp16(format) ? 0x7c00 : 0x7f80;
  unsigned bad = 0;
  for (uint16_t v : data) bad |= (v & exponent) == exponent ? 1u : 0u;
  return bad == 0;
}

void from_16bit(std::span<const uint16_t> in, std::span<float> out, Compression format) {
  const bool fp16 = is_fp16(format);
  LOCKSTEP_CHECK(in.size() == out.size(), "from_16bit of ", in.size(), " into ", out.size());
  const size_t n = in.size(), head = vector_part(n, fp16);
#if LOCKSTEP_HALF_VECTOR
  for (size_t i = 0; i < head; i += kLanes) vstore(out.data() + i, load16(in.data() + i, fp16));
#endif
  for (size_t i = head; i < n; ++i) out[i] = widen(in[i], fp16);
}

void add_16bit(std::span<const uint16_t> in, std::span<uint16_t> inout, Compression format) {
  const bool fp16 = is_fp16(format);
  LOCKSTEP_CHECK(in.size() == inout.size(), "add_16bit of ", in.size(), " into ", inout.size());
  const size_t n = in.size(), head = vector_part(n, fp16);
#if LOCKSTEP_HALF_VECTOR
  for (size_t i = 0; i < head; i += kLanes) {
    const Vec sum = vadd(load16(in.data() + i, fp16), load16(inout.data() + i, fp16));
    store16(inout.data() + i, sum, fp16);
  }
#endif
  for (size_t i = head; i < n; ++i)
    inout[i] = narrow(widen(in[i], fp16) + widen(inout[i], fp16), fp16);
}

void divide_16bit(std::span<uint16_t> data, float divisor, Compression format) {
  const bool fp16 = is_fp16(format);
  const size_t n = data.size(), head = vector_part(n, fp16);
#if LOCKSTEP_HALF_VECTOR
  for (size_t i = 0; i < head; i += kLanes) {
    store16(data.data() + i, vdiv(load16(data.data() + i, fp16), divisor), fp16);
  }
#endif
  for (size_t i = head; i < n; ++i) data[i] = narrow(widen(data[i], fp16) / divisor, fp16);
}

}  // namespace lockstep::distributed
