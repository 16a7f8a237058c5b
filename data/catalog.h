// The datasets lockstep knows by name, with their default folders,
// normalisation and augmentation.
//
//   name            format             default dir
//   fashion-mnist   IDX (raw or .gz)   /usr/share/datasets/fashion-mnist
//   mnist           IDX (raw or .gz)   data/mnist
//   cifar10         CIFAR-10 binary    data/cifar10
//   folder          image folder       none: data_dir is required (data/image_folder.h)
#pragma once

#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/transform.h"

namespace lockstep::data {

// "fashion-mnist", "mnist", "cifar10", "folder".
std::vector<std::string> dataset_names();

// Throws InputError listing the known names when name is not one of them.
void check_dataset_name(const std::string& name);

std::string default_data_dir(const std::string& name);
// The folder a dataset is read from: dir, or the dataset's default when dir
// is empty (config key data_dir).
std::string data_folder(const std::string& name, const std::string& dir);
Normalization default_normalization(const std::string& name);
// folder: 0.5 / 0.5 for every channel (pixels to [-1, 1]).
// Random crop + flip for cifar10 (applied to training data only); none for
// the MNIST family and folders.
Augmentation default_augmentation(const std::string& name);

// Reads the train or test split of the named dataset from dir (the default
// dir when empty). The Dataset is named "<name>/train" or "<name>/test".
// folder options apply to "folder" only; its one-line remarks (skipped
// images, an unwritable cache) are appended to notes when given.
Dataset load_dataset(const std::string& name, const std::string& dir, bool train,
                     const FolderOptions& folder = {}, std::vector<std::string>* notes = nullptr);

}  // namespace lockstep::data
