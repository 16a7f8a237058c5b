// Per-thread scratch memory for the CPU kernels (im2col buffers, partial
// sums). Each thread owns its buffers, so chunks running on different
// threads, and callers on different threads, never share one. Buffers grow
// and are kept for the thread's lifetime, so steady-state training does not
// allocate.
#pragma once

#include <cstddef>

namespace lockstep::nn::cpu {

// Independent buffers a kernel may hold at the same time.
enum class ScratchSlot {
  kColumns,        // im2col matrices
  kGather,         // operands gathered from several samples, GEMM outputs to scatter
  kPadded,         // zero-padded copies of input samples
  kPartials,       // per-chunk partial sums, owned by the thread that calls parallel_for
  kGemmTail,       // inside gemm_nn only
  kPackA,          // inside packed_gemm only: packed panels of A
  kPackB,          // inside packed_gemm only: packed panels of B
  kPackedWeights,  // packed weights shared by the chunks of one op, owned by its caller
  kBf16Input,      // inputs rounded to bf16 pairs (conv_bf16.cpp)
  kCount
};

// At least n floats, 64-byte aligned, contents unspecified. Valid until the
// next call for the same slot on the same thread.
float* scratch(ScratchSlot slot, size_t n);

}  // namespace lockstep::nn::cpu
