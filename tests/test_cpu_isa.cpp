// The instruction sets of the CPU backend (nn/cpu_isa.h): parsing and the
// cap; the kernels of every set this machine has give the same bits as the
// avx2 kernels (the same vector code and summation orders, only wider
// registers) on pooling (max, average, global), channel padding, softmax and
// optimizer updates, and agree to a few ulp on BatchNorm's apply steps, the
// residual add, convolutions and GEMMs (FMA contraction); and no code
// outside the avx512 kernels of the lockstep binary uses an AVX-512
// instruction (objdump), so the binary runs on an AVX2-only CPU.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "nn/backend.h"
#include "nn/cpu_isa.h"
#include "support/backend_checks.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::random_tensor;

TEST(CpuIsa, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_cpu_isa("avx2", "X"), CpuIsa::kAvx2);
  EXPECT_EQ(parse_cpu_isa("avx512", "X"), CpuIsa::kAvx512);
  try {
    parse_cpu_isa("sse4", "environment variable LOCKSTEP_CPU_ISA");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("LOCKSTEP_CPU_ISA = \"sse4\""), std::string::npos);
  }
}

// The kernel lists amx_bf16 in /proc/cpuinfo only where the CPU has it and
// the kernel supports its tile state; lockstep's detection agrees (this
// host may have neither: then both say no).
TEST(CpuIsa, AmxDetectionAgreesWithTheKernelsFlags) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool flag = false;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    flag = (line + " ").find(" amx_bf16 ") != std::string::npos;
    break;
  }
  EXPECT_EQ(cpu_has_amx_bf16(), flag);
  if (cpu_has_amx_bf16()) {
    EXPECT_TRUE(cpu_has_avx512_bf16());
  }
}

TEST(CpuIsa, CapLowersTheChoiceButNeverRaisesIt) {
  const CpuIsa best = detect_cpu_isa();
  EXPECT_EQ(choose_cpu_isa(std::nullopt), best);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::kAvx2), CpuIsa::kAvx2);
  EXPECT_EQ(choose_cpu_isa(CpuIsa::kAvx512), best);
  EXPECT_NE(make_cpu_backend({.threads = 1, .isa_cap = CpuIsa::kAvx2})->name().find("avx2"),
            std::string::npos);
}

// The backend names the kernels it runs (what reproducible ranks and
// checkpoints compare): the instruction set under the cap, avx512_bf16 for
// bf16 on vdpbf16ps, and the convolutions' method: in bf16 direct, with
// fp32 Winograd where it applies unless the option says direct.
TEST(CpuIsa, TheBackendNamesTheKernelsItRuns) {
  const std::string best = to_string(detect_cpu_isa());
  const bool dot = detect_cpu_isa() == CpuIsa::kAvx512 && cpu_has_avx512_bf16();
  const auto kernels = [](CpuBackendOptions o) { return make_cpu_backend(o)->kernels(); };
  KernelChoice k = kernels({.threads = 1});
  EXPECT_EQ(k.description(), best + " kernels, Winograd 3x3 convolutions");
  EXPECT_FALSE(k.bf16_emulated);
  k = kernels({.threads = 1, .winograd = false});
  EXPECT_EQ(k.description(), best + " kernels, direct convolutions");
  k = kernels({.threads = 1, .isa_cap = CpuIsa::kAvx2, .precision = Precision::kBf16});
  EXPECT_EQ(k.description(),
            "avx2 kernels, bf16 direct convolutions, fp32 Winograd 3x3 where it applies");
  EXPECT_TRUE(k.bf16_emulated);
  for (bool winograd : {true, false}) {
    k = kernels({.threads = 1, .precision = Precision::kBf16, .winograd = winograd});
    EXPECT_EQ(k.description(), (dot ? "avx512_bf16" : best) + " kernels, bf16 direct convolutions" +
                                   (winograd ? ", fp32 Winograd 3x3 where it applies" : ""));
    EXPECT_EQ(k.label, dot ? "avx512_bf16" : best);
    EXPECT_EQ(k.bf16_emulated, !dot);
  }
}

