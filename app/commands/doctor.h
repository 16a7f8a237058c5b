// `lockstep doctor`: run under the job's own launcher (mpiexec -n N lockstep
// doctor [train options]), every rank reports where it runs and what it
// would use; rank 0 prints one table and names each problem it sees.
#pragma once

#include <string>
#include <vector>

#include "app/config/config.h"
#include "distributed/communicator.h"

namespace lockstep::app {

// What one rank sees (filled on that rank, gathered on rank 0).
struct DoctorRank {
  int rank = 0, local_rank = 0, local_size = 1;
  std::string host;
  std::string node;       // node_key (app/platform/placement.h): ranks of one node share it
  std::vector<int> cpus;  // affinity mask
  int online_cpus = 1;
  int threads = 1;                     // compute threads it would start
  std::string cuda_visible = "unset";  // CUDA_VISIBLE_DEVICES
  int visible_gpus = 0;                // -1: unknown (no driver, CUDA_VISIBLE_DEVICES unset)
  std::string visible_source;          // "driver" | "CUDA_VISIBLE_DEVICES" | ""
  std::string gpu = "-";              // GPU it would take (the physical id; '*': shared), "-": none
  std::string gpu_bus_id;             // that GPU's PCI bus id, "" when unknown (no plugin)
  bool gpu_share = false;             // config key gpu_share: ranks may share a GPU
  std::string device_problem;         // why its device cannot start, "" when it can
  std::string plugin = "not needed";  // "found" | "missing" | "refused" | "not needed"
  std::string plugin_detail;          // path or error line
  std::string mpi;                    // MPI library, first line
  std::string nccl_env;               // NCCL_* variables, "-" when none
  std::string data_dir;               // where the data set is looked for
  bool data_ok = false;
  std::string run_dir;
  bool run_dir_ok = false;
};

// This rank's report (reads its environment and affinity).
DoctorRank inspect_rank(const TrainConfig& config, const distributed::Communicator& comm);

// One problem per line: two ranks on one GPU or on overlapping pinned CPUs,
// more threads than CPUs (per rank and per node), a node without the data or
// run directory, a device that cannot start. Empty when all is well.
std::vector<std::string> doctor_problems(const std::vector<DoctorRank>& ranks);

// The table rank 0 prints, one row per rank.
std::string doctor_table(const std::vector<DoctorRank>& ranks);

// Collective: gathers every rank's report; rank 0 prints the table and the
// problems. Returns 0 when there are none, 1 otherwise (on every rank).
int run_doctor(const TrainConfig& config, distributed::Communicator& comm);

}  // namespace lockstep::app
