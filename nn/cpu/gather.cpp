// gather_batch on the CPU: the loader's per-sample transform
// (data/transform.cpp, PixelTransform::apply) over rows of a data set held in
// the backend's memory, one sample per item of the pool's split. The values
// come from the same (C, 256) table, so a batch is bit for bit the host
// loader's.
#include <algorithm>
#include <cstdint>

#include "nn/cpu/kernels.h"
#include "nn/crop_flip.h"

namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA {
namespace {

// Pixels per chunk below which gathering stays on one thread.
constexpr int64_t kPixelGrain = int64_t{1} << 15;

// in: (C, H, W) uint8, out: (C, H, W), table: (C, 256)
void transform_sample(const GatherGeometry& g, const CropFlip& cf, const uint8_t* in,
                      const float* table, float* out) {
  const int64_t H = g.height, W = g.width, plane = H * W;
  const bool identity = cf.dy == 0 && cf.dx == 0 && !cf.flip;
  for (int64_t c = 0; c < g.channels; ++c, in += plane, out += plane, table += 256) {
    if (identity) {
      for (int64_t i = 0; i < plane; ++i) out[i] = table[in[i]];
      continue;
    }
    for (int64_t y = 0; y < H; ++y) {
      float* row = out + y * W;
      const int64_t sy = y + cf.dy;
      if (sy < 0 || sy >= H) {
        std::fill(row, row + W, table[0]);
        continue;
      }
      const uint8_t* src = in + sy * W;
      for (int64_t x = 0; x < W; ++x) {
        const int64_t sx = crop_flip_source_x(cf, W, x);
        row[x] = sx >= 0 && sx < W ? table[src[sx]] : table[0];
      }
    }
  }
}

// Rows [b, e) of gather_batch.
void gather_rows(const GatherGeometry& g, const int64_t* ids, const uint8_t* images,
                 const int32_t* labels, const float* table, float* y, int32_t* batch_labels,
                 int64_t b, int64_t e) {
  const int64_t plane = g.height * g.width, pixels = g.channels * plane;
  const bool augment = g.crop_padding > 0 || g.horizontal_flip;
  for (int64_t n = b; n < e; ++n) {
    const int64_t id = ids[n];
    float* out = y + n * pixels;
    if (id < 0 || id >= g.samples) {
      for (int64_t c = 0; c < g.channels; ++c)
        std::fill(out + c * plane, out + (c + 1) * plane, table[c * 256]);
      batch_labels[n] = -1;
      continue;
    }
    const CropFlip cf = augment
                            ? draw_crop_flip(g.crop_padding, g.horizontal_flip, g.seed, g.epoch, id)
                            : CropFlip{};
    transform_sample(g, cf, images + id * pixels, table, out);
    batch_labels[n] = labels[id];
  }
}

}  // namespace

// ids: (N); images: (S, C, H, W); labels: (S); table: (C, 256) ->
// y: (N, C, H, W), batch_labels: (N)
void gather_batch(ThreadPool& pool, const GatherGeometry& g, const int64_t* ids,
                  const uint8_t* images, const int32_t* labels, const float* table, float* y,
                  int32_t* batch_labels) {
  const int64_t pixels = std::max<int64_t>(1, g.channels * g.height * g.width);
  pool.parallel_for(g.batch, std::max<int64_t>(1, kPixelGrain / pixels),
                    [&](int64_t b, int64_t e, int) {
                      gather_rows(g, ids, images, labels, table, y, batch_labels, b, e);
                    });
}

}  // namespace lockstep::nn::cpu::inline LOCKSTEP_CPU_ISA
