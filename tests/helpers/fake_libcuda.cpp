// A stand-in CUDA driver (libcuda.so.1) that reports FAKE_DRIVER_VERSION
// (tests/test_cuda_plugin.cpp: a driver too old for the plugin, or new enough).
extern "C" __attribute__((visibility("default"))) int cuDriverGetVersion(int* version) {
  *version = FAKE_DRIVER_VERSION;
  return 0;
}
