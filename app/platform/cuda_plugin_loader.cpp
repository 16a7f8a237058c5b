#include "app/platform/cuda_plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "app/platform/cuda_libraries.h"
#include "nn/device_memory.h"

#ifndef LOCKSTEP_PLUGIN_RELATIVE_DIR
#define LOCKSTEP_PLUGIN_RELATIVE_DIR "../lib"
#endif

namespace lockstep::app {
namespace fs = std::filesystem;
namespace {

std::string executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? e : "unknown dlopen error";
}

}  // namespace

std::string library_version_string(int version, int major_unit) {
  if (version <= 0 || major_unit < 100) return "none";
  const int minor_unit = major_unit / 100;
  return std::to_string(version / major_unit) + "." +
         std::to_string(version % major_unit / minor_unit) + "." +
         std::to_string(version % minor_unit);
}

std::vector<std::string> cuda_plugin_candidates() {
  std::vector<std::string> paths;
  if (const char* env = std::getenv("LOCKSTEP_CUDA_PLUGIN"); env != nullptr && *env != '\0') {
    paths.emplace_back(env);
    return paths;
  }
  const std::string dir = executable_dir();
  if (dir.empty()) return paths;
  paths.push_back(dir + "/" + kCudaPluginName);
  paths.push_back(
      (fs::path(dir) / LOCKSTEP_PLUGIN_RELATIVE_DIR / kCudaPluginName).lexically_normal().string());
  return paths;
}

CudaPluginLoad load_cuda_plugin_from(const std::string& path) {
  CudaPluginLoad load;
  load.path = path;
  // The CUDA libraries from the system's places, else from the pip wheels.
  std::string why;
  void* handle = open_with_fallback(path, wheel_library_dirs(python_prefixes()), false, why);
  if (handle == nullptr) {
    load.error = "the CUDA plugin " + path + " cannot be loaded: " + why +
                 " (install the CUDA runtime, cuBLAS, cuDNN and NCCL, or NVIDIA's pip wheels)";
    return load;
  }
  auto entry = reinterpret_cast<LockstepCudaPluginEntry>(dlsym(handle, LOCKSTEP_CUDA_PLUGIN_ENTRY));
  if (entry == nullptr) {
    load.error = "the CUDA plugin " + path + " has no entry point " LOCKSTEP_CUDA_PLUGIN_ENTRY;
    return load;
  }
  const LockstepCudaPlugin* plugin = entry();
  if (plugin == nullptr || plugin->abi_version != LOCKSTEP_CUDA_PLUGIN_ABI) {
    load.error = "the CUDA plugin " + path + " has plugin ABI " +
                 (plugin ? std::to_string(plugin->abi_version) : "?") + ", this lockstep needs " +
                 std::to_string(LOCKSTEP_CUDA_PLUGIN_ABI) +
                 "; install the plugin built with this lockstep";
    return load;
  }
  if (plugin->size != sizeof(LockstepCudaPlugin)) {
    load.error = "the CUDA plugin " + path + " has a function table of " +
                 std::to_string(plugin->size) + " bytes, this lockstep's has " +
                 std::to_string(sizeof(LockstepCudaPlugin)) +
                 " (built from another header); install the plugin built with this lockstep";
    return load;
  }
  if (plugin->lockstep_version == nullptr ||
      std::strcmp(plugin->lockstep_version, LOCKSTEP_VERSION) != 0) {
    load.error = "the CUDA plugin " + path + " is from lockstep " +
                 (plugin->lockstep_version ? plugin->lockstep_version : "?") +
                 ", this is lockstep " LOCKSTEP_VERSION "; install the matching plugin";
    return load;
  }
  load.plugin = plugin;
  return load;
}

const CudaPluginLoad& load_cuda_plugin() {
  static const CudaPluginLoad load = [] {
    const auto candidates = cuda_plugin_candidates();
    for (const std::string& path : candidates) {
      if (fs::exists(path)) return load_cuda_plugin_from(path);
    }
    CudaPluginLoad none;
    std::string searched;
    for (const std::string& path : candidates) searched += (searched.empty() ? "" : ", ") + path;
    none.error = "no CUDA plugin: " + std::string(kCudaPluginName) + " is not in " +
                 (searched.empty() ? "any searched place" : searched) +
                 " (this lockstep was built without CUDA, or the plugin was not installed)";
    return none;
  }();
  return load;
}

