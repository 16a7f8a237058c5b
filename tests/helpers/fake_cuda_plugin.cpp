// Stand-ins for liblockstep_cuda.so (tests/test_cuda_plugin.cpp):
// FAKE_PLUGIN_ABI is the ABI version it claims (the previous one: refused); FAKE_PLUGIN_NO_ENTRY
// builds one without the entry point. A plugin of the right ABI sees no device.
#include <cstring>

#include "distributed/cuda/cuda_plugin_abi.h"

#ifndef FAKE_PLUGIN_NO_ENTRY
namespace {

void versions(LockstepCudaVersions* out) {
  *out = LockstepCudaVersions{13000, 0, 0, 0, 0};
}

int device_count(char* why, size_t size) {
  std::strncpy(why, "fake plugin: no device", size - 1);
  return 0;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const LockstepCudaPlugin* lockstep_cuda_plugin() {
  static const LockstepCudaPlugin plugin = {FAKE_PLUGIN_ABI,  sizeof(LockstepCudaPlugin),
                                            LOCKSTEP_VERSION, 13000,
                                            versions,         device_count,
                                            nullptr,          nullptr,
                                            nullptr,          nullptr,
                                            nullptr};
  return &plugin;
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_lockstep_plugin() {
  return 0;
}
#endif
