// app/platform/cuda_libraries.h: the CUDA libraries the loader cannot find in the
// system's places are taken from the pip wheels' folders
// (site-packages/nvidia/*/lib), and `lockstep info` can name the file loaded.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "app/platform/cuda_libraries.h"
#include "app/platform/cuda_plugin_loader.h"
#include "support/scoped_env.h"

namespace lockstep::app {
namespace {
namespace fs = std::filesystem;

TEST(CudaLibraries, MissingLibraryIsReadFromTheLoadersMessage) {
  EXPECT_EQ(missing_library("libcudnn.so.9: cannot open shared object file: No such file or "
                            "directory"),
            "libcudnn.so.9");
  EXPECT_EQ(missing_library("/opt/b/liblockstep_cuda.so: libnccl.so.2: cannot open shared object "
                            "file: No such file or directory"),
            "libnccl.so.2");
  // The file itself missing, or another failure: nothing to look for.
  EXPECT_EQ(missing_library("/opt/b/liblockstep_cuda.so: cannot open shared object file: No "
                            "such file or directory"),
            "");
  EXPECT_EQ(missing_library("/opt/b/liblockstep_cuda.so: undefined symbol: cudnnCreate"), "");
}

TEST(CudaLibraries, WheelFoldersAreFoundPerPrefixInOrder) {
  const fs::path root = fs::path(::testing::TempDir()) / "cuda_libraries_wheels";
  fs::remove_all(root);
  const auto make = [&](const std::string& rel) { fs::create_directories(root / rel); };
  make("a/lib/python3.12/site-packages/nvidia/nccl/lib");
  make("a/lib/python3.12/site-packages/nvidia/cudnn/lib");
  make("a/lib/python3.12/site-packages/nvidia/cudnn_noop");  // no lib/
  make("a/lib/perl5/site-packages/nvidia/cublas/lib");       // not Python
  make("b/lib/python3.11/dist-packages/nvidia/cublas/lib");
  const std::vector<std::string> dirs =
      wheel_library_dirs({(root / "b").string(), (root / "none").string(), (root / "a").string()});
  const std::string a = (root / "a/lib/python3.12/site-packages/nvidia/").string();
  const std::vector<std::string> expected = {
      (root / "b/lib/python3.11/dist-packages/nvidia/cublas/lib").string(), a + "cudnn/lib",
      a + "nccl/lib"};
  EXPECT_EQ(dirs, expected);

  std::ofstream(root / "a/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9") << "x";
  EXPECT_EQ(find_library_in("libcudnn.so.9", dirs), a + "cudnn/lib/libcudnn.so.9");
  EXPECT_EQ(find_library_in("libnccl.so.2", dirs), "");
  fs::remove_all(root);
}

TEST(CudaLibraries, PythonPrefixesStartWithTheActiveEnvironmentAndIncludeTheSystemOnes) {
  const auto prefixes = [] {
    testing::ScopedEnv env("VIRTUAL_ENV", "/opt/venvs/train");
    return python_prefixes();
  }();
  ASSERT_FALSE(prefixes.empty());
  EXPECT_EQ(prefixes.front(), "/opt/venvs/train");
  for (const char* system : {"/usr/local", "/usr"}) {
    EXPECT_EQ(std::count(prefixes.begin(), prefixes.end(), system), 1) << system;
  }
}

// A library whose dependency lies only in a (fake) wheel folder: the loader
// alone fails naming it; with the wheel folders the dependency is loaded
// first, from there, and the open succeeds.
TEST(CudaLibraries, ADependencyOnlyInAWheelIsLoadedFromThere) {
  std::string error;
  EXPECT_EQ(open_with_fallback(LOCKSTEP_FAKE_WHEEL_USER, {}, false, error), nullptr);
  EXPECT_EQ(missing_library(error), "liblockstep_fake_wheel_dep.so") << error;
  EXPECT_EQ(loaded_library_path("liblockstep_fake_wheel_dep.so"), "");

  const auto dirs = wheel_library_dirs({LOCKSTEP_FAKE_WHEEL_PREFIX});
  ASSERT_EQ(dirs, std::vector<std::string>{LOCKSTEP_FAKE_WHEEL_DEP_DIR});
  void* handle = open_with_fallback(LOCKSTEP_FAKE_WHEEL_USER, dirs, false, error);
  ASSERT_NE(handle, nullptr) << error;
  EXPECT_EQ(loaded_library_path("liblockstep_fake_wheel_dep.so"),
            std::string(LOCKSTEP_FAKE_WHEEL_DEP_DIR) + "/liblockstep_fake_wheel_dep.so");
}

TEST(CudaLibraries, LoadedLibraryPathNamesTheMappedFile) {
  const std::string libc = loaded_library_path("libc.so");
  EXPECT_TRUE(libc.find("/libc.so.6") != std::string::npos) << libc;
  EXPECT_EQ(loaded_library_path("libno_such_library.so"), "");
}

TEST(CudaLibraries, VersionsAreDecodedAsEachLibraryEncodesThem) {
  EXPECT_EQ(library_version_string(91900, 10000), "9.19.0");   // cuDNN
  EXPECT_EQ(library_version_string(22803, 10000), "2.28.3");   // NCCL
  EXPECT_EQ(library_version_string(130100, 10000), "13.1.0");  // cuBLAS
  EXPECT_EQ(library_version_string(90105, 10000), "9.1.5");
  EXPECT_EQ(library_version_string(0, 10000), "none");
  EXPECT_EQ(library_version_string(-1, 10000), "none");
  EXPECT_EQ(cuda_version_string(13000), "13.0");  // runtime and driver
  EXPECT_EQ(cuda_version_string(12080), "12.8");
  EXPECT_EQ(cuda_version_string(0), "none");
}

}  // namespace
}  // namespace lockstep::app
