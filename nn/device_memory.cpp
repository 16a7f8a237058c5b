#include "nn/device_memory.h"

#include <atomic>

#include "common/error.h"

namespace lockstep::nn {
namespace {

std::atomic<DeviceMemory*> registered{nullptr};

}  // namespace

void set_device_memory(DeviceMemory* memory) noexcept {
  registered.store(memory);
}

DeviceMemory* device_memory_or_null() noexcept {
  return registered.load();
}

DeviceMemory& device_memory() {
  DeviceMemory* memory = registered.load();
  if (memory == nullptr) {
    throw Error(
        "a CUDA tensor was asked for but no CUDA backend is loaded (see `lockstep info`); use "
        "device = \"cpu\"");
  }
  return *memory;
}

}  // namespace lockstep::nn
