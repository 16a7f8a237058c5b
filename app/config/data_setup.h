// The data side of a TrainConfig, shared by train, evaluate, predict and
// `data show`: which normalisation and augmentation the training sees, and
// the options of image-folder datasets.
#pragma once

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
// train_subset / test_subset: the first n samples of a built-in set (stored
// shuffled), a class-stratified subset of an image folder (stored in class
// order); n <= 0: all.
data::Dataset take_subset(data::Dataset dataset, int64_t n, const std::string& dataset_kind);

}  // namespace lockstep::app
