// bf16 precision on the CPU (nn/precision.h, nn/cpu/gemm_bf16.h):
// - the bf16 GEMM against fp64 references over shapes with a tail in every
//   blocking dimension (register tile 6 x 64, blocks of 512 columns and 256
//   pairs of depth; odd depths), each transpose, overwrite and accumulate:
//   within k * 2^-23 * sum|a b| of the fp64 product of the bf16-rounded
//   inputs (fp32 sums), and within 2^-7 * sum|a b| + that of the exact
//   product (bf16 keeps 8 significant bits: each input off by at most
//   2^-8 relative, a product by at most about 2^-7);
// - every path gives the bits of a scalar model of vdpbf16ps's arithmetic
//   (odd product first, one rounding per addition), on every CPU;
// - vdpbf16ps and the emulated tile give the same bits (normal numbers),
//   and so do the conversions on vcvtne2ps2bf16: every path this CPU runs
//   (the avx2 and avx512 builds emulated, the avx512 build on the bf16
//   instructions), reached through bf16_kernels.h (this file itself is
//   compiled as avx2: isa_namespace.h), and through the backend;
// - the GEMMs on operands already paired give gemm_bf16's bits;
// - each layer op in bf16 against fp32: relative L2 error below 1%;
// - results independent of the thread count;
// - rounding to nearest even, as PyTorch's conversion;
// - fp16 and unknown precisions refused with the key named.
#include <immintrin.h>

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/cpu/bf16_kernels.h"
#include "nn/cpu/gemm_bf16.h"
#include "nn/cpu_isa.h"
#include "support/backend_checks.h"

