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

}  // namespace lockstep::nn
