// Memory on the compute device, as Tensor (nn/tensor.h) allocates, copies and
// frees it for Device::kCuda. The CUDA backend provides the implementation
// and registers it when it is loaded (app/ hands over the plugin's); until
// then device tensors cannot be made and say so.
//
// Process-wide: one registration serves every thread. Register before the
// first device tensor and keep the object alive while any device tensor
// exists.
#pragma once

#include <cstddef>

namespace lockstep::nn {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // `bytes` of zeroed device memory on the calling thread's current device;
  // throws LibraryError when it cannot be had.
  virtual float* allocate(size_t bytes) = 0;
  // Frees what allocate returned; errors at teardown are ignored.
  virtual void release(float* p) noexcept = 0;
  // Copies between host and device memory in either direction (or device to
  // device); a copy with a host side has completed when it returns, a device
  // to device copy is queued in the device's order (work queued after it
  // sees its result). Throws LibraryError.
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  // Sets `bytes` of device memory to zero. Throws LibraryError.
  virtual void zero(void* p, size_t bytes) = 0;
};

// Registers the device memory (nullptr: none).
void set_device_memory(DeviceMemory* memory) noexcept;
// The registered device memory; throws Error when none is (no CUDA backend
// was loaded: use device = "cpu").
DeviceMemory& device_memory();
// The registered device memory or nullptr.
DeviceMemory* device_memory_or_null() noexcept;

}  // namespace lockstep::nn