namespace lockstep::nn {
namespace {

using cpu::StridedMatrix;
using testing::bitwise_equal;
using testing::random_tensor;
using testing::random_values;

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

TEST(CpuBf16, RoundsToNearestEven) {
  EXPECT_EQ(cpu::round_to_bf16(1.0f), 1.0f);
  EXPECT_EQ(cpu::round_to_bf16(bits_float(0x3f808000u)), 1.0f);  // tie, even stays
  EXPECT_EQ(cpu::round_to_bf16(bits_float(0x3f818000u)), bits_float(0x3f820000u));  // tie up
  EXPECT_EQ(cpu::round_to_bf16(bits_float(0x3f808001u)), bits_float(0x3f810000u));
  EXPECT_TRUE(std::isnan(cpu::round_to_bf16(std::nanf(""))));
  EXPECT_EQ(cpu::round_to_bf16(INFINITY), INFINITY);
}

TEST(CpuBf16, PrecisionNamesAndRefusals) {
  EXPECT_EQ(parse_precision("bf16"), Precision::kBf16);
  EXPECT_EQ(parse_precision("fp32"), Precision::kFp32);
  EXPECT_EQ(parse_precision("fp16"), Precision::kFp16);
  EXPECT_FALSE(parse_precision("int8").has_value());
  EXPECT_NO_THROW(check_cpu_precision(Precision::kBf16, "k"));
  // fp16 runs on CUDA only: the check and the CPU backend refuse it.
  try {
    check_cpu_precision(Precision::kFp16, "config key precision");
    FAIL() << "fp16 accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("config key precision = \"fp16\": the CPU backend"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make_cpu_backend({.threads = 1, .precision = Precision::kFp16}), InputError);
}

struct Bf16GemmCase {
  int64_t m, n, k;
};

// Whether this CPU can run the vdpbf16ps tile.
bool have_dot() {
  return cpu_has_avx512_bf16();
}

// One way the bf16 kernels can run here: the avx2 build (emulated), the
// avx512 build emulated, the avx512 build on vdpbf16ps / vcvtne2ps2bf16.
struct Path {
  CpuIsa isa;
  bool dot;
  const cpu::Bf16Kernels& kernels() const { return cpu::bf16_kernels(isa); }
  std::string name() const { return to_string(isa) + (dot ? " vdpbf16ps" : " emulated"); }
};

// Every path this CPU runs, the avx2 emulation first.
std::vector<Path> paths() {
  std::vector<Path> out{{CpuIsa::kAvx2, false}};
  if (detect_cpu_isa() == CpuIsa::kAvx512) out.push_back({CpuIsa::kAvx512, false});
  if (have_dot()) out.push_back({CpuIsa::kAvx512, true});
  return out;
}

TEST(CpuBf16, GemmMatchesDoubleReferenceOverBlockTails) {
  // m: tile rows 6 (1, 5, 13); n: tile 64, block 512 (1, 17, 67, 515);
  // k: pairs (odd 1, 3, 37), block 256 pairs (513, 1030).
  const std::vector<Bf16GemmCase> cases = {{1, 1, 1},    {5, 17, 3},    {13, 67, 37},
                                           {7, 515, 40}, {13, 70, 513}, {6, 64, 1030}};
  for (const Bf16GemmCase& s : cases) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const std::vector<float> a = random_values(s.m * s.k, 1), b = random_values(s.k * s.n, 2);
      const StridedMatrix av =
          ta ? StridedMatrix{a.data(), 1, s.m} : StridedMatrix{a.data(), s.k, 1};
      const StridedMatrix bv =
          tb ? StridedMatrix{b.data(), 1, s.k} : StridedMatrix{b.data(), s.n, 1};
      const int64_t ldc = s.n + 3;
      for (bool accumulate : {false, true}) {
        const std::vector<float> c0 = random_values(s.m * ldc, 3);
        std::vector<std::vector<float>> got;
        for (const Path& path : paths()) {
          got.push_back(c0);
          path.kernels().gemm(s.m, s.n, s.k, av.data, av.row_stride, av.col_stride, bv.data,
                              bv.row_stride, bv.col_stride, got.back().data(), ldc, accumulate,
                              path.dot);
        }
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " ta " << ta
                                          << " tb " << tb << " accumulate " << accumulate);
        const std::vector<float>& emulated = got.front();
        int bad = 0;
        for (int64_t i = 0; i < s.m && bad < 5; ++i) {
          for (int64_t j = 0; j < s.n && bad < 5; ++j) {
            double rounded = accumulate ? c0[i * ldc + j] : 0.0, exact = rounded, mag = 0.0;
            for (int64_t p = 0; p < s.k; ++p) {
              const double x = av.data[i * av.row_stride + p * av.col_stride];
              const double y = bv.data[p * bv.row_stride + j * bv.col_stride];
              rounded += double(cpu::round_to_bf16(float(x))) * cpu::round_to_bf16(float(y));
              exact += x * y;
              mag += std::abs(x * y);
            }
            const double sum_bound = double(s.k + 2) * std::ldexp(1.0, -23) * (mag + 1.0);
            const double value = emulated[i * ldc + j];
            if (std::abs(value - rounded) > sum_bound ||
                std::abs(value - exact) > std::ldexp(1.0, -7) * mag + sum_bound) {
              ++bad;
              ADD_FAILURE() << "(" << i << ", " << j << "): " << value << " vs " << rounded
                            << " (bf16 inputs), " << exact << " (exact)";
            }
            for (size_t q = 1; q < got.size(); ++q) {
              if (got[q][i * ldc + j] != value) {
                ++bad;
                ADD_FAILURE() << "(" << i << ", " << j << "): " << paths()[q].name() << " "
                              << got[q][i * ldc + j] << ", avx2 emulated " << value;
              }
            }
          }
        }
      }
    }
  }
}

// The conversions into pair words and 16-bit rows, every length to past two
// vectors (each tail), with ties, NaN, infinities and signed zeros: the bits
// of round_to_bf16 on every path. The vcvtne2ps2bf16 path also flushes
// fp32 denormals to signed zero; the emulation rounds them.
TEST(CpuBf16, ConversionsGiveTheBitsOfRoundToBf16OnEveryPath) {
  std::vector<float> lo = random_values(40, 7), hi = random_values(40, 8);
  const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x7fc00001u, 0xff800000u,
                               0x80000000u, 0x7f7fffffu, 0x00000000u, 0xffa00000u};
  for (size_t i = 0; i < std::size(specials); ++i) {
    lo[3 * i] = bits_float(specials[i]);
    hi[3 * i + 1] = bits_float(specials[i]);
  }
  auto bf16 = [](float x) {
    uint32_t u;
    const float r = cpu::round_to_bf16(x);
    std::memcpy(&u, &r, sizeof u);
    return u >> 16;
  };
  for (const Path& path : paths()) {
    for (int64_t n = 0; n <= 40; ++n) {
      for (bool paired : {true, false}) {
        std::vector<uint32_t> words(static_cast<size_t>(n) + 1, 0xdeadbeefu);
        path.kernels().pair_rows(lo.data(), paired ? hi.data() : nullptr, n,
                                 reinterpret_cast<float*>(words.data()), path.dot);
        for (int64_t j = 0; j < n; ++j) {
          const uint32_t want = bf16(lo[j]) | (paired ? bf16(hi[j]) << 16 : 0u);
          ASSERT_EQ(words[j], want) << path.name() << " n " << n << " j " << j;
        }
        ASSERT_EQ(words[n], 0xdeadbeefu) << path.name() << ": wrote past " << n;
      }
      std::vector<uint16_t> halves(static_cast<size_t>(n) + 1, 0xbeefu);
      path.kernels().row(lo.data(), n, halves.data(), path.dot);
      for (int64_t j = 0; j < n; ++j) ASSERT_EQ(halves[j], bf16(lo[j])) << path.name() << " " << j;
      ASSERT_EQ(halves[n], 0xbeefu) << path.name() << ": wrote past " << n;
    }
    const float denormal = bits_float(0x807fffffu);  // rounds to -0x0080, the least normal
    uint32_t word = 0;
    path.kernels().pair_rows(&denormal, nullptr, 1, reinterpret_cast<float*>(&word), path.dot);
    EXPECT_EQ(word, path.dot ? 0x8000u : 0x8080u) << path.name();
  }
}

