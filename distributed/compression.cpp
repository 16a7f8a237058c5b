#include "distributed/compression.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "common/enum_table.h"
#include "common/error.h"

namespace lockstep::distributed {

constexpr nn::EnumEntry<Compression, const char*> kCompressionNames[] = {
    {Compression::kNone, "none"}, {Compression::kFp16, "fp16"}, {Compression::kBf16, "bf16"}};

std::string to_string(Compression compression) {
  return nn::value_of(kCompressionNames, compression).value_or("?");
}

Compression parse_compression(const std::string& name) {
  if (const auto compression = nn::key_of(kCompressionNames, name)) return *compression;
  fail_input("unknown compression \"", name, "\" (known: ", nn::names_of(kCompressionNames, ", "),
             ")");
}

uint16_t float_to_fp16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((f >> 16) & 0x8000u);
  const uint32_t abs = f & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf, or NaN: quiet, the top of its payload kept (as vcvtps2ph)
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs > 0x7f800000u ? 0x0200u | ((abs >> 13) & 0x03ffu) : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (abs < 0x38800000u) {               // below 2^-14: fp16 subnormal or zero
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25)
    const uint32_t mantissa = (abs & 0x007fffffu) | 0x00800000u;
    const int shift = 126 - static_cast<int>(abs >> 23);  // 14 .. 24
    const uint32_t half = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t midpoint = 1u << (shift - 1);
    const uint32_t rounded =
        half + ((rest > midpoint || (rest == midpoint && (half & 1u))) ? 1 : 0);
    return static_cast<uint16_t>(sign | rounded);
  }
  // Normal: rebias the exponent (127 -> 15), round the mantissa 23 -> 10 bits.
  const uint32_t value = abs - 0x38000000u;  // exponent rebiased, still 23-bit mantissa
  const uint32_t rounded = value + 0x0fffu + ((value >> 13) & 1u);
  return static_cast<uint16_t>(sign | (rounded >> 13));
}

float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x03ffu;
  if (exponent == 0x1f) {  // inf, or NaN: quiet, its payload kept (as vcvtph2ps)
    return std::bit_cast<float>(sign | 0x7f800000u | (mantissa ? 0x00400000u : 0u) |
                                (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float value = static_cast<float>(mantissa) * 0x1p-24f;
    return sign ? -value : value;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_bf16(float x) {
  const uint32_t f = std::bit_cast<uint32_t>(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((f >> 16) | 0x0040u);  // NaN
  const uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

float max_abs(std::span<const float> data) {
  float m = 0.0f;
  for (float v : data) {
    if (std::isnan(v)) return v;
    m = std::max(m, std::fabs(v));
  }
  return m;
}

}  // namespace lockstep::distributed
