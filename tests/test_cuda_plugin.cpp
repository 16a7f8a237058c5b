// app/platform/cuda_plugin_loader.h: the binary links no CUDA library, finds its plugin, and
// refuses a missing or foreign one with one line; a GPU run that cannot start
// says why. The plugin's versions are read without a GPU.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "app/platform/cuda_plugin_loader.h"
#include "support/dataset_files.h"
#include "support/gpu_skip.h"
#include "support/run_command.h"
#include "support/run_files.h"

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
  // 3: devices' PCI bus ids (ABI 2: precision as an integer; 1: as text).
  EXPECT_EQ(LOCKSTEP_CUDA_PLUGIN_ABI, 3);
  EXPECT_TRUE(contains(load.error, "has plugin ABI 1, this lockstep needs 3")) << load.error;
}

// The right ABI number with a table of another size (a plugin built from
// an older header), and a plugin from another lockstep release.
TEST(CudaPlugin, TableOfAnotherSizeIsRefused) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_FAKE_PLUGIN_SHORT);
  EXPECT_EQ(load.plugin, nullptr);
  const std::string want =
      "has a function table of " + std::to_string(sizeof(LockstepCudaPlugin) - sizeof(void*)) +
      " bytes, this lockstep's has " + std::to_string(sizeof(LockstepCudaPlugin));
  EXPECT_TRUE(contains(load.error, want)) << load.error;
}

TEST(CudaPlugin, PluginOfAnotherReleaseIsRefused) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_FAKE_PLUGIN_RELEASE);
  EXPECT_EQ(load.plugin, nullptr);
  EXPECT_TRUE(contains(load.error,
                       "is from lockstep 0.0.1-other, this is lockstep " LOCKSTEP_VERSION
                       "; install the matching plugin"))
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
  EXPECT_TRUE(contains(r.output, "plugin ABI 1,")) << r.output;
}

TEST(CudaPlugin, GpuRunThatCannotStartSaysWhyInOneLine) {
  // Here: no driver (a GPU machine has one; then the missing plugin speaks).
  const bool driver = probe_cuda_driver().version > 0;
  const auto r = run_command("LOCKSTEP_CUDA_PLUGIN=/nonexistent/plugin.so " LOCKSTEP_BINARY
                             " train --device cuda --epochs 1 --train-subset 64 --run-dir ''");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string why = driver ? "no CUDA plugin" : "no CUDA driver on this node";
  EXPECT_TRUE(contains(r.output, "config key device is \"cuda\": rank 0 on ")) << r.output;
  EXPECT_TRUE(contains(r.output, why)) << r.output;
  EXPECT_TRUE(contains(r.output, "; use device = \"cpu\" (or \"auto\")")) << r.output;
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

// How many times part occurs in text.
size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// device = auto with a working plugin that sees no device: the run trains
// on the CPU (no error about the missing device).
TEST(CudaPlugin, AutoFallsBackToTheCpuWhenNoDeviceIsVisible) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto r =
      run_command("LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW
                  " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_NODEVICE " " LOCKSTEP_BINARY " " +
                  testing::fashion_mnist_train_args(dir.path(), 1, 64, 64, 1) + " --device auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, " on cpu (1 thread, ")) << r.output;
  EXPECT_FALSE(contains(r.output, "no CUDA device")) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("COMPLETE"))) << r.output;
}

// device = auto with more ranks on the node (3) than GPUs (2): the whole
// job trains on the CPU, and rank 0 says so once, with the reason.
TEST(CudaPlugin, AutoWithMoreRanksThanGpusRunsTheNodeOnTheCpuWithANote) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto r = run_command(
      "LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_TWO
      " timeout -k 5 120 " LOCKSTEP_MPIEXEC " -n 3 " LOCKSTEP_BINARY " " +
      testing::fashion_mnist_train_args(dir.path(), 1, 96, 96, 1) + " --device auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(
      r.output, "lockstep: rank 0: note: device auto runs on the CPU on every rank: 3 ranks on "))
      << r.output;
  EXPECT_TRUE(contains(r.output, " but only 2 GPUs are visible to each")) << r.output;
  EXPECT_EQ(count_of(r.output, "note: device auto runs on the CPU"), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, " on cpu (1 thread, ")) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("COMPLETE"))) << r.output;
}

// gradient_engine = nccl where device = auto landed on the CPU: refused on
// every rank (NCCL's start-up is collective), naming the key.
TEST(CudaPlugin, NcclEngineIsRefusedWhenAutoLandsOnTheCpu) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto r = run_command("LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW
                             " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_NODEVICE
                             " timeout -k 5 120 " LOCKSTEP_MPIEXEC " -n 2 " LOCKSTEP_BINARY " " +
                             testing::fashion_mnist_train_args(dir.path(), 1, 64, 64, 1) +
                             " --device auto --gradient-engine nccl");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "hung:\n" << r.output;
  EXPECT_TRUE(contains(r.output,
                       "config key gradient_engine = \"nccl\" needs every rank on a GPU of its "
                       "own and compression = \"none\", but the job runs on the CPU"))
      << r.output;
  // No rank has a device at all (each record says so through the gather):
  // auto says nothing about falling back.
  EXPECT_FALSE(contains(r.output, "note: device auto")) << r.output;
}

