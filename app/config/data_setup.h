// The data side of a TrainConfig, shared by train, evaluate, predict and
// `data show`: which normalisation and augmentation the training sees, and
// the options of image-folder datasets.
#pragma once

#include <string>
#include <vector>

#include "app/config/config.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/transform.h"

namespace lockstep::app {

// normalize_mean/std when given, else the dataset's default.
data::Normalization train_normalization(const TrainConfig& config);
// augment: auto (the dataset's default), on (random crop 4 px + flip), off.
data::Augmentation train_augmentation(const TrainConfig& config);
// image_channels, image_size, skip_bad_images; threads decode (0: every core).
data::FolderOptions folder_options(const TrainConfig& config, int64_t threads = 0);
// train_subset (train) or test_subset of config: the first n samples of a
// built-in set (stored shuffled), a class-stratified subset of an image
// folder (stored in class order); 0: all. Throws InputError naming the key,
// its origin, n and the samples there are when n is more than that.
data::Dataset take_subset(data::Dataset dataset, const TrainConfig& config, bool train);

// Moves config's validation split (val_fraction, seed:
// data/validation_split.h) out of train; empty without val_fraction.
// Throws InputError naming val_fraction (keep_best and patience when set),
// the fraction and the samples per class when the split would be empty.
// When each class keeping one sample for training holds out fewer than
// val_fraction asks, a note saying so is appended to notes.
data::Dataset take_validation(data::Dataset& train, const TrainConfig& config,
                              std::vector<std::string>& notes);

// The k of top-k accuracy for a model of `classes` outputs: top_k, which
// must be below classes (at or above it top-k accuracy is 100%) when the
// file or a flag set it (InputError naming top_k, its origin and the class
// count); the default (or a checkpoint's value) is lowered to classes - 1.
int64_t top_k_for(const TrainConfig& config, int64_t classes);

}  // namespace lockstep::app
