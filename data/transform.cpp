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
  for (int64_t c = 0; c < channels_; ++c) {
    nn::crop_flip_plane(src + c * plane, height, width, crop_flip,
                        table_[static_cast<size_t>(c)].data(), dst + c * plane);
  }
}

void PixelTransform::apply(const uint8_t* src, int64_t height, int64_t width, uint64_t seed,
                           int64_t epoch, int64_t sample_id, float* dst) const {
  const CropFlip crop_flip =
      augmentation_.enabled() ? draw_crop_flip(augmentation_, seed, epoch, sample_id) : CropFlip{};
  apply(src, height, width, crop_flip, dst);
}

}  // namespace lockstep::data
