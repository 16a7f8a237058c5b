// Normalisation and augmentation (random crop with zero padding, flip).
#include <gtest/gtest.h>

#include <vector>

#include "common/error.h"
#include "data/catalog.h"
#include "data/transform.h"

namespace lockstep::data {
namespace {

// A 1-channel h x w image whose pixel (y, x) is 1 + y * w + x.
std::vector<uint8_t> ramp(int64_t h, int64_t w) {
  std::vector<uint8_t> img(static_cast<size_t>(h * w));
  for (size_t i = 0; i < img.size(); ++i) img[i] = static_cast<uint8_t>(1 + i);
  return img;
}

TEST(DataNormalization, Values) {
  // Bit-exact with torchvision: ToTensor (float v / 255), then Normalize.
  const PixelTransform mnist(1, default_normalization("fashion-mnist"));
  for (int v = 0; v < 256; ++v) {
    EXPECT_EQ(mnist.value(0, static_cast<uint8_t>(v)),
              (static_cast<float>(v) / 255.0f - 0.1307f) / 0.3081f);
  }
  EXPECT_NEAR(mnist.value(0, 0), -0.1307 / 0.3081, 1e-6);
  EXPECT_NEAR(mnist.value(0, 255), (1.0 - 0.1307) / 0.3081, 1e-6);
  EXPECT_NEAR(mnist.value(0, 51), (0.2 - 0.1307) / 0.3081, 1e-6);
  const PixelTransform cifar(3, default_normalization("cifar10"));
  for (int c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(cifar.value(c, 0), -1.0f);
    EXPECT_FLOAT_EQ(cifar.value(c, 255), 1.0f);
  }
  // Per-channel values are used per channel.
  const PixelTransform per(2, Normalization{{0.0f, 0.5f}, {1.0f, 0.25f}});
  const std::vector<uint8_t> img = {255, 0, 255, 0};  // (2, 1, 2)
  std::vector<float> out(4);
  per.apply(img.data(), 1, 2, CropFlip{}, out.data());
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 2.0f);
  EXPECT_FLOAT_EQ(out[3], -2.0f);
}

TEST(DataNormalization, RejectsBadParameters) {
  EXPECT_THROW(PixelTransform(3, Normalization{{0.1f, 0.2f}, {1.0f, 1.0f}}), InputError);
  EXPECT_THROW(PixelTransform(1, Normalization{{0.1f}, {0.0f}}), InputError);
  EXPECT_THROW(PixelTransform(1, Normalization{{0.1f}, {1.0f, 1.0f}}), InputError);
  EXPECT_THROW(PixelTransform(1, Normalization{}, Augmentation{-1, false}), InputError);
}

TEST(DataAugmentation, DrawsAreDeterministicPerSeedEpochAndId) {
  const Augmentation aug = cifar10_augmentation();
  const CropFlip a = draw_crop_flip(aug, 1, 2, 3);
  const CropFlip b = draw_crop_flip(aug, 1, 2, 3);
  EXPECT_EQ(a.dy, b.dy);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.flip, b.flip);
  // Over many ids: every offset in [-4, 4] occurs, both flips occur, about
  // half flipped, and another epoch or seed gives other draws.
  std::vector<int> dy_seen(9, 0), dx_seen(9, 0);
  int flips = 0, differ_epoch = 0, differ_seed = 0;
  for (int64_t id = 0; id < 4000; ++id) {
    const CropFlip d = draw_crop_flip(aug, 1, 2, id);
    ASSERT_GE(d.dy, -4);
    ASSERT_LE(d.dy, 4);
    ASSERT_GE(d.dx, -4);
    ASSERT_LE(d.dx, 4);
    ++dy_seen[static_cast<size_t>(d.dy + 4)];
    ++dx_seen[static_cast<size_t>(d.dx + 4)];
    flips += d.flip;
    const CropFlip e = draw_crop_flip(aug, 1, 3, id);
    const CropFlip s = draw_crop_flip(aug, 2, 2, id);
    differ_epoch += e.dy != d.dy || e.dx != d.dx || e.flip != d.flip;
    differ_seed += s.dy != d.dy || s.dx != d.dx || s.flip != d.flip;
  }
  for (int c : dy_seen) EXPECT_GT(c, 300);
  for (int c : dx_seen) EXPECT_GT(c, 300);
  EXPECT_GT(flips, 1800);
  EXPECT_LT(flips, 2200);
  EXPECT_GT(differ_epoch, 3500);
  EXPECT_GT(differ_seed, 3500);
  // Disabled parts draw nothing.
  const CropFlip none = draw_crop_flip(Augmentation{}, 1, 2, 3);
  EXPECT_EQ(none.dy, 0);
  EXPECT_EQ(none.dx, 0);
  EXPECT_FALSE(none.flip);
}

TEST(DataAugmentation, FlipMirrorsEachRow) {
  const PixelTransform t(1, Normalization{{0.0f}, {1.0f / 255.0f}});  // value = pixel
  const auto img = ramp(3, 4);
  std::vector<float> out(12);
  t.apply(img.data(), 3, 4, CropFlip{0, 0, true}, out.data());
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 4; ++x) {
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(y * 4 + x)], img[static_cast<size_t>(y * 4 + 3 - x)]);
    }
  }
}

TEST(DataAugmentation, CropShiftsContentAndPadsWithPixelZero) {
  // mean 0.5 so that padding (pixel 0) is -0.5 / std, not 0.
  const PixelTransform t(1, Normalization{{0.5f}, {0.5f}}, Augmentation{2, false});
  const auto img = ramp(4, 5);
  std::vector<float> out(20);
  // dy = +1, dx = -2: out(y, x) = in(y + 1, x - 2).
  t.apply(img.data(), 4, 5, CropFlip{1, -2, false}, out.data());
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) {
      const int sy = y + 1, sx = x - 2;
      const bool inside = sy < 4 && sx >= 0;
      const uint8_t p = inside ? img[static_cast<size_t>(sy * 5 + sx)] : 0;
      EXPECT_FLOAT_EQ(out[static_cast<size_t>(y * 5 + x)], t.value(0, p)) << y << "," << x;
    }
  }
  EXPECT_FLOAT_EQ(out[0], -1.0f);  // padding normalised: (0 - 0.5) / 0.5
  // Crop then flip, as torchvision composes them: out(y, x) = in(y, W-1-x + dx).
  t.apply(img.data(), 4, 5, CropFlip{0, 1, true}, out.data());
  for (int x = 0; x < 5; ++x) {
    const int sx = 4 - x + 1;
    const uint8_t p = sx < 5 ? img[static_cast<size_t>(sx)] : 0;
    EXPECT_FLOAT_EQ(out[static_cast<size_t>(x)], t.value(0, p));
  }
}

TEST(DataAugmentation, ApplyUsesTheKeyedDraw) {
  const PixelTransform t(1, Normalization{}, cifar10_augmentation());
  const auto img = ramp(8, 8);
  std::vector<float> a(64), b(64);
  for (int64_t id = 0; id < 20; ++id) {
    t.apply(img.data(), 8, 8, 5, 1, id, a.data());
    t.apply(img.data(), 8, 8, draw_crop_flip(t.augmentation(), 5, 1, id), b.data());
    EXPECT_EQ(a, b);
  }
}

}  // namespace
}  // namespace lockstep::data
