#include "data/dataset.h"

#include <utility>

#include <cstring>

#include "common/error.h"
#include "nn/counter_rng.h"

namespace lockstep::data {

void Dataset::validate() const {
  if (channels <= 0 || height <= 0 || width <= 0) {
    fail_input(source, ": invalid image dimensions ", channels, "x", height, "x", width);
  }
  if (static_cast<int64_t>(images.size()) != size() * image_bytes()) {
    fail_input(source, ": ", images.size(), " pixel bytes for ", size(), " images of ",
               image_bytes(), " bytes");
  }
  if (num_classes <= 0 || static_cast<int64_t>(class_names.size()) != num_classes) {
    fail_input(source, ": ", class_names.size(), " class names for ", num_classes, " classes");
  }
  for (int64_t i = 0; i < size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      fail_input(source, ": label ", labels[i], " of sample ", i, " is outside [0, ", num_classes,
                 ")");
    }
  }
}

Dataset Dataset::head(int64_t n) const& {
  return Dataset(*this).head(n);
}

Dataset Dataset::head(int64_t n) && {
  if (n > 0 && n < size()) {
    labels.resize(static_cast<size_t>(n));
    images.resize(static_cast<size_t>(n * image_bytes()));
    labels.shrink_to_fit();
    images.shrink_to_fit();
  }
  return std::move(*this);
}

Dataset Dataset::select(const std::vector<int64_t>& ids) const {
  Dataset out;
  out.name = name;
  out.source = source;
  out.channels = channels;
  out.height = height;
  out.width = width;
  out.num_classes = num_classes;
  out.class_names = class_names;
  const auto bytes = static_cast<size_t>(image_bytes());
  out.images.resize(ids.size() * bytes);
  out.labels.reserve(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    LOCKSTEP_CHECK(ids[k] >= 0 && ids[k] < size(), "sample ", ids[k], " of ", size());
    std::memcpy(out.images.data() + k * bytes, image(ids[k]), bytes);
    out.labels.push_back(labels[static_cast<size_t>(ids[k])]);
  }
  return out;
}

namespace {

// Hashes bytes 8 at a time, in order, with the counter RNG's mixer.
uint64_t hash_bytes(uint64_t h, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, p + i, 8);
    h = nn::mix64(h ^ word) + i;
  }
  uint64_t tail = n;
  for (; i < n; ++i) tail = (tail << 8) | p[i];
  return nn::hash_combine(h, tail);
}

}  // namespace

uint64_t Dataset::fingerprint() const {
  uint64_t h = 0x6c6f636b73746570ULL;  // "lockstep"
  for (int64_t v : {channels, height, width, num_classes, size()}) {
    h = nn::hash_combine(h, static_cast<uint64_t>(v));
  }
  h = hash_bytes(h, reinterpret_cast<const uint8_t*>(labels.data()),
                 labels.size() * sizeof(int32_t));
  return hash_bytes(h, images.data(), images.size());
}

}  // namespace lockstep::data
