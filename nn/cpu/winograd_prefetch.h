// The Winograd convolution's fetches ahead (conv_winograd.cpp,
// conv_winograd_filter.cpp): while one block's products run, the plane rows
// the next block reads are fetched into the L2 cache, a share per product.
// Its strips read 16 channel planes at once, a page or less each, where the
// hardware prefetchers stop: without these fetches the strips waited on
// memory. Spread between the GEMMs' register tiles: issued all at once
// before each product, the fetches stalled on full miss buffers. Measured
// side by side (AMD EPYC Zen 4, 1 MiB L2, 2026-11-30; kernel_bench cold,
// AVX-512, 1 thread): resnet20's convolutions from memory 188.5-190.5 ->
// 169.5-173.1 ms a step; lockstep bench, resnet20 bf16, medians of paired
// ratios 1.077 (1 thread) and 1.025 (2). Outside the per-instruction-set
// builds (it changes no result), so that the tests can walk the lines it
// fetches.
#pragma once

#include <algorithm>
#include <cstdint>

namespace lockstep::nn::cpu {

// The cache lines of the rows that tile rows [r0, r1) read from planes
// (channels, h, w) of samples channels * h * w floats apart (th tile rows a
// sample): rows 4 ty - pad .. 4 ty + 3 + halo - pad of tile row ty, clipped
// to the plane (halo: 2 for the input's 6-row patches, 0 for the output
// gradient's 4 rows); sample by sample, channel by channel, in address
// order, each line once per run of rows.
class WinogradRowFetch {
 public:
  static constexpr int64_t kLine = 64;

  WinogradRowFetch() = default;
  WinogradRowFetch(const float* x, int64_t channels, int64_t h, int64_t w, int64_t pad,
                   int64_t halo, int64_t th, int64_t r0, int64_t r1, int64_t shares)
      : x_(x),
        channels_(channels),
        h_(h),
        w_(w),
        pad_(pad),
        halo_(halo),
        th_(th),
        r0_(r0),
        r1_(r1),
        n_(r0 / th),
        c_(-1) {
    int64_t lines = 0;  // each run's, from its first line to its last
    for (int64_t n = r0 / th; n * th < r1; ++n) {
      const auto [h0, h1] = rows(n);
      if (h1 <= h0) continue;
      for (int64_t c = 0; c < channels; ++c) {
        const float* plane = x + (n * channels + c) * h * w;
        lines += static_cast<int64_t>(line(plane + h1 * w - 1) - line(plane + h0 * w)) + 1;
      }
    }
    per_share_ = (lines + std::max<int64_t>(shares, 1) - 1) / std::max<int64_t>(shares, 1);
    advance();
  }

  // The next line to fetch; null past the last.
  const char* next_line() {
    if (at_ == nullptr) return nullptr;
    const char* line = at_;
    at_ += kLine;
    if (at_ >= end_) advance();
    return line;
  }

  // Lines a share: `shares` shares take every line.
  int64_t lines_per_share() const { return per_share_; }

  // Fetches one share of the lines into the L2 cache.
  void next() {
    for (int64_t i = 0; i < per_share_; ++i) {
      const char* line = next_line();
      if (line == nullptr) return;
      __builtin_prefetch(line, 0, 2);
    }
  }

 private:
  static uintptr_t line(const float* p) { return reinterpret_cast<uintptr_t>(p) / kLine; }
  struct Rows {
    int64_t h0, h1;
  };
  // The plane rows [h0, h1) that sample n's tile rows in [r0, r1) read.
  Rows rows(int64_t n) const {
    const int64_t a = std::max(r0_, n * th_) - n * th_;
    const int64_t b = std::min(r1_, (n + 1) * th_) - n * th_;
    return {std::max<int64_t>(0, 4 * a - pad_), std::min(h_, 4 * b + halo_ - pad_)};
  }
  // To the next (sample, channel) run with rows; at_ null past the last.
  void advance() {
    at_ = end_ = nullptr;
    for (;;) {
      if (++c_ == channels_) c_ = 0, ++n_;
      if (n_ * th_ >= r1_) return;
      const auto [h0, h1] = rows(n_);
      if (h1 <= h0) continue;
      const float* plane = x_ + (n_ * channels_ + c_) * h_ * w_;
      at_ = reinterpret_cast<const char*>(line(plane + h0 * w_) * kLine);
      end_ = reinterpret_cast<const char*>(plane + h1 * w_);
      return;
    }
  }

  const float* x_ = nullptr;
  int64_t channels_ = 0, h_ = 0, w_ = 0, pad_ = 0, halo_ = 0, th_ = 1, r0_ = 0, r1_ = 0;
  int64_t n_ = 0, c_ = 0;      // the run being fetched: sample, channel
  const char* at_ = nullptr;   // its next line
  const char* end_ = nullptr;  // past its last float
  int64_t per_share_ = 0;      // lines a share
};

}  // namespace lockstep::nn::cpu
