// Image decoding (PNG, JPEG, BMP through stb_image, with our header checks).
// Headers that pass the checks but declare over 16 megapixels are not
// decoded here: a few damaged bytes may legitimately stand for 64 megapixels
// of work (the limit of image_io.h), which under ASan takes longer than the
// fuzzer's per-input timeout without being a bug.
#include <span>

#include "common/error.h"
#include "data/image_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  try {
    const lockstep::data::ImageInfo info = lockstep::data::image_info(bytes, "fuzz");
    if (info.height * info.width > 16'000'000) return 0;
    lockstep::data::decode_image(bytes, "fuzz", size % 2 == 0 ? 1 : 3);
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
