#include "app/platform/placement.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

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

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

namespace {

// "" or " (and 2 more ranks)".
std::string more_ranks(size_t more) {
  if (more == 0) return "";
  return " (and " + std::to_string(more) + " more rank" + (more == 1 ? "" : "s") + ")";
}

}  // namespace

DevicePlan plan_devices(bool gpu_required, bool allow_share, const std::vector<RankGpu>& ranks,
                        int rank) {
  DevicePlan plan;
  std::vector<int> without;
  bool any_cuda = false;
  for (size_t r = 0; r < ranks.size(); ++r) {
    if (ranks[r].device < 0) without.push_back(static_cast<int>(r));
    any_cuda = any_cuda || ranks[r].cuda_usable;
  }
  std::string why;
  bool no_cuda = false;  // the first rank at fault has no CUDA at all
  if (!without.empty()) {
    const RankGpu& first = ranks[static_cast<size_t>(without.front())];
    why = first.problem + more_ranks(without.size() - 1);
    no_cuda = !first.cuda_usable;
  } else {
    // One GPU, several ranks: the same bus id on one node.
    std::map<std::pair<std::string, std::string>, std::vector<int>> by_gpu;
    for (size_t r = 0; r < ranks.size(); ++r) {
      const RankGpu& g = ranks[r];
      if (!g.bus_id.empty()) by_gpu[{g.node, g.bus_id}].push_back(static_cast<int>(r));
    }
    for (const auto& [gpu, on_it] : by_gpu) {
      if (on_it.size() < 2) continue;
      if (!allow_share) {
        const std::string& host = ranks[static_cast<size_t>(on_it.front())].host;
        why = rank_list(on_it) + " on " + host + " take the same GPU " + gpu.second +
              " (give each rank its own: jobs/gpu_affinity.sh, srun --gpus-per-task=1; or set "
              "gpu_share = true)";
        break;
      }
      for (int r : on_it) plan.shared = plan.shared || r == rank;
      plan.job_shares = true;
    }
    if (why.empty()) {
      for (const RankGpu& r : ranks) plan.job_shares = plan.job_shares || r.shared;
      plan.shared = plan.shared || ranks[static_cast<size_t>(rank)].shared;
    }
  }
  if (why.empty()) {
    plan.gpu = true;
    plan.device = ranks[static_cast<size_t>(rank)].device;
    return plan;
  }
  plan.shared = plan.job_shares = false;
  if (gpu_required) {
    plan.error = "config key device is \"cuda\": " + why +
                 (no_cuda ? "; use device = \"cpu\" (or \"auto\")" : "");
  } else if (any_cuda) {
    plan.note = "device auto runs on the CPU on every rank: " + why;
  }
  return plan;
}

GradientEngineChoice choose_gradient_engine(const std::string& engine, const DevicePlan& plan,
                                            int world_size, const std::string& compression) {
  GradientEngineChoice c;
  if (world_size == 1 || engine == "mpi") return c;
  std::string why;
  if (!plan.gpu) {
    why = "the job runs on the CPU";
  } else if (plan.job_shares) {
    why = "ranks share a GPU (gpu_share), and NCCL takes one rank per GPU";
  } else if (compression != "none") {
    why = "compression = \"" + compression + "\" converts and reduces on the host";
  }
  if (why.empty()) {
    c.nccl = true;
  } else if (engine == "nccl") {
    c.error =
        "config key gradient_engine = \"nccl\" needs every rank on a GPU of its own and "
        "compression = \"none\", but " +
        why + " (use gradient_engine = \"auto\" or \"mpi\")";
  }
  return c;
}

int default_threads(CpuCount mask, int online, int local_size) {
  const int cores = std::max(1, std::min(mask.cores, mask.cpus));
  if (std::max(1, mask.cpus) < online) return cores;
  return std::max(1, cores / std::max(1, local_size));
}

std::string threads_reason(CpuCount mask, int online, int local_size) {
  std::ostringstream out;
  const bool smt = mask.cores > 0 && mask.cores < mask.cpus;
  if (std::max(1, mask.cpus) < online) {
    out << mask.cpus << " CPU" << (mask.cpus == 1 ? "" : "s");
    if (smt) out << " (" << mask.cores << " cores)";
    out << " in affinity mask";
  } else {
    out << mask.cpus << " of " << online << " CPUs";
    if (smt) out << " (" << mask.cores << " cores)";
    out << " / " << local_size << " rank" << (local_size == 1 ? "" : "s") << " per node";
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

int core_of_cpu(int cpu, const std::string& sysfs) {
  std::ifstream in(sysfs + "/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  int first = -1;
  if (!(in >> first) || first < 0) return -1;
  return first;
}

CpuCount affinity_count() {
  const std::vector<int> cpus = affinity_cpus();
  return {static_cast<int>(cpus.size()),
          distinct_cores(cpus, [](int cpu) { return core_of_cpu(cpu); })};
}

std::string node_key(const std::string& host) {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  return host + "/" + boot;
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
