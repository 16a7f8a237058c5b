// CIFAR-10 binary batch reader.
#include "common/error.h"
#include "data/cifar10.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lockstep::fuzz::MemoryFile file(data, size);
  try {
    lockstep::data::read_cifar10_files({file.path()}).validate();
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
