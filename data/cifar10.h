// CIFAR-10, binary version: files of 3073-byte records, one label byte
// (0..9) then 3072 pixels as R, G and B planes of 32x32 (already CHW).
// data_batch_1..5.bin are the 50 000 training images, test_batch.bin the
// 10 000 test images.
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep::data {

inline constexpr int64_t kCifar10RecordBytes = 1 + 3 * 32 * 32;

// airplane, automobile, bird, cat, deer, dog, frog, horse, ship, truck.
std::vector<std::string> cifar10_class_names();

// Reads and concatenates CIFAR-10 binary files, in order. Throws InputError
// naming the file when it is missing, empty, not a whole number of records,
// or holds a label above 9.
Dataset read_cifar10_files(const std::vector<std::string>& paths);

// Reads data_batch_1..5.bin (train) or test_batch.bin from dir, or from
// dir/cifar-10-batches-bin when that is where the archive was unpacked.
// The Dataset is named "cifar10/train" or "cifar10/test".
Dataset load_cifar10(const std::string& dir, bool train);

}  // namespace lockstep::data
