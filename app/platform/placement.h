// Where a rank runs: which GPU it takes and how many compute threads it
// starts. The rules are pure functions of what the launcher gave the process
// (local rank and size, the GPUs it can see, the CPUs in its affinity mask),
// so every launcher (mpiexec, aprun, srun, jobs/gpu_affinity.sh) gets the
// same answer; the readers below collect those inputs from the process.
#pragma once

#include <string>
#include <vector>

namespace lockstep::app {

// The GPU a rank takes among the `visible` devices it can see (0-based, as
// the CUDA runtime numbers them), or an error.
//   visible == 0             : error (no GPU visible)
//   visible == 1             : device 0 (the launcher chose it: one GPU per rank)
//   visible >= local_size    : device local_rank
//   1 < visible < local_size : error naming the host and the counts, unless
//                              allow_share (config key gpu_share): device
//                              local_rank % visible, shared = true
struct GpuChoice {
  int device = -1;  // -1 when error is set
  bool shared = false;
  std::string error;  // one line, empty when device >= 0
};
GpuChoice choose_gpu(int local_rank, int local_size, int visible, bool allow_share,
                     const std::string& host);

// Default compute threads per rank from the CPUs in the affinity mask
// (mask_cpus) and the machine's online CPUs: a mask smaller than the machine
// is the launcher's binding (aprun -d, mpiexec --depth, srun -c) and is used
// whole; a mask of the whole machine is shared by the local ranks, each
// taking mask_cpus / local_size (at least 1).
int default_threads(int mask_cpus, int online_cpus, int local_size);

// How default_threads decided, for the start-up line, e.g.
// "2 CPUs in affinity mask" or "8 of 8 CPUs / 4 ranks per node".
std::string threads_reason(int mask_cpus, int online_cpus, int local_size);

// --- Readers of this process's environment -----------------------------------
// The CPUs in this process's affinity mask (sched_getaffinity), ascending.
std::vector<int> affinity_cpus();
// The machine's online CPUs (at least 1).
int online_cpus();
// "0-3,8" for a sorted CPU list.
std::string cpu_list_string(const std::vector<int>& cpus);
// CUDA_VISIBLE_DEVICES: unset -> set = false; otherwise its entries
// ("3,2" -> {"3", "2"}; "" -> none visible).
struct CudaVisibleDevices {
  bool set = false;
  std::vector<std::string> entries;
};
CudaVisibleDevices cuda_visible_devices();

}  // namespace lockstep::app
