#include "nn/cpu/winograd_filters.h"

#include <algorithm>
#include <vector>

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
  // Per k, all c at once (loops over c innermost, for the vectoriser).
  std::vector<double> gm(static_cast<size_t>(18 * C)), out(static_cast<size_t>(C));
  for (int64_t k = 0; k < K; ++k) {
    for (int r = 0; r < 3; ++r) {  // gm(r, j, c) = (G^T DW)(r, j)
      for (int j = 0; j < 6; ++j) {
        double* row = gm.data() + (r * 6 + j) * C;
        std::fill(row, row + C, 0.0);
        for (int i = 0; i < 6; ++i) {
          const double f = G[i][r];
          if (f == 0.0) continue;
          const float* in = dwt + ((i * 6 + j) * k_pad + k) * c_pad;
          for (int64_t c = 0; c < C; ++c) row[c] += f * in[c];
        }
      }
    }
    for (int r = 0; r < 3; ++r) {
      for (int s = 0; s < 3; ++s) {
        std::fill(out.begin(), out.end(), 0.0);
        for (int j = 0; j < 6; ++j) {
          const double f = G[j][s];
          if (f == 0.0) continue;
          const double* row = gm.data() + (r * 6 + j) * C;
          for (int64_t c = 0; c < C; ++c) out[c] += row[c] * f;
        }
        for (int64_t c = 0; c < C; ++c)
          dw[(k * C + c) * 9 + r * 3 + s] += static_cast<float>(out[c]);
      }
    }
  }
}

}  // namespace lockstep::nn::cpu
