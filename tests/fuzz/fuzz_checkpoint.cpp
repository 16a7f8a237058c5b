// Checkpoint reader (header, CRC, JSON metadata, entries).
#include "app/checkpoint/checkpoint.h"
#include "common/error.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lockstep::fuzz::MemoryFile file(data, size);
  try {
    lockstep::app::load_checkpoint(file.path());
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
