// winograd_error [tiles]: how much Winograd's transforms magnify the
// rounding of bf16 operands (the README's "bf16 and Winograd"). For each
// F(m x m, 3x3) and set of interpolation points below, the transforms are
// built by Toom-Cook (A^T, G, B^T from the points and infinity, checked
// exact on a random 1-D case), then `tiles` random tiles of 32 input
// channels (normal inputs, filters of deviation 1/3) are convolved four
// ways and compared with the exact sums (double): bf16's direct products
// (autocast's arithmetic: both operands rounded, products summed exactly),
// Winograd with its transformed operands rounded to bf16, and to fp32.
// Printed: the multiplications per output and the rms error of each way
// relative to the outputs' rms. Exits 1 if a transform is not exact.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace {

using Vec = std::vector<double>;

constexpr int kR = 3;          // filter taps
constexpr int kChannels = 32;  // input channels summed per output

// x rounded to bf16, nearest even (finite inputs).
double bf16(double x) {
  const auto f = static_cast<float>(x);
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r = 0;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

double fp32(double x) {
  return static_cast<float>(x);
}

Vec poly_mul(const Vec& a, const Vec& b) {
  Vec c(a.size() + b.size() - 1, 0.0);
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
  }
  return c;
}

// F(m, 3) on the finite points p (m + 1 of them) and infinity: y = A^T
// [(G g) . (B^T d)] for a 1-D input d of m + 2 and filter g of 3.
struct Transforms {
  int m, n;  // outputs per tile; points (m + 2)
  Vec at;    // A^T (m, n)
  Vec g;     // G (n, 3)
  Vec bt;    // B^T (n, n)
};

Transforms toom_cook(int m, const Vec& p) {
  const int n = m + kR - 1, finite = n - 1;
  Transforms t{m, n, Vec(m * n, 0.0), Vec(n * kR, 0.0), Vec(n * n, 0.0)};
  Vec all{1.0};
  for (int l = 0; l < finite; ++l) all = poly_mul(all, {-p[l], 1.0});
  for (int j = 0; j < finite; ++j) {
    for (int i = 0; i < m; ++i) t.at[i * n + j] = std::pow(p[j], i);
    double norm = 1.0;
    Vec others{1.0};
    for (int l = 0; l < finite; ++l) {
      if (l == j) continue;
      norm *= p[j] - p[l];
      others = poly_mul(others, {-p[l], 1.0});
    }
    for (int k = 0; k < kR; ++k) t.g[j * kR + k] = std::pow(p[j], k) / norm;
    for (int k = 0; k < static_cast<int>(others.size()); ++k) t.bt[j * n + k] = others[k];
  }
  t.at[(m - 1) * n + finite] = 1.0;
  t.g[finite * kR + kR - 1] = 1.0;
  for (int k = 0; k < n; ++k) t.bt[finite * n + k] = all[k];
  return t;
}

// The largest error of the 1-D transform against the direct correlation.
double check_1d(const Transforms& t, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.0);
  Vec d(t.n), g(kR);
  for (double& x : d) x = normal(rng);
  for (double& x : g) x = normal(rng);
  double worst = 0.0;
  for (int i = 0; i < t.m; ++i) {
    double y = 0.0, exact = 0.0;
    for (int j = 0; j < t.n; ++j) {
      double gj = 0.0, dj = 0.0;
      for (int k = 0; k < kR; ++k) gj += t.g[j * kR + k] * g[k];
      for (int k = 0; k < t.n; ++k) dj += t.bt[j * t.n + k] * d[k];
      y += t.at[i * t.n + j] * gj * dj;
    }
    for (int k = 0; k < kR; ++k) exact += d[i + k] * g[k];
    worst = std::max(worst, std::abs(y - exact));
  }
  return worst;
}

struct Errors {
  double direct = 0, winograd_bf16 = 0, winograd_fp32 = 0, exact = 0;  // sums of squares
};

// out (rows, rows) = l x l^T for l (rows, inner) and x (inner, inner);
// tmp holds rows x inner.
void sandwich(const double* l, const double* x, int rows, int inner, double* tmp, double* out) {
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < inner; ++j) {
      double s = 0.0;
      for (int k = 0; k < inner; ++k) s += l[i * inner + k] * x[k * inner + j];
      tmp[i * inner + j] = s;
    }
  }
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < rows; ++j) {
      double s = 0.0;
      for (int k = 0; k < inner; ++k) s += tmp[i * inner + k] * l[j * inner + k];
      out[i * rows + j] = s;
    }
  }
}

