#include "app/config/data_setup.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/error.h"
#include "data/catalog.h"
#include "data/subset.h"
#include "data/validation_split.h"

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

data::Dataset take_subset(data::Dataset dataset, const TrainConfig& config, bool train) {
  const char* key = train ? "train_subset" : "test_subset";
  const int64_t n = train ? config.train_subset : config.test_subset;
  if (n > dataset.size()) {
    fail_input(origin_prefix(config, {key}), "config key ", key, " = ", n, " is more than the ",
               dataset.size(), " samples of ", dataset.name, " in ", dataset.source,
               " (0 takes them all)");
  }
  if (n <= 0 || n == dataset.size()) return dataset;
  if (config.dataset == "folder") return data::stratified_subset(dataset, n);
  return std::move(dataset).head(n);
}

data::Dataset take_validation(data::Dataset& train, const TrainConfig& config,
                              std::vector<std::string>& notes) {
  const double f = config.val_fraction;
  if (f <= 0) return {};
  const data::Split split = data::stratified_split(train.labels, train.num_classes, f, config.seed);
  const std::vector<int64_t>& sizes = split.class_sizes;
  const auto held = static_cast<int64_t>(split.validation.size());
  const int64_t n = train.size();
  const int64_t asked = std::llround(f * static_cast<double>(n));
  std::ostringstream samples;  // "12 training samples (train_subset = 12)"
  samples << n << " training samples";
  if (config.train_subset > 0) samples << " (train_subset = " << config.train_subset << ")";
  if (held == 0) {
    std::ostringstream why;
    if (asked == 0) {
      why << "round(" << f << " x " << n << ") is 0 for the " << samples.str()
          << "; raise val_fraction to at least "
          << 0.5 / static_cast<double>(std::max<int64_t>(n, 1)) << " or set it to 0";
    } else {
      why << "the " << samples.str() << " have at most "
          << *std::max_element(sizes.begin(), sizes.end()) << " per class (" << train.num_classes
          << " classes), and each class keeps one for training";
    }
    const bool needed = config.keep_best || config.patience > 0;
    fail_input(origin_prefix(config, {"val_fraction", "keep_best", "patience", "train_subset"}),
               "config key val_fraction = ", f, " holds out no validation sample: ", why.str(),
               needed ? " (keep_best and patience need a validation split)" : "");
  }
  if (held < asked) {
    std::ostringstream note;
    note << "note: val_fraction = " << f << " asks for " << asked << " of the " << samples.str()
         << "; " << held << " held out, as each class keeps one sample for training";
    notes.push_back(note.str());
  }
  return data::split_off_validation(train, split);
}

int64_t top_k_for(const TrainConfig& config, int64_t classes) {
  if (config.top_k < classes || classes <= 1) return config.top_k;
  const std::string origin = origin_prefix(config, {"top_k"});
  if (!origin.empty()) {
    fail_input(origin, "config key top_k = ", config.top_k, " is not below the ", classes,
               " classes of the data (top-", config.top_k,
               " accuracy would be 100%): set top_k to at most ",
               std::max<int64_t>(classes - 1, 1));
  }
  return std::max<int64_t>(classes - 1, 1);
}

}  // namespace lockstep::app