// The bf16 bits of x[0..16) from the CPU's own vcvtneps2bf16 (nearest
// even, NaN quieted, denormal inputs flushed to signed zero).
__attribute__((target("avx512f,avx512vl,avx512bf16"))) void hardware_bf16(const float* x,
                                                                          uint16_t* out) {
  const __m256bh h = _mm512_cvtneps_pbh(_mm512_loadu_ps(x));
  static_assert(sizeof h == 16 * sizeof(uint16_t));
  std::memcpy(out, &h, sizeof h);
}

// Every 16-bit high half (every exponent and bf16 mantissa: zeros, fp32
// denormals, normals, infinities, NaNs of both signs) with low halves that
// round down, tie (even and odd high half), round up and carry into the
// exponent: 393216 inputs through round_to_bf16 and each path's 16-bit row
// conversion, against the instruction. Only denormal inputs differ: the
// instruction flushes them to signed zero, the emulation rounds them.
TEST(CpuBf16, RoundingMatchesVcvtneps2bf16OnEveryHighHalf) {
  if (!have_dot()) GTEST_SKIP() << "this CPU has no AVX512_BF16: no hardware reference here";
  const uint32_t lows[] = {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu};
  std::vector<float> x;
  for (uint32_t high = 0; high < 0x10000u; ++high) {
    for (uint32_t low : lows) x.push_back(bits_float(high << 16 | low));
  }
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); i += 16) hardware_bf16(x.data() + i, want.data() + i);
  auto denormal = [](float v) { return v != 0.0f && std::fpclassify(v) == FP_SUBNORMAL; };
  int bad = 0;
  for (size_t i = 0; i < x.size() && bad < 10; ++i) {
    const float r = cpu::round_to_bf16(x[i]);
    uint32_t u;
    std::memcpy(&u, &r, sizeof u);
    if (!denormal(x[i]) && (u >> 16 != want[i] || (u & 0xffffu) != 0)) {
      ++bad;
      ADD_FAILURE() << "round_to_bf16(0x" << std::hex << i << " = input bits "
                    << std::bit_cast<uint32_t>(x[i]) << ") gives " << u << ", vcvtneps2bf16 "
                    << want[i];
    }
  }
  for (const Path& path : paths()) {
    std::vector<uint16_t> got(x.size());
    path.kernels().row(x.data(), static_cast<int64_t>(x.size()), got.data(), path.dot);
    for (size_t i = 0; i < x.size() && bad < 10; ++i) {
      if (denormal(x[i]) && !path.dot) continue;
      if (got[i] != want[i]) {
        ++bad;
        ADD_FAILURE() << path.name() << ": input bits 0x" << std::hex
                      << std::bit_cast<uint32_t>(x[i]) << " give " << got[i] << ", vcvtneps2bf16 "
                      << want[i];
      }
    }
  }
  // The emulation rounds denormals: the largest one rounds up to the least
  // normal bf16; the instruction gives zero of the same sign.
  EXPECT_EQ(want[0x807fu * std::size(lows) + 5], 0x8000u);  // input 0x807fffff
}

