// Writers of small dataset files in the real formats (IDX raw or gzip,
// CIFAR-10 binary), synthetic images that a tiny model can learn, complete
// MNIST-style and CIFAR-10 folders, and a scratch folder that cleans up.
//
// Writers write exactly what they are given, even when it disagrees with the
// header (n versus the pixels passed), so tests can make bad files too.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "data/dataset.h"

namespace lockstep::testing {

// A fresh folder under the system temp dir, removed with its contents on
// destruction.
class ScratchDir {
 public:
  ScratchDir();
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes bytes to path, gzip-compressed when gzip is true.
void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip = false);

// A big-endian IDX header (magic, then each dim) followed by payload.
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& payload, bool gzip = false);
// magic 0x00000803, dims (n, h, w), then pixels.
void write_idx_images(const std::string& path, int64_t n, int64_t h, int64_t w,
                      const std::vector<uint8_t>& pixels, bool gzip = false);
// magic 0x00000801, dims (n = labels.size()), then labels.
void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels,
                      bool gzip = false);
// Records of 1 label byte + 3072 pixels; images is (n, 3, 32, 32) CHW.
void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels);

// n images of (c, h, w) with labels in [0, classes): each class has a bright
// block at its own place over low noise, so a small model can learn them.
// A pure function of its arguments.
struct SyntheticImages {
  int64_t n = 0, channels = 0, height = 0, width = 0;
  std::vector<uint8_t> images;  // (n, c, h, w)
  std::vector<uint8_t> labels;  // n
};
SyntheticImages synthetic_images(int64_t n, int64_t channels, int64_t height, int64_t width,
                                 int64_t classes = 10, uint64_t seed = 1);

// synthetic_images(n, c, h, w) as an in-memory data set named `name` (10
// classes named "0".."9", source "memory").
data::Dataset synthetic_dataset(int64_t n, int64_t c, int64_t h, int64_t w,
                                const std::string& name = "synthetic");

// dir gets train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] of 28x28
// synthetic images (seeds 1 and 2); returns what was written.
struct SplitImages {
  SyntheticImages train, test;
};
SplitImages write_mnist_dir(const std::string& dir, int64_t n_train, int64_t n_test,
                            bool gzip = true, int64_t height = 28, int64_t width = 28);

// dir gets data_batch_1..5.bin (n_per_batch records each, train holds them
// concatenated in order) and test_batch.bin (n_test records), 3x32x32.
SplitImages write_cifar10_dir(const std::string& dir, int64_t n_per_batch, int64_t n_test);

// Expects train and test to be "<family>/train" and "<family>/test" holding
// exactly the images and labels written.
void expect_splits(const data::Dataset& train, const data::Dataset& test,
                   const SplitImages& written, const std::string& family);

// Passes when fn throws lockstep::InputError whose message contains every
// one of substrings (and is one line); otherwise says what happened.
::testing::AssertionResult throws_input_error(const std::function<void()>& fn,
                                              const std::vector<std::string>& substrings);

// True when the real Fashion-MNIST (the Debian package dataset-fashion-mnist)
// is installed in LOCKSTEP_FASHION_MNIST_DIR.
bool have_fashion_mnist();

}  // namespace lockstep::testing

// Skips the test, saying how to install it, without the real Fashion-MNIST;
// fails instead when the environment variable CI is set (.ci/run sets it).
#define REQUIRE_FASHION_MNIST()                                                                \
  do {                                                                                         \
    if (::lockstep::testing::have_fashion_mnist()) break;                                      \
    const char* lockstep_why = "Fashion-MNIST is not installed in " LOCKSTEP_FASHION_MNIST_DIR \
                               " (scripts/setup.sh installs the Debian package "               \
                               "dataset-fashion-mnist)";                                       \
    if (std::getenv("CI") != nullptr) FAIL() << lockstep_why << " (CI must run these)";        \
    GTEST_SKIP() << lockstep_why;                                                              \
  } while (0)
