// Per-sample pixel transform: optional random crop (zero padding) and
// horizontal flip, then per-channel normalisation to float.
//
//   src is (C, H, W) uint8, dst is (C, H, W) float
//   dst[c][y][x] = (p / 255 - mean[c]) / std[c]   (float, torchvision's order),
//   p = src[c][y + dy][xs + dx] with xs = flip ? W-1-x : x, or 0 outside
//
// This is torchvision's RandomCrop(H, padding=P) + RandomHorizontalFlip() +
// ToTensor() + Normalize(mean, std): padding is zero in pixel space, before
// normalisation. The crop offsets (dy, dx in [-P, P]) and the flip are drawn
// from the counter RNG keyed by (seed, epoch, sample id), so a sample looks
// the same whatever its rank, thread or position in a batch.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "nn/crop_flip.h"

namespace lockstep::data {

// Per-channel mean and standard deviation of pixels scaled to [0, 1]. One
// value applies to every channel.
struct Normalization {
  std::vector<float> mean{0.0f};
  std::vector<float> stddev{1.0f};
};

// MNIST and Fashion-MNIST: 0.1307 / 0.3081. CIFAR-10: 0.5 / 0.5 per channel.
Normalization mnist_normalization();
Normalization cifar10_normalization();

struct Augmentation {
  int64_t crop_padding = 0;      // P: random crop of the same size from the padded image
  bool horizontal_flip = false;  // mirror with probability 1/2
  bool enabled() const { return crop_padding > 0 || horizontal_flip; }
};

// RandomCrop(32, padding=4) + RandomHorizontalFlip(), as for CIFAR-10.
Augmentation cifar10_augmentation();

// The random choices for one sample (nn/crop_flip.h, shared with the
// backends' gather_batch).
using CropFlip = nn::CropFlip;

CropFlip draw_crop_flip(const Augmentation& augmentation, uint64_t seed, int64_t epoch,
                        int64_t sample_id);

// Normalisation tables for a fixed channel count, plus the augmentation.
class PixelTransform {
 public:
  // Throws InputError when normalization has neither 1 nor `channels`
  // entries, a std is not positive, or the padding is negative.
  PixelTransform(int64_t channels, const Normalization& normalization,
                 const Augmentation& augmentation = {});

  const Augmentation& augmentation() const { return augmentation_; }
  // The normalised float of pixel value v in channel c.
  float value(int64_t c, uint8_t v) const { return table_[static_cast<size_t>(c)][v]; }

  // src (C, H, W) uint8 -> dst (C, H, W) float, with the given crop/flip.
  void apply(const uint8_t* src, int64_t height, int64_t width, const CropFlip& crop_flip,
             float* dst) const;
  // The same, drawing crop/flip for (seed, epoch, sample_id) when augmentation
  // is enabled.
  void apply(const uint8_t* src, int64_t height, int64_t width, uint64_t seed, int64_t epoch,
             int64_t sample_id, float* dst) const;

 private:
  int64_t channels_;
  Augmentation augmentation_;
  std::vector<std::array<float, 256>> table_;  // [channel][pixel value]
};

}  // namespace lockstep::data
