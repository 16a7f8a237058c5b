#include "support/kernel_references.h"

#include <gtest/gtest.h>

#include <cmath>

namespace lockstep::testing {

using nn::Conv2dGeometry;
using nn::Tensor;
using nn::cpu::StridedMatrix;

namespace {

float at(const StridedMatrix& s, int64_t i, int64_t p) {
  return s.data[i * s.row_stride + p * s.col_stride];
}

}  // namespace

Reference conv3x3_forward_reference(const Conv2dGeometry& g, const Tensor& x, const Tensor& w,
                                    const float* b) {
  const int64_t P = g.out_h(), Q = g.out_w();
  Reference ref(g.batch * g.out_channels * P * Q);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t k = 0; k < g.out_channels; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          const int64_t o = ((n * g.out_channels + k) * P + p) * Q + q;
          if (b) ref.add(o, b[k]);
          for (int64_t c = 0; c < g.in_channels; ++c) {
            for (int64_t r = 0; r < 3; ++r) {
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t h = p - g.pad + r, v = q - g.pad + s;
                if (h < 0 || h >= g.in_h || v < 0 || v >= g.in_w) continue;
                ref.add(o, static_cast<double>(
                               x.data()[((n * g.in_channels + c) * g.in_h + h) * g.in_w + v]) *
                               w.data()[((k * g.in_channels + c) * 3 + r) * 3 + s]);
              }
            }
          }
        }
      }
    }
  }
  return ref;
}

Reference conv3x3_data_reference(const Conv2dGeometry& g, const Tensor& w, const Tensor& dy) {
  const int64_t P = g.out_h(), Q = g.out_w();
  Reference ref(g.batch * g.in_channels * g.in_h * g.in_w);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t k = 0; k < g.out_channels; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          const double d = dy.data()[((n * g.out_channels + k) * P + p) * Q + q];
          for (int64_t c = 0; c < g.in_channels; ++c) {
            for (int64_t r = 0; r < 3; ++r) {
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t h = p - g.pad + r, v = q - g.pad + s;
                if (h < 0 || h >= g.in_h || v < 0 || v >= g.in_w) continue;
                ref.add(((n * g.in_channels + c) * g.in_h + h) * g.in_w + v,
                        d * w.data()[((k * g.in_channels + c) * 3 + r) * 3 + s]);
              }
            }
          }
        }
      }
    }
  }
  return ref;
}

Reference conv3x3_filter_reference(const Conv2dGeometry& g, const Tensor& x, const Tensor& dy) {
  const int64_t P = g.out_h(), Q = g.out_w();
  Reference ref(g.out_channels * g.in_channels * 9 + g.out_channels);
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t k = 0; k < g.out_channels; ++k) {
      for (int64_t p = 0; p < P; ++p) {
        for (int64_t q = 0; q < Q; ++q) {
          const double d = dy.data()[((n * g.out_channels + k) * P + p) * Q + q];
          ref.add(g.out_channels * g.in_channels * 9 + k, d);
          for (int64_t c = 0; c < g.in_channels; ++c) {
            for (int64_t r = 0; r < 3; ++r) {
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t h = p - g.pad + r, v = q - g.pad + s;
                if (h < 0 || h >= g.in_h || v < 0 || v >= g.in_w) continue;
                ref.add(((k * g.in_channels + c) * 3 + r) * 3 + s,
                        d * x.data()[((n * g.in_channels + c) * g.in_h + h) * g.in_w + v]);
              }
            }
          }
        }
      }
    }
  }
  return ref;
}

int gemm_mismatches(int64_t m, int64_t n, int64_t k, StridedMatrix a, StridedMatrix b,
                    const std::vector<float>& c0, const std::vector<float>& c, int64_t ldc,
                    bool accumulate) {
  int bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double ref = accumulate ? c0[i * ldc + j] : 0.0, mag = std::fabs(ref);
      for (int64_t p = 0; p < k; ++p) {
        const double t = double{at(a, i, p)} * double{at(b, p, j)};
        ref += t;
        mag += std::fabs(t);
      }
      const double got = c[i * ldc + j];
      if (!(std::fabs(got - ref) <= 1e-5 * mag + 1e-30) && ++bad <= 3) {
        ADD_FAILURE() << "C(" << i << ", " << j << ") = " << got << ", expected " << ref;
      }
    }
  }
  return bad;
}

}  // namespace lockstep::testing
