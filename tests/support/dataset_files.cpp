#include "support/dataset_files.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "common/error.h"
#include "nn/counter_rng.h"

namespace lockstep::testing {

ScratchDir::ScratchDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "lockstep-test-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + pattern);
  path_ = pattern;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gzip) {
  if (gzip) {
    gzFile f = gzopen(path.c_str(), "wb");
    if (f == nullptr) throw std::runtime_error("cannot write " + path);
    const int written =
        bytes.empty() ? 0 : gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    const int closed = gzclose(f);
    if (written != static_cast<int>(bytes.size()) || closed != Z_OK) {
      throw std::runtime_error("gzip write failed: " + path);
    }
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims,
               const std::vector<uint8_t>& payload, bool gzip) {
  std::vector<uint8_t> bytes;
  auto put32 = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<uint8_t>(v >> shift));
  };
  put32(magic);
  for (uint32_t d : dims) put32(d);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  write_bytes(path, bytes, gzip);
}

void write_idx_images(const std::string& path, int64_t n, int64_t h, int64_t w,
                      const std::vector<uint8_t>& pixels, bool gzip) {
  write_idx(path, 0x00000803,
            {static_cast<uint32_t>(n), static_cast<uint32_t>(h), static_cast<uint32_t>(w)}, pixels,
            gzip);
}

void write_idx_labels(const std::string& path, const std::vector<uint8_t>& labels, bool gzip) {
  write_idx(path, 0x00000801, {static_cast<uint32_t>(labels.size())}, labels, gzip);
}

void write_cifar10_batch(const std::string& path, const std::vector<uint8_t>& images,
                         const std::vector<uint8_t>& labels) {
  constexpr size_t kPixels = 3 * 32 * 32;
  std::vector<uint8_t> bytes;
  bytes.reserve(labels.size() * (kPixels + 1));
  for (size_t i = 0; i < labels.size(); ++i) {
    bytes.push_back(labels[i]);
    const size_t first = std::min(i * kPixels, images.size());
    const size_t last = std::min(first + kPixels, images.size());
    bytes.insert(bytes.end(), images.begin() + static_cast<std::ptrdiff_t>(first),
                 images.begin() + static_cast<std::ptrdiff_t>(last));
  }
  write_bytes(path, bytes);
}

data::Dataset synthetic_dataset(int64_t n, int64_t c, int64_t h, int64_t w,
                                const std::string& name) {
  const SyntheticImages s = synthetic_images(n, c, h, w);
  data::Dataset ds;
  ds.name = name;
  ds.source = "memory";
  ds.channels = c, ds.height = h, ds.width = w;
  ds.num_classes = 10;
  for (int k = 0; k < 10; ++k) ds.class_names.push_back(std::to_string(k));
  ds.images = s.images;
  ds.labels.assign(s.labels.begin(), s.labels.end());
  return ds;
}

SyntheticImages synthetic_images(int64_t n, int64_t channels, int64_t height, int64_t width,
                                 int64_t classes, uint64_t seed) {
  SyntheticImages out{n, channels, height, width, {}, {}};
  out.images.resize(static_cast<size_t>(n * channels * height * width));
  out.labels.resize(static_cast<size_t>(n));
  // Class k's block: a grid of 5 columns of cells over the image.
  const int64_t cell_h = std::max<int64_t>(height / 2, 1);
  const int64_t cell_w = std::max<int64_t>(width / 5, 1);
  size_t p = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t key = nn::hash_combine(seed, static_cast<uint64_t>(i));
    const auto label = static_cast<int64_t>(nn::mix64(key) % static_cast<uint64_t>(classes));
    out.labels[static_cast<size_t>(i)] = static_cast<uint8_t>(label);
    const int64_t top = (label / 5 % 2) * cell_h;
    const int64_t left = (label % 5) * cell_w;
    for (int64_t c = 0; c < channels; ++c) {
      for (int64_t y = 0; y < height; ++y) {
        for (int64_t x = 0; x < width; ++x, ++p) {
          const uint64_t noise = nn::mix64(nn::hash_combine(key, p)) % 48;
          const bool inside = y >= top && y < top + cell_h && x >= left && x < left + cell_w;
          out.images[p] = static_cast<uint8_t>(inside ? 200 + noise : noise);
        }
      }
    }
  }
  return out;
}