const CudaDriver& probe_cuda_driver() {
  static const CudaDriver driver = [] {
    CudaDriver d;
    void* handle = dlopen(kCudaDriverName, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      d.error = std::string("no CUDA driver on this node (") + kCudaDriverName +
                " cannot be loaded: " + dl_error() + ")";
      return d;
    }
    using GetVersion = int (*)(int*);
    auto get = reinterpret_cast<GetVersion>(dlsym(handle, "cuDriverGetVersion"));
    if (get == nullptr || get(&d.version) != 0 || d.version <= 0) {
      d.version = 0;
      d.error = std::string("the CUDA driver ") + kCudaDriverName + " does not report a version";
    }
    return d;
  }();
  return driver;
}

CudaAvailability cuda_availability() {
  CudaAvailability a;
  const CudaDriver& driver = probe_cuda_driver();
  if (driver.version == 0) {
    a.why = driver.error;
    return a;
  }
  const CudaPluginLoad& load = load_cuda_plugin();
  if (load.plugin == nullptr) {
    a.why = load.error;
    return a;
  }
  const int built = load.plugin->built_runtime_version;
  if (driver.version / 1000 < built / 1000) {
    a.why = "the CUDA driver is too old: it supports CUDA " + cuda_version_string(driver.version) +
            ", the plugin " + load.path + " needs CUDA " + cuda_version_string(built) +
            " (update the driver, or build lockstep against an older toolkit)";
    return a;
  }
  char why[256] = {};
  a.devices = load.plugin->device_count(why, sizeof(why));
  if (a.devices == 0) {
    a.why = std::string("no CUDA device is visible (") + why + "; check CUDA_VISIBLE_DEVICES)";
    return a;
  }
  nn::set_device_memory(static_cast<nn::DeviceMemory*>(load.plugin->device_memory));
  a.plugin = load.plugin;
  return a;
}

std::string gpu_bus_id(const LockstepCudaPlugin& plugin, int device) {
  char id[64] = {};
  return plugin.device_pci_bus_id(device, id, sizeof(id)) != 0 ? std::string(id) : std::string();
}

std::string cuda_version_string(int version) {
  if (version <= 0) return "none";
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

std::string cuda_plugin_info() {
  std::ostringstream out;
  const CudaPluginLoad& load = load_cuda_plugin();
  if (load.plugin == nullptr) {
    out << "  CUDA     : " << load.error << "\n";
    return out.str();
  }
  LockstepCudaVersions v{};
  load.plugin->versions(&v);
  const CudaDriver& driver = probe_cuda_driver();
  out << "  CUDA     : plugin " << load.path << " (ABI " << load.plugin->abi_version << ")\n"
      << "             runtime " << cuda_version_string(v.runtime) << ", driver "
      << (driver.version > 0 ? cuda_version_string(driver.version) : "none (" + driver.error + ")")
      << "\n             cuDNN " << library_version_string(v.cudnn, 10000) << ", cuBLAS "
      << library_version_string(v.cublas, 10000) << ", NCCL "
      << library_version_string(v.nccl, 10000) << "\n";
  for (const char* lib : {"libcudart.so", "libcublas.so", "libcudnn.so", "libnccl.so"}) {
    const std::string file = loaded_library_path(lib);
    out << "             " << lib << " from " << (file.empty() ? "(not loaded)" : file) << "\n";
  }
  if (driver.version > 0) {
    char why[256] = {};
    const int n = load.plugin->device_count(why, sizeof(why));
    if (n == 0) {
      out << "             no device visible (" << why << ")\n";
    } else {
      std::string devices(4096, '\0');
      load.plugin->describe_devices(devices.data(), devices.size());
      devices.resize(std::strlen(devices.c_str()));
      std::istringstream lines(devices);
      for (std::string line; std::getline(lines, line);) out << "             " << line << "\n";
    }
  }
  return out.str();
}

}  // namespace lockstep::app
