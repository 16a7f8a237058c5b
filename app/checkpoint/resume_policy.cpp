#include "app/checkpoint/resume_policy.h"

#include <algorithm>
#include <set>

#include "common/error.h"

namespace lockstep::app {
namespace {

const std::set<std::string>& launch_only_keys() {
  static const std::set<std::string> keys{"resume", "overwrite", "config_file", "progress",
                                          "timeline"};
  return keys;
}

const std::set<std::string>& model_or_data_keys() {
  static const std::set<std::string> keys{"model",         "layers",         "loss",
                                          "dataset",       "image_channels", "image_size",
                                          "train_subset",  "test_subset",    "normalize_mean",
                                          "normalize_std", "augment",        "skip_bad_images"};
  return keys;
}

struct Change {
  std::string key, before, after;
};

std::vector<Change> changes(const TrainConfig& stored, const TrainConfig& current) {
  const nlohmann::json a = to_json(stored), b = to_json(current);
  std::vector<Change> out;
  for (auto it = b.cbegin(); it != b.cend(); ++it) {
    if (launch_only_keys().count(it.key())) continue;
    const std::string before = a.contains(it.key()) ? a.at(it.key()).dump() : "(absent)";
    const std::string after = it.value().dump();
    if (before != after) out.push_back({it.key(), before, after});
  }
  return out;
}

}  // namespace

ResumeSource find_resume_checkpoint(const std::string& resume, const std::string& run_dir) {
  ResumeSource source;
  if (resume != "auto") {
    source.checkpoint = load_checkpoint(resume);  // a bad explicit path stays an error
    source.path = resume;
    source.found = true;
    return source;
  }
  std::vector<std::string> paths = CheckpointStore(run_dir + "/checkpoints", 0).numbered();
  std::reverse(paths.begin(), paths.end());
  for (const std::string& path : paths) {
    try {
      source.checkpoint = load_checkpoint(path);
      source.path = path;
      source.found = true;
      return source;
    } catch (const Error& e) {  // unreadable, truncated, corrupt
      source.skipped.push_back(e.what());
    }
  }
  return source;
}

std::vector<std::string> changed_settings(const TrainConfig& stored, const TrainConfig& current) {
  std::vector<std::string> out;
  for (const Change& c : changes(stored, current)) {
    out.push_back(c.key + ": " + c.before + " -> " + c.after);
  }
  return out;
}

void refuse_model_or_data_changes(const TrainConfig& stored, const TrainConfig& current,
                                  const std::string& path) {
  std::string refused;
  for (const Change& c : changes(stored, current)) {
    if (!model_or_data_keys().count(c.key)) continue;
    refused += (refused.empty() ? "" : "; ") + c.key + " " + c.before + " -> " + c.after;
  }
  if (refused.empty()) return;
  fail_input(path, ": checkpoint was trained with model ", stored.model, " on ", stored.dataset,
             "; a resume cannot change what alters the model or the data (", refused,
             "): keep those settings, or start a new run (another run_dir, or --overwrite)");
}

}  // namespace lockstep::app
