// Two libraries for tests/test_cuda_libraries.cpp: a "wheel" library in a
// folder of a fake site-packages/nvidia/<name>/lib, and a user of it linked
// without a RUNPATH, so that only app/platform/cuda_libraries.h's fallback finds it.
extern "C" {
#ifdef FAKE_WHEEL_DEPENDENCY
__attribute__((visibility("default"))) int lockstep_fake_wheel_value() {
  return 42;
}
#else
int lockstep_fake_wheel_value();
__attribute__((visibility("default"))) int lockstep_fake_wheel_user() {
  return lockstep_fake_wheel_value() + 1;
}
#endif
}
