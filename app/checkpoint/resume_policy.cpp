#include "app/checkpoint/resume_policy.h"

#include <algorithm>
#include <cstdio>

#include "app/config/config_schema.h"
#include "common/error.h"

namespace lockstep::app {
namespace {

// The key's OnResume attribute in the schema; keys outside it (none today)
// may change.
OnResume on_resume(const std::string& name) {
  const Key* key = find_key(name);
  return key != nullptr ? key->on_resume : OnResume::kMayChange;
}

struct Change {
  std::string key, before, after;
};

std::vector<Change> changes(const TrainConfig& stored, const TrainConfig& current) {
  const nlohmann::json a = to_json(stored), b = to_json(current);
  std::vector<Change> out;
  for (auto it = b.cbegin(); it != b.cend(); ++it) {
    if (on_resume(it.key()) == OnResume::kLaunchOnly) continue;
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
    // The seed draws the validation split (with val_fraction): it moves
    // samples between training and validation.
    const bool draws_split = c.key == "seed" && stored.val_fraction > 0;
    if (on_resume(c.key) != OnResume::kFixed && !draws_split) continue;
    refused += (refused.empty() ? "" : "; ") + c.key + " " + c.before + " -> " + c.after;
  }
  if (refused.empty()) return;
  fail_input(path, ": checkpoint was trained with model ", stored.model, " on ", stored.dataset,
             "; a resume cannot change what alters the model or the data (", refused,
             "): keep those settings, or start a new run (another run_dir, or --overwrite)");
}

nlohmann::json data_identity(const data::Dataset& train, const data::Dataset& validation,
                             const data::Dataset& test) {
  const auto part = [](const data::Dataset& d) {
    char hash[17];
    std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(d.fingerprint()));
    return nlohmann::json{{"samples", d.size()}, {"hash", hash}};
  };
  return {{"train", part(train)}, {"validation", part(validation)}, {"test", part(test)}};
}

void refuse_other_data(const nlohmann::json& stored, const nlohmann::json& current,
                       const std::string& path, const std::string& source) {
  if (!stored.is_object()) return;
  const auto describe = [](const nlohmann::json& part) {
    return part.value("samples", nlohmann::json()).dump() + " samples, hash " +
           part.value("hash", std::string("?"));
  };
  std::string differ;
  for (const auto& [set, name] : {std::pair<const char*, const char*>{"train", "training set"},
                                  {"validation", "validation split"},
                                  {"test", "test set"}}) {
    if (!stored.contains(set) || !current.contains(set)) continue;
    const nlohmann::json &before = stored.at(set), &after = current.at(set);
    if (before.value("samples", nlohmann::json()) == after.value("samples", nlohmann::json()) &&
        before.value("hash", std::string()) == after.value("hash", std::string())) {
      continue;
    }
    differ += (differ.empty() ? "" : "; ") + std::string(name) + " " + describe(before) + " -> " +
              describe(after);
  }
  if (differ.empty()) return;
  fail_input(path, ": checkpoint was trained on other data than ", source, " holds now (", differ,
             "): resume with the files it was trained on, or start a new run (another run_dir, "
             "or --overwrite)");
}

}  // namespace lockstep::app