// B(k, n) as pair words: word (q, j) = bf16 B(2q, j) | bf16 B(2q + 1, j) << 16.
std::vector<uint32_t> pair_words(const std::vector<float>& b, int64_t k, int64_t n, int64_t ldb) {
  std::vector<uint32_t> w(static_cast<size_t>((k + 1) / 2 * ldb), 0u);
  auto bits = [](float x) {
    uint32_t u;
    const float r = cpu::round_to_bf16(x);
    std::memcpy(&u, &r, sizeof u);
    return u >> 16;
  };
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t j = 0; j < n; ++j) w[p / 2 * ldb + j] |= bits(b[p * n + j]) << (16 * (p % 2));
  }
  return w;
}

// A (m x k, rows k apart) as gemm_bf16_rows reads it: mr rows (zeros past
// m) of (k + 1) / 2 pair words, the pairs of A^T's rows.
std::vector<uint32_t> a_pair_rows(const std::vector<float>& a, int64_t m, int64_t k, int64_t mr) {
  std::vector<float> at(static_cast<size_t>(k * mr), 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) at[p * mr + i] = a[i * k + p];
  }
  const std::vector<uint32_t> aw = pair_words(at, k, mr, mr);  // (kq, mr)
  const int64_t kq = (k + 1) / 2;
  std::vector<uint32_t> rows(static_cast<size_t>(mr * kq));
  for (int64_t i = 0; i < mr; ++i) {
    for (int64_t q = 0; q < kq; ++q) rows[i * kq + q] = aw[q * mr + i];
  }
  return rows;
}

// The arithmetic of vdpbf16ps as scalar C++: C(i, j) from c0, for each pair
// q in increasing order + A(i, 2q + 1) B(2q + 1, j), then + A(i, 2q) B(2q, j),
// on bf16-rounded operands (past k: +0.0); every product of two bf16 is
// exact in fp32, so each addition rounds once.
float vdpbf16ps_model(const std::vector<float>& a, const std::vector<float>& b, int64_t k,
                      int64_t n, int64_t i, int64_t j, float c0) {
  const auto at = [&](int64_t p) { return p < k ? cpu::round_to_bf16(a[i * k + p]) : 0.0f; };
  const auto bt = [&](int64_t p) { return p < k ? cpu::round_to_bf16(b[p * n + j]) : 0.0f; };
  float acc = c0;
  for (int64_t p = 0; p < k; p += 2) {
    const float odd = at(p + 1) * bt(p + 1), even = at(p) * bt(p);
    acc += odd;
    acc += even;
  }
  return acc;
}

// Every path, the emulated tiles of this CPU too, gives the bits of that
// model (normal numbers: vdpbf16ps flushes denormals), through gemm_bf16
// (packed A and B, blocks of 256 pairs: depth 601 runs three) and
// gemm_bf16_rows (both as pair words, blocks of 128 pairs), overwriting
// and accumulating, over tails of the tiles. The test above checks the
// emulation against vdpbf16ps where the CPU has it; this one holds on every
// CPU.
TEST(CpuBf16, EveryPathGivesTheBitsOfTheVdpbf16psArithmetic) {
  const std::vector<Bf16GemmCase> cases = {{13, 70, 37}, {7, 19, 601}, {12, 64, 260}};
  for (const Bf16GemmCase& s : cases) {
    const std::vector<float> a = random_values(s.m * s.k, 11), b = random_values(s.k * s.n, 12);
    const std::vector<float> c0 = random_values(s.m * s.n, 13);
    const int64_t kq = (s.k + 1) / 2, mr = (s.m + 11) / 12 * 12, nr = (s.n + 15) / 16 * 16;
    const std::vector<uint32_t> a_rows = a_pair_rows(a, s.m, s.k, mr);
    const std::vector<uint32_t> b_rows = pair_words(b, s.k, s.n, nr);
    for (const Path& path : paths()) {
      for (bool accumulate : {false, true}) {
        SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " " << path.name()
                                          << " accumulate " << accumulate);
        std::vector<float> got = c0;
        path.kernels().gemm(s.m, s.n, s.k, a.data(), s.k, 1, b.data(), s.n, 1, got.data(), s.n,
                            accumulate, path.dot);
        std::vector<float> rows(static_cast<size_t>(mr * nr), 0.0f);
        for (int64_t i = 0; i < s.m; ++i)
          std::copy_n(c0.data() + i * s.n, s.n, rows.data() + i * nr);
        path.kernels().gemm_rows(mr, nr, kq, a_rows.data(), kq, b_rows.data(), nr, 0, rows.data(),
                                 nr, accumulate, path.dot);
        int bad = 0;
        for (int64_t i = 0; i < s.m && bad < 5; ++i) {
          for (int64_t j = 0; j < s.n && bad < 5; ++j) {
            const float want =
                vdpbf16ps_model(a, b, s.k, s.n, i, j, accumulate ? c0[i * s.n + j] : 0.0f);
            if (std::bit_cast<uint32_t>(got[i * s.n + j]) != std::bit_cast<uint32_t>(want) ||
                std::bit_cast<uint32_t>(rows[i * nr + j]) != std::bit_cast<uint32_t>(want)) {
              ++bad;
              ADD_FAILURE() << "(" << i << ", " << j << "): gemm " << got[i * s.n + j] << ", rows "
                            << rows[i * nr + j] << ", model " << want;
            }
          }
        }
      }
    }
  }
}

