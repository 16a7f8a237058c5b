// Where a rank runs: which GPU it takes and how many compute threads it
// starts. The rules are pure functions of what the launcher gave the process
// (local rank and size, the GPUs it can see, the CPUs in its affinity mask),
// so every launcher (mpiexec, aprun, srun, jobs/gpu_affinity.sh) gets the
// same answer; the readers below collect those inputs from the process.
#pragma once

#include <algorithm>
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

// "rank 3" or "ranks 0, 1, 5".
std::string rank_list(const std::vector<int>& ranks);

// --- The job's devices, decided together -----------------------------------
// What one rank found by itself: the GPU choose_gpu gave it and that GPU's
// PCI bus id, or why it has none. The bus id is what NCCL compares: two ranks
// of one host on one bus id are one GPU, however each numbers it (a job-wide
// CUDA_VISIBLE_DEVICES=0, a 1-GPU box under mpiexec -n 4, MIG slices of one
// GPU).
struct RankGpu {
  std::string host;         // for messages
  std::string node;         // node_key(host): containers on two nodes may share a host name
  int device = -1;          // -1: see problem
  bool shared = false;      // choose_gpu's: gpu_share put other local ranks here
  std::string bus_id;       // "0000:41:00.0"; "" when the plugin could not tell
  std::string problem;      // one line naming the rank, when device < 0
  bool cuda_usable = true;  // false: no plugin, driver or device at all on this rank
};

// This rank's device, of the same kind on every rank: a data-parallel job
// with some ranks on GPUs and some on CPUs would run at the CPUs' pace.
//   gpu_required (device = "cuda"): every rank on a GPU, or `error` (the same
//     line on every rank, naming the first rank at fault).
//   otherwise (device = "auto"): every rank on a GPU when each can have one
//     (its own, or shared under allow_share), else every rank on the CPU,
//     with `note` saying why unless no rank has a usable CUDA device at all
//     (a CPU machine: nothing to say).
// Ranks of one host on one bus id share it: allowed with allow_share
// (gpu_share), refused (cuda) or a fall-back to the CPU (auto) without.
struct DevicePlan {
  bool gpu = false;
  int device = -1;          // this rank's visible device when gpu
  bool shared = false;      // this rank's GPU computes for other ranks too
  bool job_shares = false;  // some rank's GPU does (NCCL takes one rank per GPU)
  std::string error;
  std::string note;
};
DevicePlan plan_devices(bool gpu_required, bool allow_share, const std::vector<RankGpu>& ranks,
                        int rank);

// Whether gradient buckets reduce over NCCL (engine: config key
// gradient_engine): with more than one rank, engine "auto" or "nccl", every
// rank on a GPU of its own and no compression (16-bit compression converts
// and reduces on the host). engine "nccl" where NCCL cannot serve is `error`.
struct GradientEngineChoice {
  bool nccl = false;
  std::string error;
};
GradientEngineChoice choose_gradient_engine(const std::string& engine, const DevicePlan& plan,
                                            int world_size, const std::string& compression);

// The CPUs (hardware threads) a process may run on and the physical cores
// they lie on: with SMT, srun -c 32 gives 32 CPUs on 16 cores.
struct CpuCount {
  int cpus = 0;
  int cores = 0;  // 1 <= cores <= cpus when cpus > 0
};

// Default compute threads per rank: one per core, as PyTorch and MKL do (two
// threads of one core share its FMA units, so the second adds a barrier
// party, not speed). A mask smaller than the machine (online_cpus) is the
// launcher's binding (aprun -d, mpiexec --depth, srun -c) and its cores are
// used whole; a mask of the whole machine is shared by the local ranks, each
// taking cores / local_size (at least 1).
int default_threads(CpuCount mask, int online_cpus, int local_size);

// How default_threads decided, for the start-up line, e.g.
// "2 CPUs in affinity mask", "32 CPUs (16 cores) in affinity mask" or
// "8 of 8 CPUs / 4 ranks per node".
std::string threads_reason(CpuCount mask, int online_cpus, int local_size);

// The physical cores among cpus: core_of(cpu) names a CPU's core (any key
// shared by the hardware threads of one core), or -1 when it is unknown, and
// then the CPU counts as a core of its own.
template <typename CoreOf>
int distinct_cores(const std::vector<int>& cpus, CoreOf core_of);

// --- Readers of this process's environment -----------------------------------
// The CPUs in this process's affinity mask (sched_getaffinity), ascending.
std::vector<int> affinity_cpus();
// The machine's online CPUs (at least 1).
int online_cpus();
// A CPU's core as Linux describes it: the first CPU of
// <sysfs>/cpu<N>/topology/thread_siblings_list, or -1 when it is unreadable.
int core_of_cpu(int cpu, const std::string& sysfs = "/sys/devices/system/cpu");
// This process's affinity mask, counted in CPUs and cores (core_of_cpu).
CpuCount affinity_count();
// What tells this node from the others: the host name and the kernel's boot
// id (/proc/sys/kernel/random/boot_id), one value for every process of a
// node, containers included, and another on every other node even where
// host names repeat (as NCCL's host hash). "host/" when there is no boot id.
std::string node_key(const std::string& host);
// "0-3,8" for a sorted CPU list.
std::string cpu_list_string(const std::vector<int>& cpus);
// CUDA_VISIBLE_DEVICES: unset -> set = false; otherwise its entries
// ("3,2" -> {"3", "2"}; "" -> none visible).
struct CudaVisibleDevices {
  bool set = false;
  std::vector<std::string> entries;
};
CudaVisibleDevices cuda_visible_devices();

template <typename CoreOf>
int distinct_cores(const std::vector<int>& cpus, CoreOf core_of) {
  std::vector<int> cores;
  int unknown = 0;
  for (int cpu : cpus) {
    const int core = core_of(cpu);
    if (core < 0) {
      ++unknown;
    } else if (std::find(cores.begin(), cores.end(), core) == cores.end()) {
      cores.push_back(core);
    }
  }
  return static_cast<int>(cores.size()) + unknown;
}

}  // namespace lockstep::app
