// IDX files (MNIST, Fashion-MNIST): a big-endian header, then uint8 values.
//   images: magic 0x00000803, n, rows, cols, then n*rows*cols pixels
//   labels: magic 0x00000801, n, then n labels
// Files may be raw or gzip (detected by content). Every problem is an
// InputError that names the file and says what was expected and found.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep::data {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;

// Reads one images file and one labels file into a single-channel Dataset.
// class_names gives num_classes; when empty, classes are "0".."max label".
// name and source are set to images_path; callers may rename.
Dataset read_idx(const std::string& images_path, const std::string& labels_path,
                 std::vector<std::string> class_names);

// "0".."9".
std::vector<std::string> mnist_class_names();
// T-shirt/top, Trouser, ..., Ankle boot.
std::vector<std::string> fashion_mnist_class_names();

// Finds {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (also the
// "train-images.idx3-ubyte" spelling) in dir and reads them. name is
// "mnist" or "fashion-mnist"; it picks the class names, and the Dataset is
// named "<name>/train" or "<name>/test".
Dataset load_mnist_family(const std::string& dir, bool train, const std::string& name);

}  // namespace lockstep::data
