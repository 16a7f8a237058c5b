// The geometry checks every backend makes before an op (nn/backend.h).
#include "nn/backend.h"

#include "common/error.h"

namespace lockstep::nn {

void Conv2dGeometry::validate() const {
  LOCKSTEP_CHECK(batch >= 0 && in_channels > 0 && out_channels > 0 && kernel_h > 0 &&
                     kernel_w > 0 && stride > 0 && pad >= 0,
                 "bad conv2d geometry");
  LOCKSTEP_CHECK(in_h + 2 * pad >= kernel_h && in_w + 2 * pad >= kernel_w,
                 "conv2d kernel larger than the padded input");
}

void Pool2dGeometry::validate() const {
  LOCKSTEP_CHECK(
      batch >= 0 && channels > 0 && kernel > 0 && stride > 0 && in_h >= kernel && in_w >= kernel,
      "bad maxpool2d geometry");
}

// Only for the geometries conv2d_maps_input takes, which here are none.
void Backend::conv2d_forward_mapped(const Conv2dGeometry&, const ConvInputMap&, const float*,
                                    const float*, const float*, float*) {
  LOCKSTEP_CHECK(false, name(), " does not map a convolution's input");
}

void Backend::conv2d_backward_filter_mapped(const Conv2dGeometry&, const ConvInputMap&,
                                            const float*, const float*, float*, float*) {
  LOCKSTEP_CHECK(false, name(), " does not map a convolution's input");
}

}  // namespace lockstep::nn
