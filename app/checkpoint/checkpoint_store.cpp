// CheckpointStore: a run directory of numbered checkpoints, newest by
// (epoch, step), keeping the last k and clearing temporaries of crashed
// writers.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/checkpoint_format.h"
#include "common/error.h"
#include "data/atomic_file.h"

namespace lockstep::app {

using namespace checkpoint_detail;

namespace {
namespace fs = std::filesystem;

struct StoredCheckpoint {
  int64_t epoch;
  int64_t step;
  std::string path;
};

constexpr std::string_view kNamePrefix = "checkpoint-epoch";
constexpr std::string_view kNameStep = "-step";
constexpr std::string_view kNameSuffix = ".lsck";

// Parses a leading run of digits of s into value; returns the rest.
std::optional<std::string_view> parse_number(std::string_view s, int64_t& value) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data() || s.front() == '-' || s.front() == '+') {
    return std::nullopt;
  }
  return s.substr(static_cast<size_t>(end - s.data()));
}

// (epoch, step) of "checkpoint-epochE-stepS.lsck"; the rest of the name after
// ".lsck" goes to tail (empty for a checkpoint, ".tmp.<pid>" for a temporary).
std::optional<std::pair<int64_t, int64_t>> parse_name(std::string_view name,
                                                      std::string_view& tail) {
  if (!name.starts_with(kNamePrefix)) return std::nullopt;
  int64_t epoch = 0, step = 0;
  auto rest = parse_number(name.substr(kNamePrefix.size()), epoch);
  if (!rest || !rest->starts_with(kNameStep)) return std::nullopt;
  rest = parse_number(rest->substr(kNameStep.size()), step);
  if (!rest || !rest->starts_with(kNameSuffix)) return std::nullopt;
  tail = rest->substr(kNameSuffix.size());
  return std::make_pair(epoch, step);
}

// Checkpoints in dir by (epoch, step), oldest first; all names that parse,
// or only complete files.
std::vector<StoredCheckpoint> scan(const std::string& dir, bool complete_only) {
  std::vector<StoredCheckpoint> found;
  std::error_code ec;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    std::string_view tail;
    const std::string name = item.path().filename().string();
    const auto key = parse_name(name, tail);
    if (!key || !tail.empty()) continue;
    if (complete_only && !looks_complete(item.path().string())) continue;
    found.push_back({key->first, key->second, item.path().string()});
  }
  std::sort(found.begin(), found.end(), [](const StoredCheckpoint& a, const StoredCheckpoint& b) {
    return std::tie(a.epoch, a.step, a.path) < std::tie(b.epoch, b.step, b.path);
  });
  return found;
}

}  // namespace

CheckpointStore::CheckpointStore(std::string dir, int keep_last)
    : dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last_ < 0) {
    fail_input("keep_last for checkpoint directory ", dir_, " is ", keep_last_,
               "; use 0 to keep every checkpoint or a positive count");
  }
}

std::string CheckpointStore::file_name(int64_t epoch, int64_t step) {
  LOCKSTEP_CHECK(epoch >= 0 && step >= 0, "epoch ", epoch, " step ", step);
  char name[96];
  std::snprintf(name, sizeof(name), "checkpoint-epoch%04lld-step%08lld.lsck",
                static_cast<long long>(epoch), static_cast<long long>(step));
  return name;
}

std::string CheckpointStore::save(int64_t epoch, int64_t step, const Checkpoint& checkpoint,
                                  const SaveOptions& options) {
  const std::string name = file_name(epoch, step);
  std::error_code ec;
  data::create_folders_durably(dir_, "checkpoint directory",
                               "choose a writable checkpoint directory");
  // Temporaries of crashed writers go first: they may be what fills the disk.
  for (const auto& item : fs::directory_iterator(dir_, ec)) {
    std::string_view tail;
    const std::string file = item.path().filename().string();
    if (parse_name(file, tail) && is_stale_temporary(tail)) fs::remove(item.path(), ec);
  }
  const std::string path = (fs::path(dir_) / name).string();
  save_checkpoint(path, checkpoint, options);
  if (keep_last_ > 0) {
    std::vector<StoredCheckpoint> all = scan(dir_, /*complete_only=*/false);
    const size_t keep = static_cast<size_t>(keep_last_);
    for (size_t i = 0; i + keep < all.size(); ++i) {
      if (all[i].path != path) fs::remove(all[i].path, ec);
    }
  }
  return path;
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::string> paths;
  for (StoredCheckpoint& c : scan(dir_, /*complete_only=*/true)) paths.push_back(std::move(c.path));
  return paths;
}

std::vector<std::string> CheckpointStore::numbered() const {
  std::vector<std::string> paths;
  for (StoredCheckpoint& c : scan(dir_, /*complete_only=*/false))
    paths.push_back(std::move(c.path));
  return paths;
}

std::vector<std::string> CheckpointStore::numbered_after(int64_t epoch, int64_t step) const {
  std::vector<std::string> paths;
  for (StoredCheckpoint& c : scan(dir_, /*complete_only=*/false)) {
    if (std::tie(c.epoch, c.step) > std::tie(epoch, step)) paths.push_back(std::move(c.path));
  }
  return paths;
}

std::string CheckpointStore::latest() const {
  const std::vector<StoredCheckpoint> all = scan(dir_, /*complete_only=*/false);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (looks_complete(it->path)) return it->path;
  }
  return "";
}

}  // namespace lockstep::app
