#include "app/commands/doctor.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/platform/cuda_plugin_loader.h"
#include "app/platform/placement.h"
#include "app/run/train_settings.h"
#include "data/catalog.h"

extern char** environ;

namespace lockstep::app {
namespace fs = std::filesystem;
namespace {

std::string mpi_library() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(text, &length);
  std::string s(text, static_cast<size_t>(length));
  if (const auto eol = s.find_first_of("\n\r"); eol != std::string::npos) s.resize(eol);
  std::replace(s.begin(), s.end(), '\t', ' ');
  return s;
}

std::string nccl_environment() {
  std::string out;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "NCCL_", 5) != 0) continue;
    if (!out.empty()) out.push_back(' ');
    out.append(*e);
  }
  return out.empty() ? "-" : out;
}

// The data set's folder is readable and holds its first file.
bool data_reachable(const std::string& dataset, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec) || access(dir.c_str(), R_OK | X_OK) != 0) return false;
  // Unreadable subfolders are passed over; a huge shared tree is not walked
  // to its end (a data set's files lie near its top).
  constexpr int kMostEntries = 100'000;
  int seen = 0;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end && seen < kMostEntries; it.increment(ec), ++seen) {
    const std::string name = it->path().filename().string();
    if (dataset == "cifar10" && name == "data_batch_1.bin") return true;
    if ((dataset == "mnist" || dataset == "fashion-mnist") && name.rfind("train-images", 0) == 0)
      return true;
    if (dataset == "folder") return true;
  }
  return false;
}

// The run directory exists and is writable, or its nearest existing parent is.
bool run_dir_writable(const std::string& run_dir) {
  if (run_dir.empty()) return true;
  fs::path p = fs::absolute(run_dir);
  std::error_code ec;
  while (!fs::exists(p, ec) && p.has_parent_path() && p != p.parent_path()) p = p.parent_path();
  return fs::is_directory(p, ec) && access(p.c_str(), W_OK | X_OK) == 0;
}

void inspect_gpu(const TrainConfig& config, const distributed::Communicator& comm, DoctorRank& r) {
  if (config.device == "cpu") return;
  r.gpu_share = config.gpu_share;
  const CudaAvailability cuda = cuda_availability();
  const CudaPluginLoad& load = load_cuda_plugin();
  r.plugin = std::string(load.plugin ? "found" : load.path.empty() ? "missing" : "refused");
  r.plugin_detail = load.plugin ? load.path : load.error;
  const CudaVisibleDevices env = cuda_visible_devices();
  if (cuda.plugin != nullptr) {
    r.visible_gpus = cuda.devices;
    r.visible_source = std::string("driver");
  } else if (env.set) {
    r.visible_gpus = static_cast<int>(env.entries.size());
    r.visible_source = std::string("CUDA_VISIBLE_DEVICES");
  } else {
    r.visible_gpus = -1;
  }
  if (cuda.plugin == nullptr) {
    if (config.device == "auto") return;  // auto runs on the CPU
    r.device_problem = cuda.why;
  }
  if (r.visible_gpus < 0) return;
  const GpuChoice c = choose_gpu(comm.local_rank(), comm.local_size(), r.visible_gpus,
                                 config.gpu_share, comm.host_name());
  if (c.device < 0) {
    r.device_problem = c.error;
    return;
  }
  const size_t i = static_cast<size_t>(c.device);
  r.gpu = env.set && i < env.entries.size() ? env.entries[i] : std::to_string(c.device);
  if (c.shared) r.gpu.push_back('*');
  if (cuda.plugin != nullptr) r.gpu_bus_id = gpu_bus_id(*cuda.plugin, c.device);
}

