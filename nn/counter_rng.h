// A counter-based random generator: a pure function of (key, counter), so a
// value can be computed anywhere (any thread, rank or device) without state.
// Used for dropout masks, identical on the CPU and CUDA backends.
#pragma once

#include <cstdint>

#include "nn/host_device.h"

namespace lockstep::nn {

// SplitMix64 finaliser: a bijective 64-bit mix with full avalanche.
LOCKSTEP_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Combines keys into one (order matters).
LOCKSTEP_HOST_DEVICE inline uint64_t hash_combine(uint64_t a, uint64_t b) {
  return mix64(a + 0x9e3779b97f4a7c15ULL + mix64(b));
}

// Uniform float in [0, 1) with 24 random bits.
LOCKSTEP_HOST_DEVICE inline float counter_uniform(uint64_t key, uint64_t counter) {
  const uint64_t bits = mix64(hash_combine(key, counter));
  return static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);
}

}  // namespace lockstep::nn
