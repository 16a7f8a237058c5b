// The CPU backend's Winograd F(4x4, 3x3) convolutions (nn/cpu/conv_winograd.cpp):
// forward, data and weight gradients against a reference in double, within the
// rounding bound of expect_close; the same bits whatever the batch around a
// sample, the thread count and the instruction set; the direct convolution
// when the backend is built without it; and a resnet20-shaped layer (16
// channels, 32 x 32) as well as shapes that leave partial tiles and
// partial channel vectors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/platform/cpu_isa_env.h"
#include "common/error.h"
#include "nn/backend.h"
#include "nn/cpu/conv_common.h"
#include "nn/cpu/thread_pool.h"
#include "nn/cpu/winograd_blocking.h"
#include "nn/cpu/winograd_prefetch.h"
#include "nn/cpu_isa.h"
#include "support/backend_checks.h"
#include "support/kernel_references.h"
#include "support/scoped_env.h"

namespace lockstep::nn {
namespace {

using testing::bitwise_equal;
using testing::expect_close;
using testing::random_tensor;

std::unique_ptr<Backend> cpu(int threads, bool winograd = true,
                             std::optional<CpuIsa> isa = std::nullopt) {
  return make_cpu_backend({.threads = threads, .isa_cap = isa, .winograd = winograd});
}

Conv2dGeometry geometry(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t pad) {
  return {n, c, hw, hw, k, 3, 3, 1, pad};
}

struct ConvRun {
  Tensor x, w, b, y;
};

ConvRun forward(Backend& be, const Conv2dGeometry& g, bool bias, uint64_t seed = 1) {
  ConvRun r{random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, seed),
            random_tensor({g.out_channels, g.in_channels, 3, 3}, seed + 1),
            random_tensor({g.out_channels}, seed + 2),
            Tensor({g.batch, g.out_channels, g.out_h(), g.out_w()})};
  be.conv2d_forward(g, r.x.data(), r.w.data(), bias ? r.b.data() : nullptr, r.y.data());
  return r;
}

// Sample n of the forward run `all` (with its bias), convolved alone on be:
// the bits the run gave it.
void expect_sample_alone_gives_its_bits(Backend& be, const Conv2dGeometry& g, const ConvRun& all,
                                        int64_t n) {
  const int64_t in = g.in_channels * g.in_h * g.in_w, out = g.out_channels * g.out_h() * g.out_w();
  Conv2dGeometry single = g;
  single.batch = 1;
  Tensor x({1, g.in_channels, g.in_h, g.in_w}), y({1, g.out_channels, g.out_h(), g.out_w()});
  std::memcpy(x.data(), all.x.data() + n * in, static_cast<size_t>(in) * sizeof(float));
  be.conv2d_forward(single, x.data(), all.w.data(), all.b.data(), y.data());
  EXPECT_EQ(std::memcmp(y.data(), all.y.data() + n * out, static_cast<size_t>(out) * 4), 0)
      << "sample " << n;
}

// Shapes: resnet20's three stages, partial 4 x 4 tiles (7 x 7, 10 x 10),
// channel counts that are not whole vectors (12, 20), no padding and
// padding 2 (outputs larger than the input); rows whose last columns are
// read lane by lane rather than transposed (18 wide: two past 16; 4 wide,
// AlexNet-CIFAR's last layers).
const Conv2dGeometry kShapes[] = {
    geometry(2, 16, 32, 16, 1), geometry(3, 32, 16, 32, 1), geometry(4, 64, 8, 64, 1),
    geometry(2, 12, 7, 20, 1),  geometry(3, 20, 10, 8, 1),  geometry(2, 8, 9, 24, 0),
    geometry(2, 16, 6, 16, 2),  geometry(1, 24, 13, 40, 1), geometry(2, 16, 18, 12, 1),
    geometry(3, 20, 4, 16, 1),  geometry(5, 96, 4, 128, 1),
};

TEST(CpuWinograd, ForwardMatchesTheReference) {
  for (const Conv2dGeometry& g : kShapes) {
    SCOPED_TRACE(testing::geometry_name(g));
    for (const bool bias : {false, true}) {
      auto be = cpu(2);
      const ConvRun r = forward(*be, g, bias);
      expect_close(testing::conv3x3_forward_reference(g, r.x, r.w, bias ? r.b.data() : nullptr),
                   r.y.data(), "winograd forward");
    }
  }
}

TEST(CpuWinograd, DataGradientMatchesTheReference) {
  for (const Conv2dGeometry& g : kShapes) {
    if (2 * g.pad != 2) continue;  // the data gradient's Winograd path: "same" padding
    SCOPED_TRACE(testing::geometry_name(g));
    auto be = cpu(2);
    const Tensor w = random_tensor({g.out_channels, g.in_channels, 3, 3}, 5);
    const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 6);
    Tensor dx({g.batch, g.in_channels, g.in_h, g.in_w});
    be->conv2d_backward_data(g, w.data(), dy.data(), dx.data());
    expect_close(testing::conv3x3_data_reference(g, w, dy), dx.data(), "winograd data gradient");
  }
}