SplitImages write_mnist_dir(const std::string& dir, int64_t n_train, int64_t n_test, bool gzip,
                            int64_t height, int64_t width) {
  std::filesystem::create_directories(dir);
  SplitImages out{synthetic_images(n_train, 1, height, width, 10, 1),
                  synthetic_images(n_test, 1, height, width, 10, 2)};
  const std::string gz = gzip ? ".gz" : "";
  write_idx_images(dir + "/train-images-idx3-ubyte" + gz, n_train, height, width, out.train.images,
                   gzip);
  write_idx_labels(dir + "/train-labels-idx1-ubyte" + gz, out.train.labels, gzip);
  write_idx_images(dir + "/t10k-images-idx3-ubyte" + gz, n_test, height, width, out.test.images,
                   gzip);
  write_idx_labels(dir + "/t10k-labels-idx1-ubyte" + gz, out.test.labels, gzip);
  return out;
}

SplitImages write_cifar10_dir(const std::string& dir, int64_t n_per_batch, int64_t n_test) {
  std::filesystem::create_directories(dir);
  SplitImages out{synthetic_images(5 * n_per_batch, 3, 32, 32, 10, 3),
                  synthetic_images(n_test, 3, 32, 32, 10, 4)};
  constexpr size_t kPixels = 3 * 32 * 32;
  const auto per = static_cast<size_t>(n_per_batch);
  for (size_t b = 0; b < 5; ++b) {
    const auto images_first =
        out.train.images.begin() + static_cast<std::ptrdiff_t>(b * per * kPixels);
    const auto labels_first = out.train.labels.begin() + static_cast<std::ptrdiff_t>(b * per);
    write_cifar10_batch(dir + "/data_batch_" + std::to_string(b + 1) + ".bin",
                        {images_first, images_first + static_cast<std::ptrdiff_t>(per * kPixels)},
                        {labels_first, labels_first + static_cast<std::ptrdiff_t>(per)});
  }
  write_cifar10_batch(dir + "/test_batch.bin", out.test.images, out.test.labels);
  return out;
}

::testing::AssertionResult throws_input_error(const std::function<void()>& fn,
                                              const std::vector<std::string>& substrings) {
  try {
    fn();
  } catch (const InputError& e) {
    const std::string message = e.what();
    if (message.find('\n') != std::string::npos) {
      return ::testing::AssertionFailure() << "message is not one line: " << message;
    }
    for (const std::string& s : substrings) {
      if (message.find(s) == std::string::npos) {
        return ::testing::AssertionFailure() << "message lacks \"" << s << "\": " << message;
      }
    }
    return ::testing::AssertionSuccess() << message;
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

void expect_splits(const data::Dataset& train, const data::Dataset& test,
                   const SplitImages& written, const std::string& family) {
  EXPECT_EQ(train.name, family + "/train");
  EXPECT_EQ(test.name, family + "/test");
  EXPECT_EQ(train.size(), written.train.n);
  EXPECT_EQ(test.size(), written.test.n);
  EXPECT_EQ(train.images, written.train.images);
  EXPECT_EQ(test.images, written.test.images);
  const auto as_int = [](const std::vector<uint8_t>& v) {
    return std::vector<int32_t>(v.begin(), v.end());
  };
  EXPECT_EQ(train.labels, as_int(written.train.labels));
  EXPECT_EQ(test.labels, as_int(written.test.labels));
}

bool have_fashion_mnist() {
  return std::filesystem::exists(std::string(LOCKSTEP_FASHION_MNIST_DIR) +
                                 "/train-images-idx3-ubyte.gz");
}

}  // namespace lockstep::testing
