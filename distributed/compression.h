// Gradient compression for the wire: fp16 (IEEE binary16) and bf16
// (bfloat16), each value rounded to nearest-even, as a cast on the device
// would do. A NaN stays a NaN, quiet, with the top of its payload (the x86
// conversion instructions' NaNs).
//
// What the distributed optimizer does with it (see distributed_optimizer.h):
// each rank's packed gradients are converted to 16 bits (to_16bit), reduced
// as 16-bit values (Communicator::allreduce_16bit: 2 bytes per value on the
// wire, half of fp32), and converted back (from_16bit). Each reduction step
// adds two 16-bit values in fp32 and rounds the sum back to 16 bits
// (add_16bit), so a sum over N ranks is rounded N - 1 times, in an order
// the MPI library (or NCCL) chooses: it can differ from "sum in fp32, then
// round once" by up to one 16-bit rounding per step (with 2 ranks there is
// one step and the results are equal). Every rank receives the same bits.
//
// The span functions run the vector kernels of the CPU's widest instruction
// set (nn/cpu/convert16.h, chosen at run time) and the scalar functions
// below on the remainder; all paths give the same bits.
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

// out[i] = in[i] rounded to `format` (fp16 or bf16; sizes must match).
// Returns false when any result is not finite (overflow to infinity, or a
// non-finite input); every value is converted either way.
bool to_16bit(std::span<const float> in, std::span<uint16_t> out, Compression format);
// True when no value is infinite or NaN.
bool finite_16bit(std::span<const uint16_t> data, Compression format);
// out[i] = the float value of in[i] (exact).
void from_16bit(std::span<const uint16_t> in, std::span<float> out, Compression format);
// One reduction step: inout[i] = round16(float(in[i]) + float(inout[i])).
// Infinities and NaNs propagate, so an overflow anywhere reaches every rank.
void add_16bit(std::span<const uint16_t> in, std::span<uint16_t> inout, Compression format);
// data[i] = round16(float(data[i]) / divisor) (the average after a sum).
void divide_16bit(std::span<uint16_t> data, float divisor, Compression format);

// Largest |x| in data (NaN if any value is NaN). Used for error messages.
float max_abs(std::span<const float> data);

}  // namespace lockstep::distributed