// dw and db of the batch (summed over chunks of samples) against the
// reference, on 1 and 2 threads with the same bits, and one sample alone.
TEST(CpuWinograd, WeightGradientMatchesTheReference) {
  for (const Conv2dGeometry& g : kShapes) {
    SCOPED_TRACE(testing::geometry_name(g));
    const Tensor x = random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 7);
    const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 8);
    const int64_t wsize = g.out_channels * g.in_channels * 9;
    Tensor grads({wsize + g.out_channels}), again({wsize + g.out_channels});
    cpu(2)->conv2d_backward_filter(g, x.data(), dy.data(), grads.data(), grads.data() + wsize);
    expect_close(testing::conv3x3_filter_reference(g, x, dy), grads.data(),
                 "winograd weight gradient");
    cpu(1)->conv2d_backward_filter(g, x.data(), dy.data(), again.data(), again.data() + wsize);
    EXPECT_TRUE(bitwise_equal(grads, again));
    Conv2dGeometry one = g;
    one.batch = 1;
    cpu(1)->conv2d_backward_filter(one, x.data(), dy.data(), grads.data(), grads.data() + wsize);
    expect_close(testing::conv3x3_filter_reference(one, x, dy), grads.data(), "one sample");
  }
}

// Weight gradients too large for the cache are summed element by element
// over every block's transformed tiles (winograd_filter_total): the bits of
// the per-chunk sums (winograd_filter_sums) added in chunk order, on 1 and 2
// threads, signs of zero included (a channel of dy is zero).
TEST(CpuWinograd, LargeWeightGradientsAreTheBitsOfTheChunkSumsInOrder) {
  using cpu::ThreadPool;
  for (const Conv2dGeometry& g :
       {geometry(5, 96, 4, 128, 1), geometry(3, 64, 8, 96, 1), geometry(7, 64, 2, 96, 2)}) {
    SCOPED_TRACE(testing::geometry_name(g));
    const Tensor x = random_tensor({g.batch, g.in_channels, g.in_h, g.in_w}, 9);
    Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 10);
    const int64_t plane = g.out_h() * g.out_w();
    for (int64_t n = 0; n < g.batch; ++n) {
      std::fill_n(dy.data() + (n * g.out_channels + 3) * plane, plane, 0.0f);
    }
    const auto sums = static_cast<size_t>(cpu::conv::winograd_sums_size(g));
    for (const int chunks : {1, 2, 3}) {
      const int64_t tiles = cpu::conv::winograd_filter_tiles_size(g, chunks);
      ASSERT_GT(tiles, 0) << chunks << " chunks: not the element-by-element path";
      std::vector<float> expected(sums), part(sums);
      for (int c = 0; c < chunks; ++c) {
        std::fill(part.begin(), part.end(), 0.0f);
        cpu::conv::winograd_filter_sums(
            g, x.data(), dy.data(), ThreadPool::chunk_begin(g.batch, chunks, c),
            ThreadPool::chunk_begin(g.batch, chunks, c + 1), part.data());
        for (size_t i = 0; i < sums; ++i) expected[i] = c == 0 ? part[i] : expected[i] + part[i];
      }
      for (const int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> buffer(static_cast<size_t>(tiles)), total(sums, -1.0f);
        cpu::conv::winograd_filter_total(pool, g, chunks, x.data(), dy.data(), buffer.data(),
                                         total.data());
        EXPECT_EQ(std::memcmp(total.data(), expected.data(), sums * sizeof(float)), 0)
            << chunks << " chunks, " << threads << " threads";
      }
    }
  }
}