// Runs `op` on a backend of each instruction set this CPU has, with 1 and
// with 2 threads, and expects the outputs (the tensors op returns) of the
// two sets at each thread count to agree: bitwise when tolerance is 0, else
// |avx512 - avx2| <= tolerance * (1 + |avx2|). The kernels share their code
// and summation orders, but the compiler contracts a * b + c into one FMA
// in places that differ between the two builds (one rounding instead of
// two, a few ulp per product sum).
void expect_isas_agree(const std::function<std::vector<Tensor>(Backend&)>& op, float tolerance) {
  if (detect_cpu_isa() == CpuIsa::kAvx2) {
    GTEST_SKIP() << "this CPU has no AVX-512: only the avx2 kernels can run here";
  }
  for (int threads : {1, 2}) {
    auto reference = make_cpu_backend({.threads = threads, .isa_cap = CpuIsa::kAvx2});
    auto wide = make_cpu_backend({.threads = threads, .isa_cap = CpuIsa::kAvx512});
    const std::vector<Tensor> want = op(*reference), got = op(*wide);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (tolerance == 0.0f) {
        EXPECT_TRUE(bitwise_equal(got[i], want[i])) << "output " << i << ", " << wide->name();
        continue;
      }
      ASSERT_EQ(got[i].numel(), want[i].numel());
      int bad = 0;
      for (int64_t j = 0; j < got[i].numel() && bad < 5; ++j) {
        const float g = got[i].data()[j], w = want[i].data()[j];
        if (!(std::abs(g - w) <= tolerance * (1.0f + std::abs(w)))) {
          ++bad;
          ADD_FAILURE() << "output " << i << "[" << j << "]: " << g << " on " << wide->name()
                        << ", " << w << " on avx2";
        }
      }
    }
  }
}

// Sums of up to 1600 products of values in [-1, 1]: a few ulp of the sum of
// magnitudes apart.
constexpr float kProductTolerance = 1e-5f;

class CpuIsaConv : public ::testing::TestWithParam<Conv2dGeometry> {};

TEST_P(CpuIsaConv, ForwardAndBackwardAgreeOnEveryIsa) {
  const Conv2dGeometry g = GetParam();
  const Tensor x = random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 1);
  const Tensor w = random_tensor({g.out_channels, g.in_channels, g.kernel_h, g.kernel_w}, 2);
  const Tensor b = random_tensor({g.out_channels}, 3);
  const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 4);
  expect_isas_agree(
      [&](Backend& be) {
        Tensor y({g.batch, g.out_channels, g.out_h(), g.out_w()}), dx(x.shape()), dw(w.shape()),
            db(b.shape());
        be.conv2d_forward(g, x.data(), w.data(), b.data(), y.data());
        be.conv2d_backward_data(g, w.data(), dy.data(), dx.data());
        be.conv2d_backward_filter(g, x.data(), dy.data(), dw.data(), db.data());
        std::vector<Tensor> out;
        for (Tensor* t : {&y, &dx, &dw, &db}) out.push_back(std::move(*t));
        return out;
      },
      kProductTolerance);
}

// Stride 1 wide and narrow outputs, stride 2 with padding, 1x1, and the
// shapes of alexnet_cifar's first layers (large weight matrices: the packed
// GEMM).
INSTANTIATE_TEST_SUITE_P(Geometries, CpuIsaConv,
                         ::testing::Values(Conv2dGeometry{3, 3, 32, 32, 16, 5, 5, 1, 2},
                                           Conv2dGeometry{2, 5, 7, 9, 6, 3, 3, 1, 1},
                                           Conv2dGeometry{2, 4, 11, 10, 7, 3, 3, 2, 1},
                                           Conv2dGeometry{2, 8, 6, 6, 5, 1, 1, 1, 0},
                                           Conv2dGeometry{2, 64, 16, 16, 96, 5, 5, 1, 2}),
                         [](const auto& p) { return testing::geometry_name(p.param); });

