// gather_batch on the CPU: the loader's per-plane transform
// (nn/crop_flip.h, crop_flip_plane, as data/transform.cpp's
// PixelTransform::apply) over rows of a data set held in the backend's
// memory, one sample per item of the pool's split. The values
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
    for (int64_t c = 0; c < g.channels; ++c) {
      crop_flip_plane(images + id * pixels + c * plane, g.height, g.width, cf, table + c * 256,
                      out + c * plane);
    }
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