// The backend without Winograd runs the direct convolution, whose rounding
// differs: the two results are close but not the same bits (this is what
// makes the option observable), for the forward and the data gradient.
TEST(CpuWinograd, TheOptionSelectsTheAlgorithm) {
  const Conv2dGeometry g = geometry(2, 16, 16, 16, 1);
  const ConvRun with = forward(*cpu(1, true), g, false);
  const ConvRun without = forward(*cpu(1, false), g, false);
  EXPECT_FALSE(bitwise_equal(with.y, without.y));
  expect_close(testing::conv3x3_forward_reference(g, without.x, without.w, nullptr),
               without.y.data(), "direct");

  const Conv2dGeometry big = geometry(2, 64, 8, 64, 1);  // the data gradient's K > 32 case
  const Tensor w = random_tensor({64, 64, 3, 3}, 5);
  const Tensor dy = random_tensor({2, 64, 8, 8}, 6);
  Tensor a({2, 64, 8, 8}), b({2, 64, 8, 8});
  cpu(1, true)->conv2d_backward_data(big, w.data(), dy.data(), a.data());
  cpu(1, false)->conv2d_backward_data(big, w.data(), dy.data(), b.data());
  EXPECT_FALSE(bitwise_equal(a, b));
  expect_close(testing::conv3x3_data_reference(big, w, dy), b.data(), "direct data gradient");
}

// The three passes of a convolution on one backend, from the same inputs.
struct Passes {
  Tensor y, dx, dw;
};

// The forward pass as forward() runs it (no bias), then the data and
// weight gradients of one dy.
Passes passes(Backend& be, const Conv2dGeometry& g) {
  ConvRun r = forward(be, g, false, 11);
  const Tensor dy = random_tensor({g.batch, g.out_channels, g.out_h(), g.out_w()}, 14);
  Passes p{std::move(r.y), Tensor({g.batch, g.in_channels, g.in_h, g.in_w}),
           Tensor({g.out_channels, g.in_channels, 3, 3})};
  be.conv2d_backward_data(g, r.w.data(), dy.data(), p.dx.data());
  be.conv2d_backward_filter(g, r.x.data(), dy.data(), p.dw.data(), nullptr);
  return p;
}

// Each of the three passes of a and b: the same bits when `same`, else not.
void expect_same_bits(const Passes& a, const Passes& b, bool same) {
  EXPECT_EQ(bitwise_equal(a.y, b.y), same) << "forward";
  EXPECT_EQ(bitwise_equal(a.dx, b.dx), same) << "data gradient";
  EXPECT_EQ(bitwise_equal(a.dw, b.dw), same) << "weight gradient";
}

