// Which checkpoint a run continues from, and which settings may change on
// the way (rank 0 decides; the trainer broadcasts the outcome).
#pragma once

#include <string>
#include <vector>

#include "app/checkpoint/checkpoint.h"
#include "app/config/config.h"
#include "data/dataset.h"

namespace lockstep::app {

struct ResumeSource {
  bool found = false;  // false: `auto` found no readable checkpoint
  std::string path;
  Checkpoint checkpoint;             // loaded and validated (CRC, entries)
  std::vector<std::string> skipped;  // auto: "<path>: <why>", newest first
};

// resume = "auto": the newest checkpoint of run_dir/checkpoints that loads
// and validates; each newer one that does not (truncated, corrupt,
// unreadable) is skipped and named in skipped. Any other value is a path:
// a missing or bad file is an InputError naming it.
ResumeSource find_resume_checkpoint(const std::string& resume, const std::string& run_dir);

// The settings that differ between the config stored in a checkpoint and
// the current one, as "key: old -> new" (values as JSON), in key order.
// Keys that only say how this launch runs (OnResume::kLaunchOnly in the
// schema: resume, overwrite, progress, timeline) are not compared.
std::vector<std::string> changed_settings(const TrainConfig& stored, const TrainConfig& current);

// Throws InputError naming path and every changed key that alters the model
// or the data it trains on (OnResume::kFixed in the schema: model, layers,
// loss, dataset, image and subset keys, normalisation, augmentation,
// skip_bad_images), with the remedy.
void refuse_model_or_data_changes(const TrainConfig& stored, const TrainConfig& current,
                                  const std::string& path);

// What a run trains, validates and tests on, as its checkpoints keep it
// (metadata "data"): for each set its samples and a hash of its content
// (data::Dataset::fingerprint), e.g. {"train": {"samples": 60000, "hash":
// "9f0c..."}, "validation": ..., "test": ...}.
nlohmann::json data_identity(const data::Dataset& train, const data::Dataset& validation,
                             const data::Dataset& test);

// The same keys cannot tell files that changed under the same data_dir (a
// data set that grew, other images in the same format): throws InputError
// naming path, source (the data's folder) and each set whose samples
// or content differ between stored (a checkpoint's "data"; null for one
// written before it was kept: nothing to compare) and current, with the
// remedy.
void refuse_other_data(const nlohmann::json& stored, const nlohmann::json& current,
                       const std::string& path, const std::string& source);

}  // namespace lockstep::app
