// IDX reader: the first byte says where the images file ends and the labels
// file begins (as a fraction of the rest).
#include "common/error.h"
#include "data/idx.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const size_t split = 1 + (size - 1) * data[0] / 255;
  lockstep::fuzz::MemoryFile images(data + 1, split - 1), labels(data + split, size - split);
  try {
    lockstep::data::read_idx(images.path(), labels.path(), {}).validate();
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
