// app/platform/cuda_plugin_loader.h: the binary links no CUDA library, finds its plugin, and
// refuses a missing or foreign one with one line; a GPU run that cannot start
// says why. The plugin's versions are read without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "app/platform/cuda_plugin_loader.h"
#include "support/run_command.h"

namespace lockstep::app {
namespace {

using testing::contains;
using testing::run_command;
using testing::run_lockstep;

TEST(CudaPlugin, BinaryLinksNoCudaLibrary) {
  const auto r = run_command("ldd " LOCKSTEP_BINARY);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "libmpi")) << r.output;  // ldd did list the libraries
  for (const char* lib : {"libcuda", "libcudart", "libcublas", "libcudnn", "libnccl"}) {
    EXPECT_FALSE(contains(r.output, lib)) << lib << " is linked:\n" << r.output;
  }
}

TEST(CudaPlugin, MissingFileIsRefusedWithItsPath) {
  const auto load = load_cuda_plugin_from("/nonexistent/liblockstep_cuda.so");
  EXPECT_EQ(load.plugin, nullptr);
  EXPECT_TRUE(contains(load.error, "/nonexistent/liblockstep_cuda.so cannot be loaded"))
      << load.error;
}

TEST(CudaPlugin, WrongAbiIsRefused) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_FAKE_PLUGIN_ABI);
  EXPECT_EQ(load.plugin, nullptr);
  EXPECT_TRUE(contains(load.error, "has plugin ABI 999, this lockstep needs " +
                                       std::to_string(LOCKSTEP_CUDA_PLUGIN_ABI)))
      << load.error;
}

TEST(CudaPlugin, LibraryWithoutEntryPointIsRefused) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_FAKE_PLUGIN_NOENTRY);
  EXPECT_EQ(load.plugin, nullptr);
  EXPECT_TRUE(contains(load.error, "has no entry point lockstep_cuda_plugin")) << load.error;
}

TEST(CudaPlugin, InfoReportsAMissingOrForeignPlugin) {
  auto r = run_command("LOCKSTEP_CUDA_PLUGIN=/nonexistent/plugin.so " LOCKSTEP_BINARY " info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "no CUDA plugin: liblockstep_cuda.so is not in "
                       "/nonexistent/plugin.so"))
      << r.output;
  r = run_command("LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_ABI " " LOCKSTEP_BINARY " info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "plugin ABI 999")) << r.output;
}

TEST(CudaPlugin, GpuRunThatCannotStartSaysWhyInOneLine) {
  // Here: no driver (a GPU machine has one; then the missing plugin speaks).
  const bool driver = probe_cuda_driver().version > 0;
  const auto r = run_command("LOCKSTEP_CUDA_PLUGIN=/nonexistent/plugin.so " LOCKSTEP_BINARY
                             " train --device cuda --epochs 1 --train-subset 64 --run-dir ''");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string why = driver ? "no CUDA plugin" : "no CUDA driver on this node";
  EXPECT_TRUE(contains(r.output, "config key device is \"cuda\" but rank 0")) << r.output;
  EXPECT_TRUE(contains(r.output, why)) << r.output;
}

// A GPU run with stand-in drivers and a plugin of the right ABI that sees no
// device: the driver's version is checked against the plugin's runtime, then
// the devices.
std::string gpu_run_with(const std::string& driver_dir, const std::string& plugin) {
  return run_command("LD_LIBRARY_PATH=" + driver_dir + " LOCKSTEP_CUDA_PLUGIN=" + plugin + " " +
                     LOCKSTEP_BINARY
                     " train --device cuda --epochs 1 --train-subset 64 "
                     "--run-dir ''")
      .output;
}

TEST(CudaPlugin, DriverTooOldForThePluginIsNamed) {
  const std::string out = gpu_run_with(LOCKSTEP_FAKE_DRIVER_OLD, LOCKSTEP_FAKE_PLUGIN_NODEVICE);
  EXPECT_TRUE(contains(out, "the CUDA driver is too old: it supports CUDA 11.0, the plugin " +
                                std::string(LOCKSTEP_FAKE_PLUGIN_NODEVICE) + " needs CUDA 13.0"))
      << out;
}

TEST(CudaPlugin, NoVisibleDeviceIsNamed) {
  const std::string out = gpu_run_with(LOCKSTEP_FAKE_DRIVER_NEW, LOCKSTEP_FAKE_PLUGIN_NODEVICE);
  EXPECT_TRUE(contains(out, "no CUDA device is visible (fake plugin: no device;")) << out;
}

TEST(CudaPlugin, AutoFallsBackToTheCpuWhenNoDeviceIsVisible) {
  const auto r = run_command("LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW
                             " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_NODEVICE
                             " " LOCKSTEP_BINARY " doctor --device auto --run-dir ''");
  EXPECT_TRUE(contains(r.output, "found")) << r.output;  // the plugin column
  EXPECT_FALSE(contains(r.output, "no CUDA device")) << r.output;
}

#if LOCKSTEP_HAVE_PLUGIN
TEST(CudaPlugin, RealPluginLoadsAndReportsVersionsWithoutAGpu) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_BUILD_DIR "/liblockstep_cuda.so");
  ASSERT_NE(load.plugin, nullptr) << load.error;
  LockstepCudaVersions v{};
  load.plugin->versions(&v);
  EXPECT_GT(v.runtime, 0);
  EXPECT_GT(v.cudnn, 0);
  EXPECT_GT(v.cublas, 0);
  EXPECT_GT(v.nccl, 0);
  const auto r = run_lockstep("info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "plugin " LOCKSTEP_BUILD_DIR "/liblockstep_cuda.so (ABI 1)"))
      << r.output;
  for (const char* part : {"runtime ", "cuDNN ", "cuBLAS ", "NCCL "}) {
    EXPECT_TRUE(contains(r.output, part)) << part << " missing:\n" << r.output;
  }
}
#else
TEST(CudaPlugin, RealPluginLoadsAndReportsVersionsWithoutAGpu) {
  GTEST_SKIP() << "this build has no CUDA plugin (LOCKSTEP_CUDA=OFF or the toolkit is missing)";
}
#endif

}  // namespace
}  // namespace lockstep::app
