// safetensors reader (--init-from): header length, JSON, dtypes, shapes
// against byte counts, offsets. A tensor it returns must hold exactly as
// many values as its shape says (what init_weights_from relies on).
#include <cstdlib>

#include "app/formats/safetensors.h"
#include "common/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lockstep::fuzz::MemoryFile file(data, size);
  try {
    const lockstep::app::SafetensorsFile read = lockstep::app::load_safetensors(file.path());
    for (const lockstep::app::CheckpointEntry& e : read.tensors) {
      size_t numel = 1;
      for (const int64_t d : e.shape) {
        if (d < 0 || __builtin_mul_overflow(numel, static_cast<size_t>(d), &numel)) std::abort();
      }
      if (numel != e.values.size()) std::abort();
    }
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
