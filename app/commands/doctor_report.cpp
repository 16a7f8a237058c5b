// doctor_problems and doctor_table (app/commands/doctor.h): pure functions of the
// gathered reports.
#include <algorithm>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "app/commands/doctor.h"
#include "app/platform/placement.h"

namespace lockstep::app {
namespace {

std::vector<int> common_cpus(const DoctorRank& a, const DoctorRank& b) {
  std::vector<int> both;
  std::set_intersection(a.cpus.begin(), a.cpus.end(), b.cpus.begin(), b.cpus.end(),
                        std::back_inserter(both));
  return both;
}

bool pinned(const DoctorRank& r) {
  return static_cast<int>(r.cpus.size()) < r.online_cpus;
}

// Problems among the ranks of one host.
void host_problems(const std::string& host, const std::vector<const DoctorRank*>& ranks,
                   std::vector<std::string>& out) {
  // One GPU: the same PCI bus id where the plugin told it (each rank may
  // number its GPU 0), else the same CUDA_VISIBLE_DEVICES entry.
  std::map<std::string, std::vector<int>> by_gpu;
  int threads = 0;
  for (const DoctorRank* r : ranks) {
    if (r->gpu != "-" && r->gpu.back() != '*' && !r->gpu_share)
      by_gpu[r->gpu_bus_id.empty() ? r->gpu : r->gpu_bus_id].push_back(r->rank);
    threads += r->threads;
  }
  for (const auto& [gpu, on_it] : by_gpu) {
    if (on_it.size() > 1) {
      out.push_back(rank_list(on_it) + " on " + host + " take the same GPU " + gpu +
                    " (give each rank its own: jobs/gpu_affinity.sh, srun --gpus-per-task=1; "
                    "or set gpu_share = true)");
    }
  }
  for (size_t i = 0; i < ranks.size(); ++i) {
    for (size_t j = i + 1; j < ranks.size(); ++j) {
      if (!pinned(*ranks[i]) && !pinned(*ranks[j])) continue;
      const auto both = common_cpus(*ranks[i], *ranks[j]);
      if (both.empty()) continue;
      out.push_back(rank_list({ranks[i]->rank, ranks[j]->rank}) + " on " + host +
                    " are pinned to the same CPUs " + cpu_list_string(both) +
                    " (bind each rank to its own cores: mpiexec --cpu-bind depth --depth N, "
                    "srun -c N, aprun -d N)");
    }
  }
  const int online = ranks.front()->online_cpus;
  if (threads > online) {
    out.push_back(host + ": " + std::to_string(ranks.size()) + " rank" +
                  (ranks.size() == 1 ? "" : "s") + " start " + std::to_string(threads) +
                  " compute threads on " + std::to_string(online) + " CPUs");
  }
}

}  // namespace

std::vector<std::string> doctor_problems(const std::vector<DoctorRank>& ranks) {
  std::vector<std::string> out;
  std::map<std::string, std::vector<int>> device_problems, no_data, no_run_dir;
  // By node (host name and boot id): containers on two nodes may share a
  // host name; the messages name the host.
  std::map<std::string, std::vector<const DoctorRank*>> by_node;
  for (const DoctorRank& r : ranks) {
    by_node[r.node].push_back(&r);
    if (!r.device_problem.empty()) device_problems[r.device_problem].push_back(r.rank);
    if (!r.data_ok) no_data[r.host + ": the data set is not in " + r.data_dir].push_back(r.rank);
    if (!r.run_dir_ok) {
      no_run_dir[r.host + ": run_dir " + r.run_dir + " cannot be created or written"].push_back(
          r.rank);
    }
    if (r.threads > static_cast<int>(r.cpus.size())) {
      out.push_back("rank " + std::to_string(r.rank) + " on " + r.host + " starts " +
                    std::to_string(r.threads) + " threads but has " +
                    std::to_string(r.cpus.size()) + " CPU" + (r.cpus.size() == 1 ? "" : "s") +
                    " in its affinity mask (" + cpu_list_string(r.cpus) + ")");
    }
  }
  for (const auto& [node, on_node] : by_node) host_problems(on_node.front()->host, on_node, out);
  for (const auto& [why, who] : device_problems) out.push_back(rank_list(who) + ": " + why);
  for (const auto& [what, who] : no_data) out.push_back(what + " (" + rank_list(who) + ")");
  for (const auto& [what, who] : no_run_dir) out.push_back(what + " (" + rank_list(who) + ")");
  return out;
}

std::string doctor_table(const std::vector<DoctorRank>& ranks) {
  std::ostringstream out;
  const DoctorRank& first = ranks.front();
  std::set<std::string> hosts;
  for (const DoctorRank& r : ranks) hosts.insert(r.node);
  out << "lockstep doctor: " << ranks.size() << " rank" << (ranks.size() == 1 ? "" : "s") << " on "
      << hosts.size() << " node" << (hosts.size() == 1 ? "" : "s") << "; MPI: " << first.mpi
      << "\n";
  out << std::left << std::setw(5) << "rank" << std::setw(16) << "host" << std::setw(7) << "local"
      << std::setw(14) << "cpus" << std::setw(8) << "threads" << std::setw(22)
      << "CUDA_VISIBLE_DEVICES" << std::setw(6) << "gpus" << std::setw(5) << "gpu" << std::setw(11)
      << "plugin" << std::setw(6) << "data" << std::setw(8) << "run_dir"
      << "NCCL env\n";
  for (const DoctorRank& r : ranks) {
    const std::string cpus = cpu_list_string(r.cpus) + " (" + std::to_string(r.cpus.size()) + ")";
    const std::string gpus = r.visible_gpus < 0 ? "?" : std::to_string(r.visible_gpus);
    out << std::setw(5) << r.rank << std::setw(16) << r.host << std::setw(7)
        << (std::to_string(r.local_rank) + "/" + std::to_string(r.local_size)) << std::setw(14)
        << cpus << std::setw(8) << r.threads << std::setw(22) << r.cuda_visible << std::setw(6)
        << gpus << std::setw(5) << r.gpu << std::setw(11) << r.plugin << std::setw(6)
        << (r.data_ok ? "ok" : "NO") << std::setw(8) << (r.run_dir_ok ? "ok" : "NO") << r.nccl_env
        << "\n";
  }
  if (!first.plugin_detail.empty()) out << "plugin (rank 0): " << first.plugin_detail << "\n";
  return out.str();
}

}  // namespace lockstep::app
