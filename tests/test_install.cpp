// `cmake --install` into a temporary prefix: the binary, the plugin (when
// built), the configs and job scripts land in the GNU directories, and the
// installed binary, run from outside the source tree with no
// LD_LIBRARY_PATH, finds its plugin and trains one short epoch.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_command;
using testing::ScratchDir;

TEST(Install, InstalledBinaryFindsItsFilesAndTrainsOutsideTheSourceTree) {
  ScratchDir prefix, work;
  auto r = run_command("\"" LOCKSTEP_CMAKE "\" --install " LOCKSTEP_BUILD_DIR " --prefix " +
                       prefix.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string bin = prefix.file("bin/lockstep");
  ASSERT_TRUE(fs::exists(bin)) << r.output;
  EXPECT_TRUE(fs::exists(prefix.file("share/lockstep/configs/fashion_mnist.toml")));
  const fs::path job = prefix.file("share/lockstep/jobs/polaris.pbs.sh");
  ASSERT_TRUE(fs::exists(job));
  EXPECT_NE(fs::status(job).permissions() & fs::perms::owner_exec, fs::perms::none);
  EXPECT_TRUE(fs::exists(prefix.file("share/lockstep/jobs/gpu_affinity.sh")));

  r = run_command("env -u LD_LIBRARY_PATH -u LOCKSTEP_CUDA_PLUGIN " + bin + " info");
  ASSERT_EQ(r.exit_code, 0) << r.output;
#if LOCKSTEP_HAVE_PLUGIN
  const std::string plugin = prefix.file(LOCKSTEP_INSTALL_LIBDIR "/liblockstep_cuda.so");
  EXPECT_TRUE(fs::exists(plugin));
  EXPECT_TRUE(contains(r.output, "plugin " + plugin + " (ABI")) << r.output;
#else
  EXPECT_TRUE(contains(r.output, "no CUDA plugin")) << r.output;
#endif

  // One short epoch on a small data set, from a folder outside the source tree.
  testing::write_mnist_dir(work.file("data"), 256, 128);
  r = run_command("cd " + work.path() + " && env -u LD_LIBRARY_PATH " + bin + " train --config " +
                  prefix.file("share/lockstep/configs/fashion_mnist.toml") +
                  " --data-dir data --epochs 1 --train-subset 256 --test-subset 128 --run-dir run"
                  " --progress plain");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "epoch   1/1")) << r.output;
  EXPECT_TRUE(fs::exists(work.file("run/metrics.csv"))) << r.output;
}

}  // namespace
}  // namespace lockstep