// In bf16 the passes Winograd applies to run it in fp32: a bf16 backend
// gives the fp32 Winograd backend's bits for them, and its own bf16 direct
// products elsewhere (a stride-2 convolution; the data gradient of a 3x3
// one without "same" padding) and everywhere without the option, on every
// instruction set (emulated bf16 and vdpbf16ps alike).
TEST(CpuWinograd, Bf16RunsTheWinogradPassesInFp32) {
  std::vector<std::optional<CpuIsa>> isas = {CpuIsa::kAvx2};
  if (detect_cpu_isa() == CpuIsa::kAvx512) isas.emplace_back(CpuIsa::kAvx512);
  for (const auto isa : isas) {
    SCOPED_TRACE(to_string(*isa));
    const auto bf16 = [&](bool winograd) {
      return make_cpu_backend(
          {.threads = 2, .isa_cap = isa, .precision = Precision::kBf16, .winograd = winograd});
    };
    const Conv2dGeometry same = geometry(3, 16, 16, 24, 1);
    const Passes fp32 = passes(*cpu(2, true, isa), same);
    const Passes on = passes(*bf16(true), same), off = passes(*bf16(false), same);
    expect_same_bits(on, fp32, true);
    expect_same_bits(off, fp32, false);

    // No padding: the forward and weight gradient on Winograd, the data
    // gradient (not the transposed forward) on bf16's products.
    const Conv2dGeometry valid = geometry(2, 16, 10, 16, 0);
    const Passes fp32_valid = passes(*cpu(2, true, isa), valid);
    const Passes on_valid = passes(*bf16(true), valid), off_valid = passes(*bf16(false), valid);
    EXPECT_TRUE(bitwise_equal(on_valid.y, fp32_valid.y));
    EXPECT_TRUE(bitwise_equal(on_valid.dw, fp32_valid.dw));
    EXPECT_TRUE(bitwise_equal(on_valid.dx, off_valid.dx));
    EXPECT_FALSE(bitwise_equal(on_valid.dx, fp32_valid.dx));

    const Conv2dGeometry strided{2, 16, 16, 16, 32, 3, 3, 2, 1};
    const Passes fp32_strided = passes(*cpu(2, true, isa), strided);
    const Passes on_strided = passes(*bf16(true), strided);
    const Passes off_strided = passes(*bf16(false), strided);
    expect_same_bits(on_strided, off_strided, true);
    EXPECT_FALSE(bitwise_equal(on_strided.y, fp32_strided.y));
  }
}

// A BatchNorm's apply pass taken into the convolution that reads its
// output (Backend::conv2d_maps_input): the forward pass and the weight
// gradient of x mapped as they read it are the bits of batchnorm_apply,
// then the convolution of its output, on every shape (partial tiles and
// channel vectors, rows read lane by lane, padding 0 and 2), with and
// without the ReLU, in fp32 and bf16, on every instruction set. The
// mapping is offered where both passes that read x run on fp32 Winograd.
TEST(CpuWinograd, AMappedInputIsTheBatchNormApplyThenTheConvolution) {
  std::vector<std::optional<CpuIsa>> isas = {CpuIsa::kAvx2};
  if (detect_cpu_isa() == CpuIsa::kAvx512) isas.emplace_back(CpuIsa::kAvx512);
  for (const auto isa : isas) {
    for (const Precision precision : {Precision::kFp32, Precision::kBf16}) {
      const auto be = make_cpu_backend({.threads = 2, .isa_cap = isa, .precision = precision});
      for (const Conv2dGeometry& g : kShapes) {
        SCOPED_TRACE(std::string(to_string(*isa)) + " " + to_string(precision) + " " +
                     testing::geometry_name(g));
        ASSERT_TRUE(be->conv2d_maps_input(g));
        const int64_t C = g.in_channels, K = g.out_channels, wsize = K * C * 9;
        const Tensor x = random_tensor({g.batch, C, g.in_h, g.in_w}, 21);
        const Tensor w = random_tensor({K, C, 3, 3}, 22), b = random_tensor({K}, 23);
        const Tensor dy = random_tensor({g.batch, K, g.out_h(), g.out_w()}, 24);
        const Tensor coef = random_tensor({2, C}, 25, -1.5f, 1.5f);  // scale, shift
        for (const bool relu : {true, false}) {
          SCOPED_TRACE(relu ? "relu" : "no relu");
          Tensor z(x.shape());
          be->batchnorm_apply({g.batch, C, g.in_h * g.in_w}, x.data(), coef.data(), relu, z.data());
          Tensor y_apart({g.batch, K, g.out_h(), g.out_w()}), y_mapped(y_apart.shape());
          Tensor dw_apart({wsize + K}), dw_mapped({wsize + K});
          be->conv2d_forward(g, z.data(), w.data(), b.data(), y_apart.data());
          be->conv2d_backward_filter(g, z.data(), dy.data(), dw_apart.data(),
                                     dw_apart.data() + wsize);
          const ConvInputMap map{.coef = coef.data(), .relu = relu};
          be->conv2d_forward_mapped(g, map, x.data(), w.data(), b.data(), y_mapped.data());
          be->conv2d_backward_filter_mapped(g, map, x.data(), dy.data(), dw_mapped.data(),
                                            dw_mapped.data() + wsize);
          EXPECT_TRUE(bitwise_equal(y_mapped, y_apart)) << "forward";
          EXPECT_TRUE(bitwise_equal(dw_mapped, dw_apart)) << "weight and bias gradients";
          // The map ran: the convolution of x itself differs.
          be->conv2d_forward(g, x.data(), w.data(), b.data(), y_apart.data());
          EXPECT_FALSE(bitwise_equal(y_mapped, y_apart));
        }
      }
    }
  }
  const Conv2dGeometry same = geometry(2, 16, 16, 16, 1);
  EXPECT_FALSE(cpu(1, false)->conv2d_maps_input(same)) << "direct convolutions";
  EXPECT_FALSE(make_cpu_backend({.threads = 1, .precision = Precision::kBf16, .winograd = false})
                   ->conv2d_maps_input(same))
      << "bf16 direct convolutions";
  const Conv2dGeometry strided{2, 16, 16, 16, 32, 3, 3, 2, 1};
  EXPECT_FALSE(cpu(1)->conv2d_maps_input(strided)) << "stride 2";
  EXPECT_FALSE(cpu(1)->conv2d_maps_input(geometry(2, 4, 16, 16, 1))) << "4 channels in";
  const Tensor x = random_tensor({2, 16, 8, 8}, 1), w = random_tensor({32, 16, 3, 3}, 2);
  Tensor y({2, 32, 4, 4});
  const Tensor coef = random_tensor({2, 16}, 3);
  EXPECT_THROW(cpu(1)->conv2d_forward_mapped(strided, {.coef = coef.data()}, x.data(), w.data(),
                                             nullptr, y.data()),
               Error);
}

