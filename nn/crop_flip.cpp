#include "nn/crop_flip.h"

#include <algorithm>

namespace lockstep::nn {

void crop_flip_plane(const uint8_t* in, int64_t height, int64_t width, const CropFlip& cf,
                     const float* table, float* out) {
  if (cf.dy == 0 && cf.dx == 0 && !cf.flip) {
    for (int64_t i = 0; i < height * width; ++i) out[i] = table[in[i]];
    return;
  }
  const float zero = table[0];
  for (int64_t y = 0; y < height; ++y) {
    float* out_row = out + y * width;
    const int64_t sy = y + cf.dy;
    if (sy < 0 || sy >= height) {
      std::fill(out_row, out_row + width, zero);
      continue;
    }
    const uint8_t* in_row = in + sy * width;
    for (int64_t x = 0; x < width; ++x) {
      const int64_t sx = crop_flip_source_x(cf, width, x);
      out_row[x] = (sx >= 0 && sx < width) ? table[in_row[sx]] : zero;
    }
  }
}

}  // namespace lockstep::nn
