// Export of a Dataset as an image folder (declared in data/image_folder.h).
#include <algorithm>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "data/image_folder.h"
#include "data/image_io.h"
#include "data/parallel_for.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

std::string zero_padded(int64_t value, size_t width) {
  std::string s = std::to_string(value);
  return s.size() >= width ? s : std::string(width - s.size(), '0') + s;
}

std::string sanitized(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out.empty()) out = "class";
  if (out[0] == '.') out[0] = '_';  // not hidden
  return out;
}

// Writes one split into dir (created here), the samples `order` of d.
void export_split(const Dataset& d, const std::vector<int64_t>& order,
                  const std::vector<std::string>& class_dirs, const std::string& dir,
                  int64_t threads) {
  for (int64_t i : order) fs::create_directories(fs::path(dir) / class_dirs[d.labels[i]]);
  const size_t width = std::to_string(std::max<int64_t>(d.size() - 1, 0)).size();
  parallel_for(static_cast<int64_t>(order.size()), threads, [&](int64_t k) {
    const int64_t i = order[static_cast<size_t>(k)];
    const Image image = from_planar(d.image(i), d.channels, d.height, d.width);
    const std::string path =
        (fs::path(dir) / class_dirs[d.labels[i]] / (zero_padded(i, width) + ".png")).string();
    write_file_atomically(path, encode_png(image), /*sync=*/false);
  });
}

}  // namespace

std::vector<std::string> export_class_dirs(const std::vector<std::string>& class_names) {
  std::vector<std::string> dirs;
  for (const std::string& name : class_names) dirs.push_back(sanitized(name));
  bool in_order = true;
  for (size_t i = 1; i < dirs.size(); ++i) in_order = in_order && dirs[i - 1] < dirs[i];
  if (in_order) return dirs;
  const size_t width = std::to_string(std::max<size_t>(dirs.size(), 1) - 1).size();
  for (size_t i = 0; i < dirs.size(); ++i) {
    dirs[i] = zero_padded(static_cast<int64_t>(i), width) + "_" + dirs[i];
  }
  return dirs;
}

std::vector<int64_t> export_order(const Dataset& dataset, int64_t limit_per_class) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(dataset.num_classes));
  for (int64_t i = 0; i < dataset.size(); ++i) {
    auto& members = by_class.at(static_cast<size_t>(dataset.labels[static_cast<size_t>(i)]));
    if (limit_per_class <= 0 || static_cast<int64_t>(members.size()) < limit_per_class) {
      members.push_back(i);
    }
  }
  std::vector<int64_t> order;
  for (const auto& members : by_class) order.insert(order.end(), members.begin(), members.end());
  return order;
}

ExportStats export_image_folder(const Dataset& train, const Dataset& test,
                                const std::string& out_dir, int64_t limit_per_class,
                                int64_t threads) {
  train.validate();
  test.validate();
  if (train.class_names != test.class_names) {
    fail_input(test.source, ": its classes differ from those of ", train.source);
  }
  const std::vector<std::string> class_dirs = export_class_dirs(train.class_names);
  const std::vector<int64_t> train_order = export_order(train, limit_per_class);
  const std::vector<int64_t> test_order = export_order(test, limit_per_class);
  std::vector<int64_t> train_counts(class_dirs.size(), 0);
  for (int64_t i : train_order) ++train_counts[static_cast<size_t>(train.labels[i])];
  for (size_t c = 0; c < class_dirs.size(); ++c) {
    if (train_counts[c] == 0) {
      fail_input(train.source, ": no training image of class \"", train.class_names[c],
                 "\"; an exported folder without it would have fewer classes");
    }
  }
  try {
    for (const char* split : {"train", "test"}) {
      const fs::path target = fs::path(out_dir) / split;
      if (fs::exists(target)) {
        fail_input(target.string(), " already exists: remove it or choose another --out");
      }
    }
    // Each split is written under a temporary name and renamed when
    // complete, so an interrupted export never leaves a folder that loads
    // with images missing.
    for (const bool is_train : {true, false}) {
      const fs::path final_dir = fs::path(out_dir) / (is_train ? "train" : "test");
      const fs::path partial = fs::path(out_dir) / (is_train ? ".train.partial" : ".test.partial");
      fs::remove_all(partial);
      fs::create_directories(partial);
      export_split(is_train ? train : test, is_train ? train_order : test_order, class_dirs,
                   partial.string(), threads);
      fs::rename(partial, final_dir);
    }
  } catch (const fs::filesystem_error& e) {
    fail_input(e.path1().string(), ": ", e.code().message(), " (exporting to ", out_dir, ")");
  }
  return {static_cast<int64_t>(train_order.size()), static_cast<int64_t>(test_order.size())};
}

}  // namespace lockstep::data
