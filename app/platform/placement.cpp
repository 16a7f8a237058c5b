#include "app/platform/placement.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace lockstep::app {

GpuChoice choose_gpu(int local_rank, int local_size, int visible, bool allow_share,
                     const std::string& host) {
  GpuChoice c;
  if (visible <= 0) {
    c.error = "no GPU is visible to local rank " + std::to_string(local_rank) + " on " + host +
              " (CUDA_VISIBLE_DEVICES or the job's GPU request hides them all)";
    return c;
  }
  if (visible == 1) {
    c.device = 0;
  } else if (visible >= local_size) {
    c.device = local_rank;
  } else if (allow_share) {
    c.device = local_rank % visible;
    c.shared = true;
  } else {
    c.error = std::to_string(local_size) + " ranks on " + host + " but only " +
              std::to_string(visible) + " GPUs are visible to each (local rank " +
              std::to_string(local_rank) +
              "); start one rank per GPU, give each rank one GPU (jobs/gpu_affinity.sh, "
              "srun --gpus-per-task=1), or set gpu_share = true to put several ranks on a GPU";
  }
  return c;
}

int default_threads(int mask_cpus, int online, int local_size) {
  mask_cpus = std::max(1, mask_cpus);
  if (mask_cpus < online) return mask_cpus;
  return std::max(1, mask_cpus / std::max(1, local_size));
}

std::string threads_reason(int mask_cpus, int online, int local_size) {
  std::ostringstream out;
  if (std::max(1, mask_cpus) < online) {
    out << mask_cpus << " CPU" << (mask_cpus == 1 ? "" : "s") << " in affinity mask";
  } else {
    out << mask_cpus << " of " << online << " CPUs / " << local_size << " rank"
        << (local_size == 1 ? "" : "s") << " per node";
  }
  return out.str();
}

std::vector<int> affinity_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    for (int i = 0; i < online_cpus(); ++i) cpus.push_back(i);
    return cpus;
  }
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  return cpus;
}

int online_cpus() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string cpu_list_string(const std::vector<int>& cpus) {
  std::ostringstream out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    out << (i ? "," : "") << cpus[i];
    if (j > i) out << "-" << cpus[j];
    i = j + 1;
  }
  return out.str();
}

CudaVisibleDevices cuda_visible_devices() {
  CudaVisibleDevices v;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) return v;
  v.set = true;
  std::istringstream in(env);
  for (std::string entry; std::getline(in, entry, ',');) {
    entry.erase(0, entry.find_first_not_of(" \t"));
    entry.erase(entry.find_last_not_of(" \t") + 1);
    // The runtime stops at the first invalid entry (e.g. -1): it hides the rest.
    if (entry.empty() || entry[0] == '-') break;
    v.entries.push_back(entry);
  }
  return v;
}

}  // namespace lockstep::app