// A sample's outputs are the same bits alone, in any batch around it, on 1
// or 2 threads: blocks of tiles span samples, but no sum crosses a tile.
TEST(CpuWinograd, ASampleGivesTheSameBitsInAnyBatchAndThreadCount) {
  for (const Conv2dGeometry& g :
       {geometry(9, 16, 32, 16, 1), geometry(13, 64, 8, 64, 1), geometry(11, 20, 10, 12, 1)}) {
    SCOPED_TRACE(testing::geometry_name(g));
    const ConvRun all = forward(*cpu(2), g, true);
    const ConvRun one_thread = forward(*cpu(1), g, true);
    EXPECT_TRUE(bitwise_equal(all.y, one_thread.y));
    for (const int64_t n : {int64_t{0}, g.batch / 2, g.batch - 1}) {
      expect_sample_alone_gives_its_bits(*cpu(2), g, all, n);
    }
  }
}

// Blocks of tile rows whose tiles fill the GEMMs' rows (padded to 12) with
// the least padding, between half and all of the rows that fit.
TEST(CpuWinograd, BlocksLeaveTheGemmsTheLeastPadding) {
  using cpu::winograd_block_rows;
  // resnet20 at batch 128 on one thread, as many tiles as fit 512 KiB:
  // 8 x 8 planes (2 tiles a row) 28 tiles: 12 rows, 24 tiles (14 rows: 28
  // tiles in 36 GEMM rows); 16 x 16 planes, 56 tiles: 48; 32 x 32, 113: 96.
  EXPECT_EQ(winograd_block_rows(28, 2, 256, 1, 12), 12);
  EXPECT_EQ(winograd_block_rows(56, 4, 512, 1, 12), 12);
  EXPECT_EQ(winograd_block_rows(113, 8, 1024, 1, 12), 12);
  EXPECT_EQ(winograd_block_rows(51, 1, 128, 1, 12), 48);  // AlexNet-CIFAR's 4 x 4 planes
  // None without padding: the least share (7 rows, 35 tiles in 36), not
  // the most rows (8: 40 in 48).
  EXPECT_EQ(winograd_block_rows(40, 5, 1000, 1, 12), 7);
  // Equal shares: the most rows (8 rows of 6 tiles and 6 rows both fill
  // their GEMM rows).
  EXPECT_EQ(winograd_block_rows(48, 6, 1000, 1, 12), 8);
  // Two blocks per thread where the batch is small: 20 tile rows on 2
  // threads, at most 5 rows.
  EXPECT_EQ(winograd_block_rows(28, 2, 20, 2, 12), 5);
  // At least one row: a row of tiles larger than the budget, a tiny batch.
  EXPECT_EQ(winograd_block_rows(3, 8, 100, 1, 12), 1);
  EXPECT_EQ(winograd_block_rows(28, 2, 2, 2, 12), 1);
}

