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
                      int64_t c0, int64_t c1, float* u) {
  // Tiles of kB output channels by kB input channels: the tile's filters
  // are read from a few lines of w per k, and each (e, c) row of the tile
  // is written as one run of kB floats (a filter at a time, k inner, wrote
  // 36 scattered floats per filter and took most of the time).
  constexpr int kB = 16;
  for (int64_t cb = c0; cb < c1; cb += kB) {
    const int64_t ce = std::min(c1, cb + kB);
    for (int64_t kb = 0; kb < k_pad; kb += kB) {
      const int nk = static_cast<int>(std::clamp<int64_t>(K - kb, 0, kB));
      for (int64_t c = cb; c < ce; ++c) {
        double f[9][kB] = {};  // the 3x3 filters of (kb + l, c), lanes l
        if (c < C) {           // else all padding
          for (int l = 0; l < nk; ++l) {
            const float* src = w + ((kb + l) * C + c) * 9;
            for (int t = 0; t < 9; ++t) f[t][l] = src[t];
          }
        }
        double gf[6][3][kB];  // G g
        for (int i = 0; i < 6; ++i) {
          for (int s = 0; s < 3; ++s) {
            for (int l = 0; l < kB; ++l) {
              gf[i][s][l] = G[i][0] * f[s][l] + G[i][1] * f[3 + s][l] + G[i][2] * f[6 + s][l];
            }
          }
        }
        for (int i = 0; i < 6; ++i) {
          for (int j = 0; j < 6; ++j) {
            float* row = u + ((i * 6 + j) * c_pad + c) * k_pad + kb;
            for (int l = 0; l < kB; ++l) {
              const double e =
                  gf[i][0][l] * G[j][0] + gf[i][1][l] * G[j][1] + gf[i][2][l] * G[j][2];
              row[l] = static_cast<float>(e);
            }
            // padding: +0 (the arithmetic above gives -0 for some e)
            std::fill(row + (c < C ? nk : 0), row + kB, 0.0f);
          }
        }
      }
    }
  }
}

void winograd_filter_grads(int64_t C, const float* dwt, int64_t k_pad, int64_t c_pad, int64_t k0,
                           int64_t k1, float* dw) {
  // Per k, all c at once (loops over c innermost, for the vectoriser).
  std::vector<double> gm(static_cast<size_t>(18 * C)), out(static_cast<size_t>(C));
  for (int64_t k = k0; k < k1; ++k) {
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
