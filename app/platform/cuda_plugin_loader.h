// Finding and loading the CUDA plugin (liblockstep_cuda.so,
// distributed/cuda/cuda_plugin_abi.h) only when a run asks for a GPU, so a
// CPU run neither needs the CUDA libraries on the node nor maps them.
//
// Where the plugin is looked for, first found wins: $LOCKSTEP_CUDA_PLUGIN (a
// file), then beside the running executable (the build tree), then in the
// library directory relative to it (an installed tree: bin/../lib).
#pragma once

#include <string>
#include <vector>

#include "distributed/cuda/cuda_plugin_abi.h"

namespace lockstep::app {

inline constexpr const char* kCudaPluginName = "liblockstep_cuda.so";
inline constexpr const char* kCudaDriverName = "libcuda.so.1";

// The paths searched, in order (see above).
std::vector<std::string> cuda_plugin_candidates();

struct CudaPluginLoad {
  const LockstepCudaPlugin* plugin = nullptr;  // null: see error
  std::string path;   // the file loaded or refused ("" when none was found)
  std::string error;  // one line when plugin is null
};
// dlopens `path` and checks its entry point, ABI and lockstep version. A
// refused plugin stays mapped (dlclose is not safe for C++ libraries).
CudaPluginLoad load_cuda_plugin_from(const std::string& path);
// The first candidate that exists, loaded once per process.
const CudaPluginLoad& load_cuda_plugin();

// The CUDA driver (libcuda.so.1): its version (13000 = 13.0), 0 with error
// set when it cannot be loaded. Loaded once per process.
struct CudaDriver {
  int version = 0;
  std::string error;
};
const CudaDriver& probe_cuda_driver();

// Whether a GPU run can start: the plugin when the driver, the plugin, the
// driver's version and at least one visible device are all there; otherwise
// null and `why`, one line: no driver, no plugin, plugin refused, driver too
// old, no device. Registers the plugin's device memory (nn/device_memory.h)
// when it succeeds.
struct CudaAvailability {
  const LockstepCudaPlugin* plugin = nullptr;
  int devices = 0;
  std::string why;
};
CudaAvailability cuda_availability();

// Visible device `device`'s PCI bus id from the plugin ("0000:41:00.0"),
// "" when the runtime cannot say.
std::string gpu_bus_id(const LockstepCudaPlugin& plugin, int device);

// "13.0" for 13000; "none" for 0.
std::string cuda_version_string(int version);
// major.minor.patch of a library version encoded as major * major_unit +
// minor * (major_unit / 100) + patch: cuDNN 91900 and NCCL 22803 (unit
// 10000) are 9.19.0 and 2.28.3, cuBLAS 130100 is 13.1.0; "none" for 0.
std::string library_version_string(int version, int major_unit);
// The plugin part of `lockstep info`: path, versions, devices (lines with
// a leading "  ").
std::string cuda_plugin_info();

}  // namespace lockstep::app
