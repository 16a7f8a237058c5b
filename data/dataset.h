// Dataset: images and labels in memory, as uint8 pixels (N, C, H, W) and
// int32 labels. Normalisation to float happens per batch in the loader.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::data {

struct Dataset {
  std::string name;    // "fashion-mnist/train"
  std::string source;  // file or folder it was read from, for messages
  int64_t channels = 0, height = 0, width = 0;
  int64_t num_classes = 0;
  std::vector<std::string> class_names;  // num_classes entries
  std::vector<uint8_t> images;           // size() * channels * height * width
  std::vector<int32_t> labels;           // size() entries in [0, num_classes)

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  int64_t image_bytes() const { return channels * height * width; }
  const uint8_t* image(int64_t i) const { return images.data() + i * image_bytes(); }

  // Throws InputError naming `source` when sizes or labels are inconsistent.
  void validate() const;
  // The first n samples (or all when n <= 0 or n >= size()).
  Dataset head(int64_t n) const&;
  // The same, reusing this dataset's storage (no copy of the pixels).
  Dataset head(int64_t n) &&;
  // The samples ids (each in [0, size())), in that order, under the same
  // name, source and classes.
  Dataset select(const std::vector<int64_t>& ids) const;
  // A hash of shape, classes, labels and pixels (not of name or source), so
  // ranks can check at start-up that they read the same data.
  uint64_t fingerprint() const;
};

}  // namespace lockstep::data