// The lines fetched ahead for a block are those of the plane rows its tile
// rows read, run by run (sample, then channel), each once a run: here 5 x 7
// planes not aligned to lines, padding 1, tile rows 2 .. 4 of 3 a sample
// (sample 0's last, which reads rows 7 .. 9 of 10 past the plane's last 4,
// then sample 1's first two), input patches (halo 2) and output rows (0).
TEST(CpuWinograd, FetchesAheadTheLinesOfTheBlocksRowsOnce) {
  const int64_t channels = 3, h = 10, w = 7, pad = 1, th = 3;
  // 5 floats past a line: no run starts on a line, and the last line of
  // one plane is the first of the next
  std::vector<float> planes(static_cast<size_t>(3 * channels * h * w + 32));
  const auto base = (reinterpret_cast<uintptr_t>(planes.data()) + 63) / 64 * 64;
  const float* x = reinterpret_cast<const float*>(base) + 5;
  const auto line = [](const float* p) { return reinterpret_cast<uintptr_t>(p) / 64; };
  for (const int64_t halo : {int64_t{2}, int64_t{0}}) {
    SCOPED_TRACE(halo);
    // (sample, rows [h0, h1)): sample 0's tile row 2 reads rows 7 .. 9 (the
    // plane ends at 10), sample 1's tile rows 0 and 1 rows 0 .. 8 (halo 2)
    // or 0 .. 6 (halo 0)
    const int64_t runs[2][3] = {{0, 7, 10}, {1, 0, 7 + halo}};
    std::vector<uintptr_t> want;
    for (const auto& [n, h0, h1] : runs) {
      for (int64_t c = 0; c < channels; ++c) {
        const float* plane = x + (n * channels + c) * h * w;
        for (uintptr_t l = line(plane + h0 * w); l <= line(plane + h1 * w - 1); ++l) {
          want.push_back(l);
        }
      }
    }
    cpu::WinogradRowFetch fetch(x, channels, h, w, pad, halo, th, 2, 5, 4);
    std::vector<uintptr_t> got;
    for (const char* p = fetch.next_line(); p != nullptr; p = fetch.next_line()) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
      got.push_back(line(reinterpret_cast<const float*>(p)));
    }
    EXPECT_EQ(got, want);
    const auto lines = static_cast<int64_t>(want.size());
    EXPECT_GE(4 * fetch.lines_per_share(), lines);  // 4 shares take every line
    EXPECT_LT(4 * (fetch.lines_per_share() - 1), lines);
  }
  // Nothing to fetch past the batch, and none before it starts.
  cpu::WinogradRowFetch none(x, channels, h, w, pad, 2, th, 6, 6, 4);
  EXPECT_EQ(none.next_line(), nullptr);
  none.next();
}

// An output as large as winograd_stream_bytes is written past the caches:
// the same bits as a sample's alone (written normally), with 20 output
// channels (a partial channel block) and rows of 30 (partial vectors, and
// vectors not aligned, which take plain stores), on both instruction sets.
TEST(CpuWinograd, AnOutputWrittenPastTheCachesHasEachSamplesBits) {
  const Conv2dGeometry g = geometry(64, 16, 30, 20, 1);  // 4.4 MiB: past the 4 MiB cap
  const int64_t out = g.batch * g.out_channels * g.out_h() * g.out_w();
  ASSERT_GE(out * static_cast<int64_t>(sizeof(float)), cpu::winograd_stream_bytes());
  std::vector<std::unique_ptr<Backend>> backends;
  backends.push_back(cpu(2, true, CpuIsa::kAvx2));
  if (detect_cpu_isa() == CpuIsa::kAvx512) backends.push_back(cpu(2, true, CpuIsa::kAvx512));
  for (auto& be : backends) {
    SCOPED_TRACE(be->name());
    const ConvRun all = forward(*be, g, true);
    for (const int64_t n : {int64_t{0}, int64_t{1}, g.batch / 2, g.batch - 1}) {
      expect_sample_alone_gives_its_bits(*be, g, all, n);
    }
  }
}

