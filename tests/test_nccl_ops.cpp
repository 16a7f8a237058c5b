// distributed/cuda/nccl_ops.h: every ReduceOp has its NCCL reduction (no GPU
// needed). CUDA builds only.
#include <gtest/gtest.h>

#include "support/gpu_skip.h"

#if LOCKSTEP_HAVE_CUDA

#include "distributed/cuda/nccl_ops.h"

namespace lockstep::distributed {
namespace {

TEST(NcclOps, EveryReduceOpMapsToItsNcclReduction) {
  EXPECT_EQ(nccl_op_of(ReduceOp::kSum), ncclSum);
  EXPECT_EQ(nccl_op_of(ReduceOp::kAverage), ncclAvg);
  EXPECT_EQ(nccl_op_of(ReduceOp::kMin), ncclMin);
  EXPECT_EQ(nccl_op_of(ReduceOp::kMax), ncclMax);
  EXPECT_EQ(nccl_op_of(static_cast<ReduceOp>(99)), std::nullopt);
}

}  // namespace
}  // namespace lockstep::distributed

#else

TEST(NcclOps, NotBuilt) {
  LOCKSTEP_SKIP_NOT_BUILT("no NCCL reduction table to test");
}

#endif
