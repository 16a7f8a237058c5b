// Dense-layer ops on CUDA: GEMM through cuBLAS (row-major via swapped
// operands), and the bias helpers as kernels that keep the CPU's summation
// order (nn/cpu/dense.cpp), so their results are bit-identical to it.
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// y: (rows, cols); y[r, j] += bias[j]
__global__ void add_row_bias_kernel(int64_t rows, int64_t cols, const float* bias, float* y) {
  CUDA_KERNEL_LOOP(i, rows * cols) {
    y[i] += bias[i % cols];
  }
}

// dy: (rows, cols) -> db: (cols). One thread per column adds the rows in
// order, as the CPU does; neighbouring threads read neighbouring columns.
__global__ void sum_rows_kernel(int64_t rows, int64_t cols, const float* dy, float* db) {
  CUDA_KERNEL_LOOP(j, cols) {
    float sum = 0.0f;
    for (int64_t r = 0; r < rows; ++r) sum += dy[r * cols + j];
    db[j] = sum;
  }
}

}  // namespace

// Row-major C(m, n) = alpha * op(A)(m, k) * op(B)(k, n) + beta * C.
// cuBLAS is column-major, and a row-major matrix read column-major is its
// transpose, so we ask cuBLAS for C^T(n, m) = op(B)^T * op(A)^T: B first,
// then A, with the leading dimensions of the row-major storage. At
// bf16/fp16 precision A and B are rounded to 16 bits and cublasGemmEx
// accumulates in float32 (CUBLAS_COMPUTE_32F) into the float32 C.
void gemm(DeviceContext& ctx, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
          float alpha, const float* a, const float* b, float beta, float* c) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {  // empty product: C = beta * C (C is not read when beta is 0)
    if (beta == 0.0f) {
      fill(ctx, m * n, 0.0f, c);
    } else {
      scale(ctx, m * n, beta, c);
    }
    return;
  }
  const int mi = to_int(m, "gemm m"), ni = to_int(n, "gemm n"), ki = to_int(k, "gemm k");
  const int lda = trans_a ? mi : ki;  // A is (k, m) when transposed, else (m, k)
  const int ldb = trans_b ? ki : ni;  // B is (n, k) when transposed, else (k, n)
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (ctx.precision() == Precision::kFp32) {
    CUBLAS_CHECK(
        cublasSgemm(ctx.cublas(), op_b, op_a, ni, mi, ki, &alpha, b, ldb, a, lda, &beta, c, ni));
    return;
  }
  const cudaDataType_t low = ctx.precision() == Precision::kBf16 ? CUDA_R_16BF : CUDA_R_16F;
  const void* al = to_low_precision(ctx, Scratch::kLowA, m * k, a);
  const void* bl = to_low_precision(ctx, Scratch::kLowB, k * n, b);
  CUBLAS_CHECK(cublasGemmEx(ctx.cublas(), op_b, op_a, ni, mi, ki, &alpha, bl, low, ldb, al, low,
                            lda, &beta, c, CUDA_R_32F, ni, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
}

// y(rows, cols) += bias(cols) on every row
void add_row_bias(DeviceContext& ctx, int64_t rows, int64_t cols, const float* bias, float* y) {
  launch(add_row_bias_kernel, rows * cols, ctx.stream(), rows, cols, bias, y);
}

// db(cols) = sum over rows of dy(rows, cols)
void sum_rows(DeviceContext& ctx, int64_t rows, int64_t cols, const float* dy, float* db) {
  launch(sum_rows_kernel, cols, ctx.stream(), rows, cols, dy, db);
}

}  // namespace lockstep::nn::cuda
