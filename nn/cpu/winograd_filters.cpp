#include "nn/cpu/winograd_filters.h"

#include <algorithm>

namespace lockstep::nn::cpu {

namespace {

constexpr double G[6][3] = {{1.0 / 4, 0, 0},
                            {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                            {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                            {1.0 / 24, 1.0 / 12, 1.0 / 6},
                            {1.0 / 24, -1.0 / 12, 1.0 / 6},
                            {0, 0, 1}};

}  // namespace

void winograd_filters(int64_t K, int64_t C, const float* w, int64_t k_pad, int64_t c_pad,
                      float* u) {
  std::fill(u, u + 36 * c_pad * k_pad, 0.0f);
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      const float* f = w + (k * C + c) * 9;
      double gf[6][3];  // G g
      for (int i = 0; i < 6; ++i) {
        for (int s = 0; s < 3; ++s) {
          gf[i][s] = G[i][0] * f[s] + G[i][1] * f[3 + s] + G[i][2] * f[6 + s];
        }
      }
      for (int i = 0; i < 6; ++i) {
        for (int j = 0; j < 6; ++j) {
          const double e = gf[i][0] * G[j][0] + gf[i][1] * G[j][1] + gf[i][2] * G[j][2];
          u[((i * 6 + j) * c_pad + c) * k_pad + k] = static_cast<float>(e);
        }
      }
    }
  }
}

void winograd_filter_grads(int64_t K, int64_t C, const float* dwt, int64_t k_pad, int64_t c_pad,
                           float* dw) {
  for (int64_t k = 0; k < K; ++k) {
    for (int64_t c = 0; c < C; ++c) {
      double gm[3][6];  // G^T DW
      for (int r = 0; r < 3; ++r) {
        for (int j = 0; j < 6; ++j) {
          double sum = 0.0;
          for (int i = 0; i < 6; ++i) sum += G[i][r] * dwt[((i * 6 + j) * k_pad + k) * c_pad + c];
          gm[r][j] = sum;
        }
      }
      float* out = dw + (k * C + c) * 9;
      for (int r = 0; r < 3; ++r) {
        for (int s = 0; s < 3; ++s) {
          double sum = 0.0;
          for (int j = 0; j < 6; ++j) sum += gm[r][j] * G[j][s];
          out[r * 3 + s] += static_cast<float>(sum);
        }
      }
    }
  }
}

}  // namespace lockstep::nn::cpu
