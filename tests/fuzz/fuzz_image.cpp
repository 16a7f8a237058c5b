// Image decoding (PNG, JPEG, BMP through stb_image, with our header checks).
#include <span>

#include "data/image_io.h"
#include "nn/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    lockstep::data::image_info(bytes, "fuzz");
    lockstep::data::decode_image(bytes, "fuzz", size % 2 == 0 ? 1 : 3);
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