// gemm_bf16_pairs (A packed, B pair words) and gemm_bf16_rows (both pair
// words) give the bits of gemm_bf16 on the same operands, emulated and on
// vdpbf16ps, over tails of the tiles (m: 6 and 12 rows; n: 16, 32, 64 and
// the 64-column tile; depth: blocks of 128 pairs, odd depths).
TEST(CpuBf16, PairedOperandsGiveTheBitsOfGemmBf16) {
  const std::vector<Bf16GemmCase> cases = {{1, 3, 1}, {7, 67, 37}, {13, 16, 300}, {24, 48, 259}};
  for (const Bf16GemmCase& s : cases) {
    const std::vector<float> a = random_values(s.m * s.k, 4), b = random_values(s.k * s.n, 5);
    const int64_t kq = (s.k + 1) / 2, ldb = s.n + 5;
    const std::vector<uint32_t> bw = pair_words(b, s.k, s.n, ldb);
    // rows: m and n rounded up to whole tiles, A as pair words (its transpose's pairs)
    const int64_t mr = (s.m + 11) / 12 * 12, nr = (s.n + 15) / 16 * 16;
    const std::vector<uint32_t> a_rows = a_pair_rows(a, s.m, s.k, mr);
    const std::vector<uint32_t> bw_rows = pair_words(b, s.k, s.n, nr);
    for (const Path& path : paths()) {
      SCOPED_TRACE(::testing::Message() << s.m << "x" << s.n << "x" << s.k << " " << path.name());
      const cpu::Bf16Kernels& kernels = path.kernels();
      std::vector<float> want(static_cast<size_t>(s.m * s.n));
      kernels.gemm(s.m, s.n, s.k, a.data(), s.k, 1, b.data(), s.n, 1, want.data(), s.n, false,
                   path.dot);
      std::vector<uint32_t> ap(static_cast<size_t>(kernels.packed_a_size(s.m, s.k)));
      kernels.pack_a(s.m, s.k, a.data(), s.k, 1, ap.data());
      std::vector<float> got(static_cast<size_t>(s.m * s.n), -1.0f);
      kernels.gemm_pairs(s.m, s.n, kq, ap.data(), bw.data(), ldb, got.data(), s.n, false, path.dot);
      EXPECT_EQ(got, want);
      std::vector<float> rows(static_cast<size_t>(mr * nr), -1.0f);
      kernels.gemm_rows(mr, nr, kq, a_rows.data(), kq, bw_rows.data(), nr, 0, rows.data(), nr,
                        false, path.dot);
      for (int64_t i = 0; i < s.m; ++i) {
        for (int64_t j = 0; j < s.n; ++j)
          ASSERT_EQ(rows[i * nr + j], want[i * s.n + j]) << "rows (" << i << ", " << j << ")";
      }
    }
  }
}

double relative_l2(const Tensor& got, const Tensor& want) {
  double d = 0.0, w = 0.0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    d += std::pow(double(got.data()[i]) - want.data()[i], 2);
    w += std::pow(double(want.data()[i]), 2);
  }
  return std::sqrt(d / std::max(w, 1e-30));
}

