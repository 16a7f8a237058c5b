// Stand-ins for liblockstep_cuda.so that the loader must refuse
// (tests/test_cuda_plugin.cpp): FAKE_PLUGIN_ABI is the ABI version it
// claims; FAKE_PLUGIN_NO_ENTRY builds one without the entry point.
#include "distributed/cuda/cuda_plugin_abi.h"

#ifndef FAKE_PLUGIN_NO_ENTRY
extern "C" __attribute__((visibility("default"))) const LockstepCudaPlugin* lockstep_cuda_plugin() {
  static const LockstepCudaPlugin plugin = {FAKE_PLUGIN_ABI, sizeof(LockstepCudaPlugin),
                                            LOCKSTEP_VERSION, 13000};
  return &plugin;
}
#else
extern "C" __attribute__((visibility("default"))) int not_a_lockstep_plugin() {
  return 0;
}
#endif
