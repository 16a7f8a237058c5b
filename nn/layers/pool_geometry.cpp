#include "nn/layers/pool_geometry.h"

#include "nn/error.h"

namespace lockstep::nn {

Pool2dGeometry pool_geometry(const Layer& layer, int64_t kernel, int64_t stride,
                             const Shape& input) {
  if (input.size() != 4 || input[2] < kernel || input[3] < kernel) {
    fail_input(layer.name(), " ", layer.describe(),
               ": expects input (N, C, H, W) with H, W >= ", kernel, ", got ", shape_string(input));
  }
  Pool2dGeometry g;
  g.batch = input[0];
  g.channels = input[1];
  g.in_h = input[2];
  g.in_w = input[3];
  g.kernel = kernel;
  g.stride = stride;
  return g;
}

}  // namespace lockstep::nn
