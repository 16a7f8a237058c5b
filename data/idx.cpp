#include "data/idx.h"

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <utility>

#include "common/error.h"
#include "data/file_io.h"

namespace lockstep::data {
namespace {

uint32_t read_be32(const std::vector<uint8_t>& bytes, size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

std::string hex32(uint32_t v) {
  std::ostringstream out;
  out << "0x" << std::hex << std::setw(8) << std::setfill('0') << v;
  return out.str();
}

std::string magic_meaning(uint32_t magic) {
  if (magic == kIdxImagesMagic) return " (an IDX images file)";
  if (magic == kIdxLabelsMagic) return " (an IDX labels file)";
  if ((magic >> 16) == 0x1f8b) return " (gzip data inside gzip)";
  return " (not an IDX file)";
}

// Checks the header of an IDX file; returns the bytes. header_words counts
// the 32-bit words after the magic.
std::vector<uint8_t> read_idx_file(const std::string& path, uint32_t expected_magic,
                                   size_t header_words, const char* kind) {
  std::vector<uint8_t> bytes = read_whole_file(path);
  const size_t header_bytes = 4 * (1 + header_words);
  if (bytes.size() < 4) {
    fail_input(path, ": truncated: ", bytes.size(), " bytes, an IDX ", kind, " header needs ",
               header_bytes);
  }
  const uint32_t magic = read_be32(bytes, 0);
  if (magic != expected_magic) {
    const char* hint = (magic == kIdxImagesMagic || magic == kIdxLabelsMagic)
                           ? "; are the images and labels files swapped?"
                           : "";
    fail_input(path, ": wrong magic ", hex32(magic), magic_meaning(magic), ", expected ",
               hex32(expected_magic), " (IDX ", kind, ")", hint);
  }
  if (bytes.size() < header_bytes) {
    fail_input(path, ": truncated: ", bytes.size(), " bytes, an IDX ", kind, " header needs ",
               header_bytes);
  }
  return bytes;
}

void check_payload(const std::string& path, const std::vector<uint8_t>& bytes, size_t header,
                   uint64_t payload, const std::string& what) {
  const uint64_t expected = header + payload;
  if (bytes.size() < expected) {
    fail_input(path, ": truncated: header promises ", what, " (", expected,
               " bytes with the header) but the file holds ", bytes.size(), " bytes");
  }
  if (bytes.size() > expected) {
    fail_input(path, ": ", bytes.size() - expected, " unexpected bytes after ", what, " (",
               expected, " bytes with the header, found ", bytes.size(), ")");
  }
}

}  // namespace

Dataset read_idx(const std::string& images_path, const std::string& labels_path,
                 std::vector<std::string> class_names) {
  // Images.
  std::vector<uint8_t> image_bytes = read_idx_file(images_path, kIdxImagesMagic, 3, "images");
  const uint32_t n_images = read_be32(image_bytes, 4);
  const uint32_t rows = read_be32(image_bytes, 8);
  const uint32_t cols = read_be32(image_bytes, 12);
  if (n_images == 0 || rows == 0 || cols == 0) {
    fail_input(images_path, ": invalid IDX images header: ", n_images, " images of ", rows, "x",
               cols, " (count, rows and cols must all be positive)");
  }
  uint64_t pixels = 0;
  if (__builtin_mul_overflow(uint64_t{n_images}, uint64_t{rows} * cols, &pixels)) {
    fail_input(images_path, ": header promises an impossible ", n_images, " images of ", rows, "x",
               cols);
  }
  check_payload(
      images_path, image_bytes, 16, pixels,
      std::to_string(n_images) + " images of " + std::to_string(rows) + "x" + std::to_string(cols));

  // Labels.
  const std::vector<uint8_t> label_bytes = read_idx_file(labels_path, kIdxLabelsMagic, 1, "labels");
  const uint32_t n_labels = read_be32(label_bytes, 4);
  if (n_labels == 0) fail_input(labels_path, ": IDX labels header holds 0 labels");
  check_payload(labels_path, label_bytes, 8, n_labels, std::to_string(n_labels) + " labels");
  if (n_labels != n_images) {
    fail_input(images_path, " holds ", n_images, " images but ", labels_path, " holds ", n_labels,
               " labels; they must match");
  }

  Dataset out;
  out.name = images_path;
  out.source = images_path;
  out.channels = 1;
  out.height = rows;
  out.width = cols;
  out.labels.resize(n_labels);
  int32_t max_label = 0;
  for (uint32_t i = 0; i < n_labels; ++i) {
    out.labels[i] = label_bytes[8 + i];
    max_label = std::max(max_label, out.labels[i]);
  }
  if (class_names.empty()) {
    for (int32_t k = 0; k <= max_label; ++k) class_names.push_back(std::to_string(k));
  }
  const auto num_classes = static_cast<int32_t>(class_names.size());
  for (uint32_t i = 0; i < n_labels; ++i) {
    if (out.labels[i] >= num_classes) {
      fail_input(labels_path, ": label ", out.labels[i], " of sample ", i, " is outside [0, ",
                 num_classes, ") for ", num_classes, " classes");
    }
  }
  out.num_classes = num_classes;
  out.class_names = std::move(class_names);
  image_bytes.erase(image_bytes.begin(), image_bytes.begin() + 16);
  out.images = std::move(image_bytes);
  out.validate();
  return out;
}

std::vector<std::string> mnist_class_names() {
  return {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
}

std::vector<std::string> fashion_mnist_class_names() {
  return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
}

namespace {

// The first of the usual spellings of prefix-kind-ubyte that exists in dir.
std::string find_idx_file(const std::string& dir, const std::string& prefix,
                          const std::string& kind) {
  const std::string dashed = prefix + "-" + kind + "-ubyte";  // train-images-idx3-ubyte
  std::string dotted = dashed;                                // train-images.idx3-ubyte
  dotted[dotted.find('-', prefix.size() + 1)] = '.';
  for (const std::string& base : {dashed, dotted}) {
    for (const char* suffix : {"", ".gz"}) {
      const std::string path = join_path(dir, base + suffix);
      if (is_regular_file(path)) return path;
    }
  }
  fail_input(join_path(dir, dashed), "[.gz]: not found (the folder must hold the IDX files ",
             prefix, "-images-idx3-ubyte and ", prefix, "-labels-idx1-ubyte, raw or .gz)");
}

}  // namespace

Dataset load_mnist_family(const std::string& dir, bool train, const std::string& name) {
  std::vector<std::string> classes;
  if (name == "mnist") {
    classes = mnist_class_names();
  } else if (name == "fashion-mnist") {
    classes = fashion_mnist_class_names();
  } else {
    fail_input("dataset name '", name, "' is not in the MNIST family (mnist, fashion-mnist)");
  }
  const std::string prefix = train ? "train" : "t10k";
  const std::string images = find_idx_file(dir, prefix, "images-idx3");
  const std::string labels = find_idx_file(dir, prefix, "labels-idx1");
  Dataset out = read_idx(images, labels, std::move(classes));
  out.name = name + (train ? "/train" : "/test");
  return out;
}

}  // namespace lockstep::data
