// The NCCL reduction of each ReduceOp: a table, tested without a GPU
// (tests/test_cuda_rules.cpp).
#pragma once

#include <nccl.h>

#include <optional>

#include "common/enum_table.h"
#include "distributed/communicator.h"

namespace lockstep::distributed {

inline constexpr nn::EnumEntry<ReduceOp, ncclRedOp_t> kNcclOps[] = {{ReduceOp::kSum, ncclSum},
                                                                    {ReduceOp::kAverage, ncclAvg},
                                                                    {ReduceOp::kMin, ncclMin},
                                                                    {ReduceOp::kMax, ncclMax}};

// Empty for a value outside the enumeration.
constexpr std::optional<ncclRedOp_t> nccl_op_of(ReduceOp op) {
  return nn::value_of(kNcclOps, op);
}

}  // namespace lockstep::distributed
