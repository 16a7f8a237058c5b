// The bf16 GEMM entry points of one instruction set (gemm_bf16.h) behind
// plain types, so that code compiled for another set can reach them: the
// tests, compiled as avx2 (isa_namespace.h), call the avx512 build's
// vdpbf16ps and vcvtne2ps2bf16 code through this table. A matrix is
// (data, row stride, column stride) as StridedMatrix; `dot` as in
// gemm_bf16.h (only where the CPU has AVX512_BF16, and only in the avx512
// table: the avx2 build has no such code and ignores it).
#pragma once

#include <cstdint>

#include "nn/cpu_isa.h"

namespace lockstep::nn::cpu {

struct Bf16Kernels {
  // gemm_bf16
  void (*gemm)(int64_t m, int64_t n, int64_t k, const float* a, int64_t a_row, int64_t a_col,
               const float* b, int64_t b_row, int64_t b_col, float* c, int64_t ldc, bool accumulate,
               bool dot);
  // packed_a_bf16_size and pack_a_bf16
  int64_t (*packed_a_size)(int64_t m, int64_t k);
  void (*pack_a)(int64_t m, int64_t k, const float* a, int64_t a_row, int64_t a_col, uint32_t* dst);
  // gemm_bf16_pairs, B's pair rows ld apart (no row table)
  void (*gemm_pairs)(int64_t m, int64_t n, int64_t kq, const uint32_t* a_packed, const uint32_t* b,
                     int64_t ld, float* c, int64_t ldc, bool accumulate, bool dot);
  // gemm_bf16_rows
  void (*gemm_rows)(int64_t m, int64_t n, int64_t kq, const uint32_t* a, int64_t lda,
                    const uint32_t* b, int64_t ldb, int64_t b_panel_stride, float* c, int64_t ldc,
                    bool accumulate, bool dot);
  // bf16_pair_rows and bf16_row
  void (*pair_rows)(const float* lo, const float* hi, int64_t n, float* dst, bool dot);
  void (*row)(const float* src, int64_t n, uint16_t* dst, bool dot);
};

// The kernels of one instruction set (it must be one this CPU supports).
const Bf16Kernels& bf16_kernels(CpuIsa isa);

}  // namespace lockstep::nn::cpu
