#include "nn/cpu/scratch.h"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

namespace lockstep::nn::cpu {
namespace {

struct FreeDeleter {
  void operator()(float* p) const noexcept { std::free(p); }
};

struct Buffer {
  std::unique_ptr<float, FreeDeleter> data;
  size_t capacity = 0;
};

thread_local Buffer tls_buffers[static_cast<int>(ScratchSlot::kCount)];

}  // namespace

float* scratch(ScratchSlot slot, size_t n) {
  Buffer& b = tls_buffers[static_cast<int>(slot)];
  if (n > b.capacity || !b.data) {
    // Grow geometrically; round to whole cache lines for aligned_alloc.
    size_t want = std::max<size_t>({n, b.capacity + b.capacity / 2, 16});
    want = (want * sizeof(float) + 63) / 64 * 64;
    b.data.reset(static_cast<float*>(std::aligned_alloc(64, want)));
    if (!b.data) throw std::bad_alloc();
    b.capacity = want / sizeof(float);
  }
  return b.data.get();
}

}  // namespace lockstep::nn::cpu