TEST(CpuIsaGemm, EveryTransposeSmallAndLargeAgree) {
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {7, 33, 19}, {70, 50, 30}, {300, 270, 200}, {130, 600, 260}}) {
    for (int t = 0; t < 4; ++t) {
      const bool ta = t & 1, tb = t & 2;
      const Tensor a = random_tensor({m * k}, 5), b = random_tensor({k * n}, 6);
      const Tensor c0 = random_tensor({m * n}, 7);
      for (const auto& [alpha, beta] :
           std::vector<std::pair<float, float>>{{1.0f, 0.0f}, {1.0f, 1.0f}, {0.5f, 2.0f}}) {
        SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k << " ta " << ta << " tb "
                                          << tb << " alpha " << alpha << " beta " << beta);
        expect_isas_agree(
            // Copies of the bindings: clang 14 cannot capture structured bindings.
            [&, m = m, n = n, k = k, alpha = alpha, beta = beta](Backend& be) {
              Tensor c = c0.clone();
              be.gemm(ta, tb, m, n, k, alpha, a.data(), b.data(), beta, c.data());
              std::vector<Tensor> out;
              out.push_back(std::move(c));
              return out;
            },
            kProductTolerance);
      }
    }
  }
}

TEST(CpuIsaOps, PoolingSoftmaxAndUpdatesSameBits) {
  const Pool2dGeometry pg{4, 6, 13, 12, 2, 2}, pg3{2, 3, 11, 11, 3, 2};
  const Tensor x = random_tensor({4 * 6 * 13 * 12}, 8), logits = random_tensor({64 * 10}, 9);
  const Tensor grad = random_tensor({10007}, 10), w0 = random_tensor({10007}, 11);
  std::vector<int32_t> labels(64);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int32_t>(i % 10);
  expect_isas_agree(
      [&](Backend& be) {
        std::vector<Tensor> out;
        for (const Pool2dGeometry& g : {pg, pg3}) {
          Tensor y({g.batch * g.channels * g.out_h() * g.out_w()}),
              dx({g.batch * g.channels * g.in_h * g.in_w});
          be.maxpool2d_forward(g, x.data(), y.data());
          be.maxpool2d_backward(g, x.data(), y.data(), y.data(), dx.data());
          out.push_back(std::move(y));
          out.push_back(std::move(dx));
        }
        Tensor logp(logits.shape()), dlogits(logits.shape()), relu(x.shape());
        be.log_softmax_forward(64, 10, logits.data(), logp.data());
        be.softmax_cross_entropy(64, 10, logits.data(), labels.data(), 0.5f, dlogits.data(), 0.0f);
        be.relu_forward(x.numel(), x.data(), relu.data());
        Tensor w = w0.clone(), velocity({w0.numel()}), w2 = w0.clone(), m({w0.numel()}),
               v({w0.numel()});
        be.fill(velocity.numel(), 0.0f, velocity.data());
        be.fill(m.numel(), 0.0f, m.data());
        be.fill(v.numel(), 0.0f, v.data());
        for (int step = 0; step < 3; ++step) {
          be.sgd_update(w.numel(), {.lr = 0.1f, .momentum = 0.9f, .weight_decay = 1e-4f}, w.data(),
                        grad.data(), velocity.data());
          be.adam_update(w2.numel(), {.lr = 1e-3f, .step = step + 1}, w2.data(), grad.data(),
                         m.data(), v.data());
        }
        for (Tensor* t : {&logp, &dlogits, &relu, &w, &velocity, &w2, &m, &v})
          out.push_back(std::move(*t));
        return out;
      },
      0.0f);
}

// The ops a CIFAR ResNet adds (average and global pooling, the option-A
// shortcut's channel padding, BatchNorm's apply steps, the residual add):
// the avx2 builds are what Zen 2/3 nodes run, and no other test reaches them
// on an AVX-512 machine. Sizes leave a tail in every vector loop.
std::vector<Tensor> pooling_and_padding(Backend& be, const Tensor& x) {
  std::vector<Tensor> out;
  for (const Pool2dGeometry& g : {Pool2dGeometry{4, 6, 13, 12, 2, 2}, {2, 3, 11, 11, 3, 2}}) {
    Tensor y({g.batch * g.channels * g.out_h() * g.out_w()}),
        dx({g.batch * g.channels * g.in_h * g.in_w});
    be.avgpool2d_forward(g, x.data(), y.data());
    be.avgpool2d_backward(g, y.data(), dx.data());
    out.push_back(std::move(y));
    out.push_back(std::move(dx));
  }
  for (const auto& [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{15, 49}, {7, 67}}) {
    Tensor y({rows}), dx({rows * cols});
    be.row_mean_forward(rows, cols, x.data(), y.data());
    be.row_mean_backward(rows, cols, y.data(), dx.data());
    out.push_back(std::move(y));
    out.push_back(std::move(dx));
  }
  for (const ChannelPadGeometry& g :
       {ChannelPadGeometry{2, 5, 9, 9, 12, 3, 2}, {3, 4, 13, 7, 4, 0, 1}}) {
    Tensor y({g.batch * g.out_channels * g.out_h() * g.out_w()}),
        dx({g.batch * g.in_channels * g.in_h * g.in_w});
    be.channel_pad_forward(g, x.data(), y.data());
    be.channel_pad_backward(g, y.data(), dx.data());
    out.push_back(std::move(y));
    out.push_back(std::move(dx));
  }
  return out;
}

