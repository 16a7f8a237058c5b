// Eigen for the CPU kernels, with row-major map types. GCC 12 reports
// -Wmaybe-uninitialized inside its own AVX-512 intrinsics when Eigen's GEMM
// is inlined (a false positive in the compiler's headers), so that one
// warning is silenced around the include.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace lockstep::nn::cpu {

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using OuterStride = Eigen::OuterStride<>;
// Row-major (rows, cols) views of raw memory with a row stride.
using ConstMatrixView = Eigen::Map<const RowMajorMatrix, 0, OuterStride>;
using MatrixView = Eigen::Map<RowMajorMatrix, 0, OuterStride>;

}  // namespace lockstep::nn::cpu
