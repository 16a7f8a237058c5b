// The geometry of a pooling layer (max or average) for an input shape,
// shared by MaxPool2d and AvgPool2d.
#pragma once

#include <cstdint>

#include "nn/backend.h"
#include "nn/layer.h"

namespace lockstep::nn {

// (N, C, H, W) input with H, W >= kernel -> the backend's Pool2dGeometry;
// throws InputError naming `layer` otherwise.
Pool2dGeometry pool_geometry(const Layer& layer, int64_t kernel, int64_t stride,
                             const Shape& input);

}  // namespace lockstep::nn
