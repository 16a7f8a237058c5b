// gather_batch on CUDA: one thread per output pixel, each the CPU's loop
// body (nn/cpu/gather.cpp) with the same crop/flip draw (nn/crop_flip.h)
// and the same (C, 256) table, so a batch is bit for bit the CPU's.
#include "nn/crop_flip.h"
#include "nn/cuda/kernels.h"
#include "nn/cuda/launch.cuh"

namespace lockstep::nn::cuda {
namespace {

// ids: (N); images: (S, C, H, W); labels: (S); table: (C, 256) ->
// y: (N, C, H, W), batch_labels: (N). Element i = ((n * C + c) * H + h) * W + w.
__global__ void gather_batch_kernel(GatherGeometry g, const int64_t* ids, const uint8_t* images,
                                    const int32_t* labels, const float* table, float* y,
                                    int32_t* batch_labels) {
  const int64_t plane = g.height * g.width, pixels = g.channels * plane;
  const bool augment = g.crop_padding > 0 || g.horizontal_flip;
  CUDA_KERNEL_LOOP(i, g.batch * pixels) {
    const int64_t n = i / pixels, c = (i % pixels) / plane;
    const int64_t h = (i % plane) / g.width, w = i % g.width;
    const int64_t id = ids[n];
    const float* t = table + c * 256;
    const bool valid = id >= 0 && id < g.samples;
    if (i % pixels == 0) batch_labels[n] = valid ? labels[id] : -1;
    if (!valid) {
      y[i] = t[0];
      continue;
    }
    const CropFlip cf = augment
                            ? draw_crop_flip(g.crop_padding, g.horizontal_flip, g.seed, g.epoch, id)
                            : CropFlip{};
    const int64_t sy = h + cf.dy, sx = crop_flip_source_x(cf, g.width, w);
    const bool inside = sy >= 0 && sy < g.height && sx >= 0 && sx < g.width;
    y[i] = inside ? t[images[id * pixels + c * plane + sy * g.width + sx]] : t[0];
  }
}

}  // namespace

void gather_batch(DeviceContext& ctx, const GatherGeometry& g, const int64_t* ids,
                  const uint8_t* images, const int32_t* labels, const float* table, float* y,
                  int32_t* batch_labels) {
  const int64_t count = g.batch * g.channels * g.height * g.width;
  launch(gather_batch_kernel, count, ctx.stream(), g, ids, images, labels, table, y, batch_labels);
}

}  // namespace lockstep::nn::cuda
