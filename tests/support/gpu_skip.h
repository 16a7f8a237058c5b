// How a GPU test that cannot run says why, in one of two words that
// scripts/gpu_check.sh reads from the gtest XML:
//   "CUDA code not built: ..." this build has no CUDA backend (a CI failure:
//                              .ci/run configures with LOCKSTEP_CUDA=REQUIRE);
//   "no device: ..."           the code is built, the machine shows no GPU.
#pragma once

#include <gtest/gtest.h>

#define LOCKSTEP_SKIP_NOT_BUILT(what) \
  GTEST_SKIP() << "CUDA code not built (LOCKSTEP_HAVE_CUDA=0): " << what
#define LOCKSTEP_SKIP_NO_DEVICE(why) GTEST_SKIP() << "no device: " << why
