// The datasets lockstep knows by name, with their default folders,
// normalisation and augmentation.
//
//   name            format             default dir
//   fashion-mnist   IDX (raw or .gz)   /usr/share/datasets/fashion-mnist
//   mnist           IDX (raw or .gz)   data/mnist
//   cifar10         CIFAR-10 binary    data/cifar10
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/transform.h"

namespace lockstep::data {

// "fashion-mnist", "mnist", "cifar10".
std::vector<std::string> dataset_names();

// Throws InputError listing the known names when name is not one of them.
void check_dataset_name(const std::string& name);

std::string default_data_dir(const std::string& name);
Normalization default_normalization(const std::string& name);
// Random crop + flip for cifar10 (applied to training data only); none for
// the MNIST family.
Augmentation default_augmentation(const std::string& name);

// Reads the train or test split of the named dataset from dir (the default
// dir when empty). The Dataset is named "<name>/train" or "<name>/test".
Dataset load_dataset(const std::string& name, const std::string& dir, bool train);

}  // namespace lockstep::data
