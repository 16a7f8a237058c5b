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
  // Per input channel c, tiles of kB output channels: the filters of c for
  // successive k come from the same lines of w as those of c - 1, and each
  // (e, c) row is made from start to end in runs of kB floats. Transformed
  // filters larger than the L2 cache (AlexNet-CIFAR's 192-384-channel
  // layers: 10-14 MB) are made a c at a time in a buffer, then copied out
  // row after row: written in place, 36 rows at once, the stores waited on
  // memory (1.35-1.8x slower). (A filter at a time, k inner, wrote 36
  // scattered floats per filter and took most of the time.)
  constexpr int kB = 16;
  const bool staged = 36 * c_pad * k_pad * static_cast<int64_t>(sizeof(float)) > (int64_t{1} << 20);
  std::vector<float> rows(staged ? static_cast<size_t>(36 * k_pad) : 0);
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t kb = 0; kb < k_pad; kb += kB) {
      const int nk = c < C ? static_cast<int>(std::clamp<int64_t>(K - kb, 0, kB)) : 0;
      double f[9][kB];  // the 3x3 filters of (kb + l, c), lanes l; zero past nk
      for (int l = 0; l < nk; ++l) {
        const float* src = w + ((kb + l) * C + c) * 9;
        for (int t = 0; t < 9; ++t) f[t][l] = src[t];
      }
      for (int t = 0; t < 9; ++t) std::fill(f[t] + nk, f[t] + kB, 0.0);
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
          const int64_t e = i * 6 + j;
          float* row = (staged ? rows.data() + e * k_pad : u + (e * c_pad + c) * k_pad) + kb;
          for (int l = 0; l < kB; ++l) {
            const double v = gf[i][0][l] * G[j][0] + gf[i][1][l] * G[j][1] + gf[i][2][l] * G[j][2];
            row[l] = static_cast<float>(v);
          }
          // padding: +0 (the arithmetic above gives -0 for some e)
          std::fill(row + nk, row + kB, 0.0f);
        }
      }
    }
    if (staged) {
      for (int e = 0; e < 36; ++e) {
        std::copy_n(rows.data() + e * k_pad, k_pad, u + (e * c_pad + c) * k_pad);
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
