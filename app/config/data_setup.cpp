#include "app/config/data_setup.h"

#include "data/catalog.h"
#include "data/subset.h"

namespace lockstep::app {

data::Normalization train_normalization(const TrainConfig& config) {
  data::Normalization n = data::default_normalization(config.dataset);
  if (!config.normalize_mean.empty()) {
    n.mean = config.normalize_mean;
    n.stddev = config.normalize_std;
  }
  return n;
}

data::Augmentation train_augmentation(const TrainConfig& config) {
  if (config.augment == "on") return data::cifar10_augmentation();
  if (config.augment == "auto") return data::default_augmentation(config.dataset);
  return {};
}

data::FolderOptions folder_options(const TrainConfig& config, int64_t threads) {
  data::FolderOptions o;
  o.channels = config.image_channels;
  o.image_size = config.image_size;
  o.skip_bad_images = config.skip_bad_images;
  o.threads = threads;
  return o;
}

data::Dataset take_subset(data::Dataset dataset, int64_t n, const std::string& dataset_kind) {
  if (dataset_kind == "folder") return data::stratified_subset(dataset, n);
  return std::move(dataset).head(n);
}

}  // namespace lockstep::app
