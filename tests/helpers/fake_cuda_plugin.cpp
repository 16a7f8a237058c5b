// Stand-ins for liblockstep_cuda.so (tests/test_cuda_plugin.cpp):
// FAKE_PLUGIN_ABI is the ABI version it claims (the previous one: refused); FAKE_PLUGIN_NO_ENTRY
// builds one without the entry point; FAKE_PLUGIN_SHORT_TABLE one whose table is a pointer shorter
// than the loader's (a plugin built against an older header); FAKE_PLUGIN_VERSION one from another
// lockstep release. A plugin of the right ABI sees FAKE_PLUGIN_DEVICES devices (default none),
// tells their bus ids, and cannot make a backend.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "distributed/cuda/cuda_plugin_abi.h"

#ifndef FAKE_PLUGIN_NO_ENTRY
namespace {

void versions(LockstepCudaVersions* out) {
  *out = LockstepCudaVersions{13000, 0, 0, 0, 0};
}

#ifndef FAKE_PLUGIN_DEVICES
#define FAKE_PLUGIN_DEVICES 0
#endif

int device_count(char* why, size_t size) {
  std::strncpy(why, "fake plugin: no device", size - 1);
  return FAKE_PLUGIN_DEVICES;
}

// Device d's bus id: $LOCKSTEP_FAKE_BUS_ID when set (the same for every
// device: one physical GPU), else 0000:4d:00.0.
int device_pci_bus_id(int device, char* out, size_t size) {
  const char* env = std::getenv("LOCKSTEP_FAKE_BUS_ID");
  std::snprintf(out, size, "%s",
                env != nullptr ? env : ("0000:4" + std::to_string(device) + ":00.0").c_str());
  return 1;
}

#ifdef FAKE_PLUGIN_SHORT_TABLE
constexpr uint32_t kTableSize = sizeof(LockstepCudaPlugin) - sizeof(void*);
#else
constexpr uint32_t kTableSize = sizeof(LockstepCudaPlugin);
#endif
#ifdef FAKE_PLUGIN_VERSION
constexpr const char* kVersion = FAKE_PLUGIN_VERSION;
#else
constexpr const char* kVersion = LOCKSTEP_VERSION;
#endif

}  // namespace

extern "C" __attribute__((visibility("default"))) const LockstepCudaPlugin* lockstep_cuda_plugin() {
  static const LockstepCudaPlugin plugin = {
      FAKE_PLUGIN_ABI, kTableSize,        kVersion, 13000,   versions, device_count,
      nullptr,         device_pci_bus_id, nullptr,  nullptr, nullptr,  nullptr};
  return &plugin;
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_lockstep_plugin() {
  return 0;
}
#endif
