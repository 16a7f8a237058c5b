#include "data/transform.h"

#include <algorithm>

#include "common/error.h"

namespace lockstep::data {
Normalization mnist_normalization() {
  return {{0.1307f}, {0.3081f}};
}

Normalization cifar10_normalization() {
  return {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}};
}

Augmentation cifar10_augmentation() {
  return {4, true};
}

CropFlip draw_crop_flip(const Augmentation& augmentation, uint64_t seed, int64_t epoch,
                        int64_t sample_id) {
  return nn::draw_crop_flip(augmentation.crop_padding, augmentation.horizontal_flip, seed, epoch,
                            sample_id);
}

PixelTransform::PixelTransform(int64_t channels, const Normalization& normalization,
                               const Augmentation& augmentation)
    : channels_(channels), augmentation_(augmentation) {
  const auto n = static_cast<int64_t>(normalization.mean.size());
  if (channels <= 0) fail_input("normalisation: images have ", channels, " channels");
  if ((n != 1 && n != channels) || normalization.stddev.size() != normalization.mean.size()) {
    fail_input("normalisation: ", normalization.mean.size(), " means and ",
               normalization.stddev.size(), " stds for images of ", channels,
               " channels (expected 1 or ", channels, " of each)");
  }
  if (augmentation.crop_padding < 0) {
    fail_input("augmentation: crop padding ", augmentation.crop_padding, " is negative");
  }
  table_.resize(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) {
    const auto k = static_cast<size_t>(n == 1 ? 0 : c);
    const float mean = normalization.mean[k];
    const float stddev = normalization.stddev[k];
    if (!(stddev > 0.0f)) {
      fail_input("normalisation: std ", stddev, " of channel ", c, " must be positive");
    }
    // In float, in torchvision's order (ToTensor: v / 255; Normalize:
    // (x - mean) / std), so values match a PyTorch pipeline bit for bit.
    for (int v = 0; v < 256; ++v) {
      table_[static_cast<size_t>(c)][static_cast<size_t>(v)] =
          (static_cast<float>(v) / 255.0f - mean) / stddev;
    }
  }
}

void PixelTransform::apply(const uint8_t* src, int64_t height, int64_t width,
                           const CropFlip& crop_flip, float* dst) const {
  const int64_t plane = height * width;
  const bool identity = crop_flip.dy == 0 && crop_flip.dx == 0 && !crop_flip.flip;
  for (int64_t c = 0; c < channels_; ++c) {
    const float* table = table_[static_cast<size_t>(c)].data();
    const uint8_t* in = src + c * plane;
    float* out = dst + c * plane;
    if (identity) {
      for (int64_t i = 0; i < plane; ++i) out[i] = table[in[i]];
      continue;
    }
    const float zero = table[0];
    for (int64_t y = 0; y < height; ++y) {
      float* out_row = out + y * width;
      const int64_t sy = y + crop_flip.dy;
      if (sy < 0 || sy >= height) {
        std::fill(out_row, out_row + width, zero);
        continue;
      }
      const uint8_t* in_row = in + sy * width;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = nn::crop_flip_source_x(crop_flip, width, x);
        out_row[x] = (sx >= 0 && sx < width) ? table[in_row[sx]] : zero;
      }
    }
  }
}

void PixelTransform::apply(const uint8_t* src, int64_t height, int64_t width, uint64_t seed,
                           int64_t epoch, int64_t sample_id, float* dst) const {
  const CropFlip crop_flip =
      augmentation_.enabled() ? draw_crop_flip(augmentation_, seed, epoch, sample_id) : CropFlip{};
  apply(src, height, width, crop_flip, dst);
}

}  // namespace lockstep::data