// y, dx, dw, db of one convolution, and C of three GEMMs, on `backend`.
std::vector<Tensor> layer_ops(Backend& be, const Conv2dGeometry& g) {
  const Tensor x = random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 1);
  const Tensor w = random_tensor({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, 2);
  const Tensor b = random_tensor({g.out_channels}, 3);
  const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 4);
  std::vector<Tensor> out;
  out.emplace_back(Shape{g.batch, g.out_channels, g.out_h(), g.out_w()});
  out.emplace_back(x.shape());
  out.emplace_back(w.shape());
  out.emplace_back(b.shape());
  be.conv2d_forward(g, x.data(), w.data(), b.data(), out[0].data());
  be.conv2d_backward_data(g, w.data(), dy.data(), out[1].data());
  be.conv2d_backward_filter(g, x.data(), dy.data(), out[2].data(), out[3].data());
  const int64_t m = 33, n = 70, k = 150;  // a linear layer's forward, dx and dw shapes
  const Tensor a = random_tensor({m * k}, 5), bm = random_tensor({k * n}, 6);
  for (int t : {0, 1, 2}) {
    out.emplace_back(Shape{m * n});
    be.gemm(t == 1, t == 2, m, n, k, 1.0f, a.data(), bm.data(), 0.0f, out.back().data());
  }
  return out;
}

class CpuBf16Layers : public ::testing::TestWithParam<Conv2dGeometry> {};

TEST_P(CpuBf16Layers, CloseToFp32AndIndependentOfThreads) {
  const Conv2dGeometry g = GetParam();
  auto fp32 = make_cpu_backend({.threads = 2});
  const std::vector<Tensor> want = layer_ops(*fp32, g);
  std::vector<Tensor> first;
  for (int threads : {1, 2, 3}) {
    auto bf16 = make_cpu_backend({.threads = threads, .precision = Precision::kBf16});
    std::vector<Tensor> got = layer_ops(*bf16, g);
    // Without db (no bias): no bias sums, dw's bits unchanged.
    const Tensor x = random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 1);
    const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 4);
    Tensor dw(got[2].shape());
    bf16->conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), nullptr);
    EXPECT_TRUE(bitwise_equal(dw, got[2])) << "dw without db, " << bf16->name();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_LT(relative_l2(got[i], want[i]), 0.01) << "output " << i << ", " << bf16->name();
      if (!first.empty()) {
        EXPECT_TRUE(bitwise_equal(got[i], first[i])) << "output " << i << ", " << bf16->name();
      }
    }
    if (first.empty()) first = std::move(got);
  }
}

INSTANTIATE_TEST_SUITE_P(Geometries, CpuBf16Layers,
                         ::testing::Values(Conv2dGeometry{3, 3, 32, 32, 16, 5, 5, 1, 2},
                                           Conv2dGeometry{20, 5, 7, 9, 6, 3, 3, 1, 1},
                                           Conv2dGeometry{2, 4, 11, 10, 7, 3, 3, 2, 1},
                                           Conv2dGeometry{2, 64, 8, 8, 70, 5, 5, 1, 2},
                                           Conv2dGeometry{3, 3, 9, 8, 5, 3, 1, 1, 0},
                                           Conv2dGeometry{2, 5, 5, 5, 4, 1, 1, 1, 1},
                                           Conv2dGeometry{17, 16, 8, 8, 33, 3, 3, 1, 1}),
                         [](const auto& p) { return testing::geometry_name(p.param); });

TEST(CpuBf16, EmulatedPathGivesTheSameBitsAsVdpbf16ps) {
  if (!have_dot()) GTEST_SKIP() << "this CPU has no AVX512_BF16: only the emulated path runs";
  auto dot = make_cpu_backend({.threads = 2, .precision = Precision::kBf16});
  auto emulated =
      make_cpu_backend({.threads = 2, .isa_cap = CpuIsa::kAvx2, .precision = Precision::kBf16});
  ASSERT_NE(dot->name().find("vdpbf16ps"), std::string::npos) << dot->name();
  ASSERT_NE(emulated->name().find("emulated"), std::string::npos) << emulated->name();
  // im2col; wide outputs read in place (rows of 20: a 4-float tail);
  // stride 2 over odd planes (81 and 49 floats: conversion tails of 1), an
  // odd channel count (a zero high half), resnet20's 7 x 7 planes
  for (const Conv2dGeometry& g :
       {Conv2dGeometry{4, 16, 12, 12, 24, 3, 3, 1, 1}, Conv2dGeometry{2, 5, 20, 20, 7, 3, 3, 1, 1},
        Conv2dGeometry{3, 5, 9, 9, 8, 3, 3, 2, 1}, Conv2dGeometry{2, 32, 7, 7, 32, 3, 3, 1, 1}}) {
    const std::vector<Tensor> a = layer_ops(*dot, g), b = layer_ops(*emulated, g);
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_TRUE(bitwise_equal(a[i], b[i])) << testing::geometry_name(g) << " output " << i;
  }
}

}  // namespace
}  // namespace lockstep::nn
