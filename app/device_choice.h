// Which device a rank computes on (config key `device = cpu | cuda | auto`),
// as a pure function of what the rank sees, so that the rule is tested
// without a GPU (tests/test_device_choice.cpp). One GPU per local rank:
// local rank r uses visible device r.
//
//   cpu:  the CPU.
//   cuda: GPU local_rank; an error when local_rank >= gpus (or the build has
//         no CUDA).
//   auto: GPU local_rank when every local rank of the node has one
//         (local_size <= gpus); the CPU when the node has no GPU; and when
//         ranks outnumber GPUs (0 < gpus < local_size), the CPU for every
//         rank of the node, with a note saying so: a node whose ranks split
//         between GPUs and CPU would run at the CPU ranks' pace anyway, and
//         gradients then go through MPI (gradient_engine = auto).
#pragma once

#include <string>

namespace lockstep::app {

struct DeviceChoice {
  bool cuda = false;
  int device_index = -1;  // the visible GPU, when cuda
  std::string note;       // what the user should know (auto fell back); may be empty
  std::string error;      // non-empty: the request cannot be met (one line)
};

struct DeviceView {
  std::string requested;  // "cpu" | "cuda" | "auto"
  bool cuda_built = false;
  int gpus = 0;  // visible on this node
  int rank = 0, local_rank = 0, local_size = 1;
  std::string host;
};

DeviceChoice choose_device(const DeviceView& view);

}  // namespace lockstep::app