// mpiexec -n 2 on a node whose one GPU both ranks see as device 0 (the
// fake plugin gives it one bus id): NCCL would refuse "Duplicate GPU" at
// start-up, so device = cuda is refused before, naming the ranks, the host
// and the bus id, and auto trains on the CPU with a note.
std::string two_ranks_on_one_gpu(const std::string& device) {
  return "LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW
         " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_ONE
         " LOCKSTEP_FAKE_BUS_ID=0000:41:00.0 timeout -k 5 120 " LOCKSTEP_MPIEXEC
         " -n 2 " LOCKSTEP_BINARY " " +
         device;
}

TEST(CudaPlugin, TwoRanksOnOneGpuAreRefusedBeforeNcclStarts) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto r = run_command(two_ranks_on_one_gpu(
      testing::fashion_mnist_train_args(dir.path(), 1, 64, 64, 1) + " --device cuda"));
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "hung:\n" << r.output;
  EXPECT_TRUE(contains(r.output, "config key device is \"cuda\": ranks 0, 1 on ")) << r.output;
  EXPECT_TRUE(contains(r.output, " take the same GPU 0000:41:00.0 (")) << r.output;
  EXPECT_TRUE(contains(r.output, "or set gpu_share = true)")) << r.output;
  EXPECT_EQ(count_of(r.output, "take the same GPU"), 1u) << r.output;  // rank 0 reports it
}

TEST(CudaPlugin, AutoWithTwoRanksOnOneGpuTrainsOnTheCpu) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto r = run_command(two_ranks_on_one_gpu(
      testing::fashion_mnist_train_args(dir.path(), 1, 64, 64, 1) + " --device auto"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "lockstep: rank 0: note: device auto runs on the CPU on every rank: "
                       "ranks 0, 1 on "))
      << r.output;
  EXPECT_EQ(count_of(r.output, "take the same GPU 0000:41:00.0"), 1u) << r.output;
  EXPECT_TRUE(contains(r.output, " on cpu (1 thread, ")) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir.file("COMPLETE"))) << r.output;
}

// lockstep doctor tells GPUs apart by bus id: two ranks that each call their
// GPU 0 (srun --gpus-per-task=1 with device cgroups) are on different GPUs
// when the bus ids differ, on one when they are equal.
TEST(CudaPlugin, DoctorComparesGpusByBusId) {
  REQUIRE_FASHION_MNIST();
  testing::ScratchDir dir;
  const auto doctor = [&](const std::string& bus0, const std::string& bus1) {
    const std::string rank = " " LOCKSTEP_BINARY " doctor --device cuda --run-dir " + dir.path();
    return run_command("LD_LIBRARY_PATH=" LOCKSTEP_FAKE_DRIVER_NEW
                       " LOCKSTEP_CUDA_PLUGIN=" LOCKSTEP_FAKE_PLUGIN_ONE
                       " timeout -k 5 120 " LOCKSTEP_MPIEXEC " -n 1 env LOCKSTEP_FAKE_BUS_ID=" +
                       bus0 + rank + " : -n 1 env LOCKSTEP_FAKE_BUS_ID=" + bus1 + rank);
  };
  auto r = doctor("0000:41:00.0", "0000:42:00.0");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "no problems found")) << r.output;
  r = doctor("0000:41:00.0", "0000:41:00.0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "take the same GPU 0000:41:00.0")) << r.output;
}

#if LOCKSTEP_HAVE_PLUGIN
TEST(CudaPlugin, RealPluginLoadsAndReportsVersionsWithoutAGpu) {
  const auto load = load_cuda_plugin_from(LOCKSTEP_BUILD_DIR "/liblockstep_cuda.so");
  ASSERT_NE(load.plugin, nullptr) << load.error;
  EXPECT_EQ(load.plugin->abi_version, 3u) << "devices' bus ids cross the ABI since ABI 3";
  // Device 0's bus id where there is a device (as nvidia-smi writes it,
  // "00000000:41:00.0" or "0000:41:00.0"); without one the runtime cannot say.
  char why[256] = {};
  const bool device = load.plugin->device_count(why, sizeof(why)) > 0;
  char bus_id[64] = "unchanged";
  EXPECT_EQ(load.plugin->device_pci_bus_id(0, bus_id, sizeof(bus_id)), device ? 1 : 0);
  if (device) {
    EXPECT_TRUE(std::regex_match(
        bus_id, std::regex("[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]")))
        << bus_id;
  }
  LockstepCudaVersions v{};
  load.plugin->versions(&v);
  EXPECT_GT(v.runtime, 0);
  EXPECT_GT(v.cudnn, 0);
  EXPECT_GT(v.cublas, 0);
  EXPECT_GT(v.nccl, 0);
  const auto r = run_lockstep("info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "plugin " LOCKSTEP_BUILD_DIR "/liblockstep_cuda.so (ABI " +
                                     std::to_string(LOCKSTEP_CUDA_PLUGIN_ABI) + ")"))
      << r.output;
  for (const char* part : {"runtime ", "cuDNN ", "cuBLAS ", "NCCL "}) {
    EXPECT_TRUE(contains(r.output, part)) << part << " missing:\n" << r.output;
  }
}
#else
TEST(CudaPlugin, RealPluginLoadsAndReportsVersionsWithoutAGpu) {
  LOCKSTEP_SKIP_NOT_BUILT("no CUDA plugin (LOCKSTEP_CUDA=OFF or the toolkit is missing)");
}
#endif

}  // namespace
}  // namespace lockstep::app
