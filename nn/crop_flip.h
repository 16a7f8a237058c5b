// The random crop and flip of one training image (torchvision's
// RandomCrop(H, padding=P) + RandomHorizontalFlip()), drawn from the counter
// RNG keyed by (seed, epoch, sample id): a pure function, so the host's
// loader (data/transform.h) and a backend gathering batches in its own
// memory (Backend::gather_batch) draw the same crop for a sample.
//
//   out[c][y][x] = in[c][y + dy][xs + dx], xs = flip ? W-1-x : x, or padding
//   when the source is outside the image
#pragma once

#include <cstdint>

#include "nn/counter_rng.h"
#include "nn/host_device.h"

namespace lockstep::nn {

// The random choices for one sample.
struct CropFlip {
  int64_t dy = 0, dx = 0;  // source offset of the crop window, in [-P, P]
  bool flip = false;
};

inline constexpr uint64_t kAugmentStream = 0x6175676d656e7431ULL;  // "augment1"

// P = crop_padding (0: no crop), flip: mirror with probability 1/2.
LOCKSTEP_HOST_DEVICE inline CropFlip draw_crop_flip(int64_t crop_padding, bool flip, uint64_t seed,
                                                    int64_t epoch, int64_t sample_id) {
  const uint64_t key =
      hash_combine(hash_combine(hash_combine(kAugmentStream, seed), static_cast<uint64_t>(epoch)),
                   static_cast<uint64_t>(sample_id));
  CropFlip out;
  if (crop_padding > 0) {
    const int64_t choices = 2 * crop_padding + 1;
    const auto k0 = static_cast<int64_t>(counter_uniform(key, 0) * static_cast<float>(choices));
    const auto k1 = static_cast<int64_t>(counter_uniform(key, 1) * static_cast<float>(choices));
    out.dy = (k0 < choices - 1 ? k0 : choices - 1) - crop_padding;
    out.dx = (k1 < choices - 1 ? k1 : choices - 1) - crop_padding;
  }
  if (flip) out.flip = counter_uniform(key, 2) < 0.5f;
  return out;
}

// The source column of output column x for a crop/flip over images of
// `width` columns; outside [0, width) means padding.
LOCKSTEP_HOST_DEVICE inline int64_t crop_flip_source_x(const CropFlip& cf, int64_t width,
                                                       int64_t x) {
  return (cf.flip ? width - 1 - x : x) + cf.dx;
}

// One (height, width) plane of uint8 pixels through `table` (256 values)
// under a crop/flip: out[y][x] = table[in[y + dy][source x]], table[0]
// where the source is outside the image. Host code, compiled once
// (nn/crop_flip.cpp) for the loader (data/transform.cpp) and the CPU
// backend's gather_batch.
void crop_flip_plane(const uint8_t* in, int64_t height, int64_t width, const CropFlip& cf,
                     const float* table, float* out);

}  // namespace lockstep::nn