// One tile of kChannels channels, added to e.
void tile(const Transforms& t, std::mt19937& rng, Errors& e) {
  const int n = t.n, m = t.m;
  std::normal_distribution<double> normal(0.0, 1.0);
  Vec d(kChannels * n * n), g(kChannels * kR * kR);
  for (double& x : d) x = normal(rng);
  for (double& x : g) x = normal(rng) / 3.0;
  Vec mb(n * n, 0.0), mf(n * n, 0.0), tmp(n * n), v(n * n), u(n * n);
  for (int c = 0; c < kChannels; ++c) {
    const double* dc = d.data() + c * n * n;
    const double* gc = g.data() + c * kR * kR;
    // V = B^T d B, U = G g G^T
    sandwich(t.bt.data(), dc, n, n, tmp.data(), v.data());
    sandwich(t.g.data(), gc, n, kR, tmp.data(), u.data());
    for (int k = 0; k < n * n; ++k) {
      mb[k] += bf16(u[k]) * bf16(v[k]);
      mf[k] += fp32(u[k]) * fp32(v[k]);
    }
  }
  for (int oi = 0; oi < m; ++oi) {
    for (int oj = 0; oj < m; ++oj) {
      double yb = 0.0, yf = 0.0, exact = 0.0, direct = 0.0;
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          const double a = t.at[oi * n + i] * t.at[oj * n + j];
          yb += a * mb[i * n + j];
          yf += a * mf[i * n + j];
        }
      }
      for (int c = 0; c < kChannels; ++c) {
        for (int r = 0; r < kR; ++r) {
          for (int s = 0; s < kR; ++s) {
            const double x = d[(c * n + oi + r) * n + oj + s], w = g[(c * kR + r) * kR + s];
            exact += x * w;
            direct += bf16(x) * bf16(w);
          }
        }
      }
      e.direct += (direct - exact) * (direct - exact);
      e.winograd_bf16 += (yb - exact) * (yb - exact);
      e.winograd_fp32 += (yf - exact) * (yf - exact);
      e.exact += exact * exact;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int tiles = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (tiles <= 0) {
    std::fprintf(stderr, "winograd_error: tiles must be a positive count, not \"%s\"\n", argv[1]);
    return 2;
  }
  struct Case {
    const char* name;
    int m;
    Vec points;
  };
  const Case cases[] = {
      {"F(2x2) 0 1 -1", 2, {0, 1, -1}},
      {"F(3x3) 0 1 -1 2", 3, {0, 1, -1, 2}},
      {"F(3x3) 0 1 -1 1/2", 3, {0, 1, -1, 0.5}},
      {"F(4x4) 0 1 -1 2 -2", 4, {0, 1, -1, 2, -2}},
      {"F(4x4) 0 1 -1 1/2 -1/2", 4, {0, 1, -1, 0.5, -0.5}},
      {"F(4x4) 0 1 -1 1/2 -2", 4, {0, 1, -1, 0.5, -2}},
  };
  std::mt19937 rng(1);
  std::printf("%d tiles of %d channels; rms error / rms output\n", tiles, kChannels);
  std::printf("%-24s %10s %12s %22s %14s\n", "transform, points", "mults/out", "bf16 direct",
              "Winograd on bf16", "Winograd fp32");
  int failed = 0;
  for (const Case& c : cases) {
    const Transforms t = toom_cook(c.m, c.points);
    if (const double worst = check_1d(t, rng); worst > 1e-12) {
      std::fprintf(stderr, "winograd_error: %s is not exact (error %.3g)\n", c.name, worst);
      failed = 1;
      continue;
    }
    Errors e;
    for (int i = 0; i < tiles; ++i) tile(t, rng, e);
    std::printf("%-24s %10.2f %12.2e %12.2e (%5.1fx) %14.2e\n", c.name,
                static_cast<double>(t.n * t.n) / (t.m * t.m), std::sqrt(e.direct / e.exact),
                std::sqrt(e.winograd_bf16 / e.exact), std::sqrt(e.winograd_bf16 / e.direct),
                std::sqrt(e.winograd_fp32 / e.exact));
  }
  return failed;
}
