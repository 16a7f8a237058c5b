#include "data/dataset.h"

#include "nn/error.h"

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

Dataset Dataset::head(int64_t n) const {
  if (n <= 0 || n >= size()) return *this;
  Dataset out = *this;
  out.labels.resize(static_cast<size_t>(n));
  out.images.resize(static_cast<size_t>(n * image_bytes()));
  return out;
}

}  // namespace lockstep::data