// The avx2 and avx512 kernels make the same additions in the same order.
TEST(CpuWinograd, EveryInstructionSetGivesTheSameBits) {
  if (detect_cpu_isa() != CpuIsa::kAvx512) GTEST_SKIP() << "this CPU has no AVX-512";
  for (const Conv2dGeometry& g : kShapes) {
    SCOPED_TRACE(testing::geometry_name(g));
    const ConvRun a = forward(*cpu(2, true, CpuIsa::kAvx2), g, true);
    const ConvRun b = forward(*cpu(2, true, CpuIsa::kAvx512), g, true);
    EXPECT_TRUE(bitwise_equal(a.y, b.y));
    const int64_t wsize = g.out_channels * g.in_channels * 9;
    Tensor da({wsize + g.out_channels}), db({wsize + g.out_channels});
    cpu(2, true, CpuIsa::kAvx2)
        ->conv2d_backward_filter(g, a.x.data(), a.y.data(), da.data(), da.data() + wsize);
    cpu(2, true, CpuIsa::kAvx512)
        ->conv2d_backward_filter(g, a.x.data(), a.y.data(), db.data(), db.data() + wsize);
    EXPECT_TRUE(bitwise_equal(da, db));
  }
}

// LOCKSTEP_CPU_WINOGRAD: unset or 1 keeps Winograd, 0 turns it off, and any
// other value is an error naming the variable and the value.
TEST(CpuWinograd, TheEnvironmentVariableChoosesAndBadValuesAreNamed) {
  testing::ScopedEnv env("LOCKSTEP_CPU_WINOGRAD", nullptr);
  EXPECT_TRUE(app::cpu_backend_options(1).winograd);
  env.set("0");
  EXPECT_FALSE(app::cpu_backend_options(1).winograd);
  EXPECT_NE(app::cpu_isa_description().find(" kernels, direct convolutions "
                                            "(LOCKSTEP_CPU_WINOGRAD=0); bf16: bf16 direct "
                                            "convolutions, products "),
            std::string::npos);
  env.set("1");
  EXPECT_TRUE(app::cpu_backend_options(1).winograd);
  EXPECT_NE(app::cpu_isa_description().find(
                " kernels, Winograd 3x3 convolutions; bf16: bf16 direct convolutions, fp32 "
                "Winograd 3x3 where it applies, products "),
            std::string::npos);
  env.set("yes");
  try {
    app::cpu_backend_options(1);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("LOCKSTEP_CPU_WINOGRAD = \"yes\""), std::string::npos)
        << e.what();
  }
}

// `lockstep info`'s CPU line names the kernels as the backends do (fp32's,
// then bf16's convolutions and products), and the cap: under
// LOCKSTEP_CPU_ISA=avx2 bf16 products run emulated on any CPU.
TEST(CpuWinograd, InfoNamesTheBackendsKernelsAndTheCap) {
  const std::string line = [] {
    testing::ScopedEnv cap("LOCKSTEP_CPU_ISA", "avx2");
    return app::cpu_isa_description();
  }();
  EXPECT_EQ(
      line.rfind("avx2 kernels, Winograd 3x3 convolutions; bf16: bf16 direct convolutions, fp32 "
                 "Winograd 3x3 where it applies, products emulated (CPU has ",
                 0),
      0u)
      << line;
  EXPECT_NE(line.find("), capped by LOCKSTEP_CPU_ISA=avx2"), std::string::npos) << line;
}

}  // namespace
}  // namespace lockstep::nn