// BatchNorm's element-wise steps (with and without the fused ReLU) and the
// residual add; the channel sums are BatchNormKernels' (test_batchnorm.cpp).
std::vector<Tensor> batchnorm_and_add(Backend& be, const Tensor& x, const Tensor& dy) {
  std::vector<Tensor> out;
  const BatchNormGeometry g{3, 5, 67};
  const Tensor coef = random_tensor({5 * g.channels}, 12, 0.5f, 1.5f);
  for (bool relu : {false, true}) {
    Tensor y({g.batch * g.channels * g.spatial}), dx(y.shape());
    be.batchnorm_apply(g, x.data(), coef.data(), relu, y.data());
    be.batchnorm_backward_apply(g, x.data(), relu ? y.data() : nullptr, dy.data(), coef.data(),
                                dx.data());
    out.push_back(std::move(y));
    out.push_back(std::move(dx));
  }
  for (bool relu : {false, true}) {
    Tensor y({1007});
    be.add_forward(y.numel(), x.data(), dy.data(), relu, y.data());
    out.push_back(std::move(y));
  }
  return out;
}

TEST(CpuIsaOps, ResNetOpsAgreeOnEveryIsa) {
  const Tensor x = random_tensor({4 * 6 * 13 * 12}, 13), dy = random_tensor({4 * 6 * 13 * 12}, 14);
  expect_isas_agree([&](Backend& be) { return pooling_and_padding(be, x); }, 0.0f);
  // One rounding of x * scale + shift in one build, two in the other.
  expect_isas_agree([&](Backend& be) { return batchnorm_and_add(be, x, dy); }, 1e-6f);
}

// Functions of the lockstep binary whose code names an AVX-512 register
// (zmm, k0-k7, or xmm/ymm 16-31, which only EVEX encodings reach).
std::set<std::string> functions_using_avx512(const std::string& binary) {
  std::set<std::string> found;
  FILE* pipe = popen(("objdump -d --no-show-raw-insn -C " + binary + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return found;
  const std::regex avx512_register(R"(%(zmm|k[0-7]\b|[xy]mm(1[6-9]|2[0-9]|3[01])\b))");
  std::string function, line;
  for (int ch; (ch = fgetc(pipe)) != EOF;) {
    if (ch != '\n') {
      line.push_back(static_cast<char>(ch));
      continue;
    }
    if (line.size() > 2 && line.back() == ':' && line.find(" <") != std::string::npos) {
      function = line;
    } else if (std::regex_search(line, avx512_register)) {
      found.insert(function);
    }
    line.clear();
  }
  pclose(pipe);
  return found;
}

TEST(CpuIsaBinary, AvxFiveTwelveOnlyInsideTheAvx512Kernels) {
  const std::set<std::string> functions = functions_using_avx512(LOCKSTEP_BINARY);
  ASSERT_FALSE(functions.empty()) << "objdump found no AVX-512 code at all in " << LOCKSTEP_BINARY
                                  << " (is objdump installed? are the avx512 kernels linked?)";
  for (const std::string& f : functions) {
    EXPECT_NE(f.find("lockstep::nn::cpu::avx512::"), std::string::npos)
        << "AVX-512 instructions outside the avx512 kernels: " << f;
  }
}

}  // namespace
}  // namespace lockstep::nn
