// The span conversions and the reduction step of compression.h: the vector
// kernels of the CPU's widest instruction set (nn/cpu/convert16.h) for the
// whole registers, the scalar conversions for the rest; both give the same
// bits.
#include <cstdint>

#include "common/error.h"
#include "distributed/compression.h"
#include "nn/cpu/convert16.h"

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

const nn::cpu::Convert16Kernels& vector_kernels() {
  return nn::cpu::convert16_kernels();
}

int64_t ssize(size_t n) {
  return static_cast<int64_t>(n);
}

}  // namespace

bool to_16bit(std::span<const float> in, std::span<uint16_t> out, Compression format) {
  const bool fp16 = is_fp16(format);
  LOCKSTEP_CHECK(in.size() == out.size(), "to_16bit of ", in.size(), " into ", out.size());
  const int64_t n = ssize(in.size());
  for (int64_t i = vector_kernels().narrow(in.data(), out.data(), n, fp16); i < n; ++i)
    out[i] = narrow(in[i], fp16);
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
  const int64_t n = ssize(in.size());
  for (int64_t i = vector_kernels().widen(in.data(), out.data(), n, fp16); i < n; ++i)
    out[i] = widen(in[i], fp16);
}

void add_16bit(std::span<const uint16_t> in, std::span<uint16_t> inout, Compression format) {
  const bool fp16 = is_fp16(format);
  LOCKSTEP_CHECK(in.size() == inout.size(), "add_16bit of ", in.size(), " into ", inout.size());
  const int64_t n = ssize(in.size());
  for (int64_t i = vector_kernels().add(in.data(), inout.data(), n, fp16); i < n; ++i)
    inout[i] = narrow(widen(in[i], fp16) + widen(inout[i], fp16), fp16);
}

void divide_16bit(std::span<uint16_t> data, float divisor, Compression format) {
  const bool fp16 = is_fp16(format);
  const int64_t n = ssize(data.size());
  for (int64_t i = vector_kernels().divide(data.data(), n, divisor, fp16); i < n; ++i)
    data[i] = narrow(widen(data[i], fp16) / divisor, fp16);
}

}  // namespace lockstep::distributed