nlohmann::json to_json(const DoctorRank& r) {
  return {{"rank", r.rank},
          {"local_rank", r.local_rank},
          {"local_size", r.local_size},
          {"host", r.host},
          {"node", r.node},
          {"cpus", r.cpus},
          {"online_cpus", r.online_cpus},
          {"threads", r.threads},
          {"cuda_visible", r.cuda_visible},
          {"visible_gpus", r.visible_gpus},
          {"visible_source", r.visible_source},
          {"gpu", r.gpu},
          {"gpu_bus_id", r.gpu_bus_id},
          {"gpu_share", r.gpu_share},
          {"device_problem", r.device_problem},
          {"plugin", r.plugin},
          {"plugin_detail", r.plugin_detail},
          {"mpi", r.mpi},
          {"nccl_env", r.nccl_env},
          {"data_dir", r.data_dir},
          {"data_ok", r.data_ok},
          {"run_dir", r.run_dir},
          {"run_dir_ok", r.run_dir_ok}};
}

DoctorRank from_json(const nlohmann::json& j) {
  DoctorRank r;
  j.at("rank").get_to(r.rank);
  j.at("local_rank").get_to(r.local_rank);
  j.at("local_size").get_to(r.local_size);
  j.at("host").get_to(r.host);
  j.at("node").get_to(r.node);
  j.at("cpus").get_to(r.cpus);
  j.at("online_cpus").get_to(r.online_cpus);
  j.at("threads").get_to(r.threads);
  j.at("cuda_visible").get_to(r.cuda_visible);
  j.at("visible_gpus").get_to(r.visible_gpus);
  j.at("visible_source").get_to(r.visible_source);
  j.at("gpu").get_to(r.gpu);
  j.at("device_problem").get_to(r.device_problem);
  j.at("plugin").get_to(r.plugin);
  j.at("plugin_detail").get_to(r.plugin_detail);
  j.at("gpu_bus_id").get_to(r.gpu_bus_id);
  j.at("gpu_share").get_to(r.gpu_share);
  j.at("mpi").get_to(r.mpi);
  j.at("nccl_env").get_to(r.nccl_env);
  j.at("data_dir").get_to(r.data_dir);
  j.at("data_ok").get_to(r.data_ok);
  j.at("run_dir").get_to(r.run_dir);
  j.at("run_dir_ok").get_to(r.run_dir_ok);
  return r;
}

// Every rank's report on every rank.
std::vector<DoctorRank> gather(const DoctorRank& mine, distributed::Communicator& comm) {
  std::vector<DoctorRank> ranks;
  for (const std::string& text : comm.allgather_string(to_json(mine).dump()))
    ranks.push_back(from_json(nlohmann::json::parse(text)));
  return ranks;
}

}  // namespace

DoctorRank inspect_rank(const TrainConfig& config, const distributed::Communicator& comm) {
  DoctorRank r;
  r.rank = comm.rank();
  r.local_rank = comm.local_rank();
  r.local_size = comm.local_size();
  r.host = comm.host_name();
  r.node = node_key(r.host);
  r.cpus = affinity_cpus();
  r.online_cpus = online_cpus();
  r.threads = compute_threads(config, comm);
  const CudaVisibleDevices env = cuda_visible_devices();
  if (env.set) {
    const char* raw = std::getenv("CUDA_VISIBLE_DEVICES");
    r.cuda_visible = std::string(raw[0] == '\0' ? "\"\"" : raw);
  }
  inspect_gpu(config, comm, r);
  r.mpi = mpi_library();
  r.nccl_env = nccl_environment();
  r.data_dir = data::data_folder(config.dataset, config.data_dir);
  r.data_ok = !r.data_dir.empty() && data_reachable(config.dataset, r.data_dir);
  r.run_dir = config.run_dir;
  r.run_dir_ok = run_dir_writable(config.run_dir);
  return r;
}

int run_doctor(const TrainConfig& config, distributed::Communicator& comm) {
  const std::vector<DoctorRank> ranks = gather(inspect_rank(config, comm), comm);
  const std::vector<std::string> problems = doctor_problems(ranks);
  if (comm.rank() == 0) {
    std::string out = doctor_table(ranks);
    if (problems.empty()) {
      out += "no problems found\n";
    } else {
      out +=
          std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s") + ":\n";
      for (const std::string& p : problems) out += "  - " + p + "\n";
    }
    std::fputs(out.c_str(), stdout);
    std::fflush(stdout);
  }
  return problems.empty() ? 0 : 1;
}

}  // namespace lockstep::app
