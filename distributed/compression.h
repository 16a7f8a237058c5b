// Gradient compression for the wire: fp16 (IEEE binary16) and bf16
// (bfloat16), each value rounded to nearest-even, as a cast on the device
// would do.
//
// What the distributed optimizer does with it (see distributed_optimizer.h):
// each rank's packed gradients are rounded to 16 bits (so every contribution
// carries exactly what a 16-bit wire would carry), summed, and the sum is
// rounded to 16 bits again. The communicator interface offers float, double
// and int64 allreduce only, so today the sum itself runs in fp32 on the wire:
// the numerics (and overflow behaviour) of compression are reproduced, its
// bandwidth saving is not.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace lockstep::distributed {

enum class Compression { kNone, kFp16, kBf16 };

std::string to_string(Compression compression);  // "none", "fp16", "bf16"
// Parses "none" | "fp16" | "bf16"; throws InputError naming the value.
Compression parse_compression(const std::string& name);

// Largest finite fp16 value.
constexpr float kFp16Max = 65504.0f;

uint16_t float_to_fp16(float x);
float fp16_to_float(uint16_t h);
uint16_t float_to_bf16(float x);
float bf16_to_float(uint16_t b);

// Rounds every value to the given 16-bit format and back, in place.
// Returns false when any result is not finite (overflow to infinity, or a
// non-finite input); the data are rounded either way.
bool round_to_16bit(std::span<float> data, Compression compression);

// Largest |x| in data (NaN if any value is NaN).
float max_abs(std::span<const float> data);

}  // namespace lockstep::distributed
