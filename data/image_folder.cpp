#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "data/folder_cache.h"
#include "data/image_io.h"
#include "data/parallel_for.h"
#include "nn/counter_rng.h"

namespace lockstep::data {
namespace {

namespace fs = std::filesystem;

struct FileEntry {
  std::string path;  // as opened
  std::string rel;   // relative to the split folder: "<class>/<file>"
  int64_t size = 0;
  int64_t mtime_ns = 0;
  int32_t label = 0;
};

// The target every image is converted to, and the file that fixed it.
struct Target {
  int64_t channels = 0, height = 0, width = 0;
  std::string reference;  // path of the first image, when it decided anything
};

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// Runs fn, turning filesystem errors (permissions, vanished files) into
// InputErrors that name the path.
template <typename Fn>
auto checked_fs(Fn&& fn) {
  try {
    return fn();
  } catch (const fs::filesystem_error& e) {
    fail_input(e.path1().string(), ": ", e.code().message());
  }
}

std::vector<std::string> subfolders(const std::string& dir) {
  return checked_fs([&] {
    std::vector<std::string> names;
    for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
      if (!hidden(e.path()) && e.is_directory()) names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  });
}

// Image files under root/<split>/<class>, sorted by their relative path.
std::vector<FileEntry> list_class(const std::string& split_dir, const std::string& name,
                                  int32_t label) {
  return checked_fs([&] {
    std::vector<FileEntry> files;
    const fs::path dir = fs::path(split_dir) / name;
    auto it =
        fs::recursive_directory_iterator(dir, fs::directory_options::follow_directory_symlink);
    for (; it != fs::recursive_directory_iterator(); ++it) {
      if (hidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (!it->is_regular_file() || !has_image_extension(it->path().string())) continue;
      FileEntry f;
      f.path = it->path().string();
      f.rel = name + "/" + it->path().lexically_relative(dir).generic_string();
      f.size = static_cast<int64_t>(it->file_size());
      f.mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                       it->last_write_time().time_since_epoch())
                       .count();
      f.label = label;
      files.push_back(std::move(f));
    }
    std::sort(files.begin(), files.end(),
              [](const FileEntry& a, const FileEntry& b) { return a.rel < b.rel; });
    if (files.empty()) {
      fail_input(dir.string(), ": class folder has no images (.png, .jpg, .jpeg, .bmp)");
    }
    return files;
  });
}

std::string split_dir(const std::string& root, bool train) {
  if (!fs::is_directory(root)) {
    fail_input("image folder ", root, " does not exist (dataset \"folder\" reads ", root,
               "/train/<class>/*.png and ", root, "/test/<class>/...)");
  }
  const std::string dir = (fs::path(root) / (train ? "train" : "test")).string();
  if (!fs::is_directory(dir)) {
    fail_input(dir,
               ": no such folder (an image folder holds train/<class>/*.png and "
               "test/<class>/*.png)");
  }
  return dir;
}

std::vector<FileEntry> list_split(const std::string& root, bool train,
                                  const std::vector<std::string>& classes) {
  const std::string dir = split_dir(root, train);
  std::vector<FileEntry> files;
  for (const std::string& name : subfolders(dir)) {
    const auto it = std::find(classes.begin(), classes.end(), name);
    if (it == classes.end()) {
      fail_input(dir, "/", name, ": class \"", name, "\" is not in ", root,
                 "/train (the classes are the folders of train/)");
    }
    auto class_files = list_class(dir, name, static_cast<int32_t>(it - classes.begin()));
    files.insert(files.end(), class_files.begin(), class_files.end());
  }
  if (files.empty()) fail_input(dir, ": no class folders with images");
  return files;
}

// The channel count and size every image gets: from the options, or from the
// first (readable, when skipping) training image.
Target resolve_target(const std::string& root, const std::vector<std::string>& classes,
                      const FolderOptions& options) {
  Target t{options.channels, options.image_size, options.image_size, ""};
  if (t.channels != 0 && t.height != 0) return t;
  const std::string train_dir = split_dir(root, true);
  for (size_t c = 0; c < classes.size(); ++c) {
    for (const FileEntry& f : list_class(train_dir, classes[c], static_cast<int32_t>(c))) {
      ImageInfo info;
      try {
        info = image_info(read_file_bytes(f.path), f.path);
      } catch (const InputError&) {
        if (!options.skip_bad_images) throw;
        continue;
      }
      if (t.channels == 0) t.channels = info.channels <= 2 ? 1 : 3;
      if (t.height == 0) {
        t.height = info.height;
        t.width = info.width;
      }
      t.reference = f.path;
      return t;
    }
  }
  fail_input(train_dir, ": no readable image to take the channel count and size from");
}

std::string hex64(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

uint64_t hash_string(const std::string& s) {
  uint64_t h = 0x6c6f636b73746570ULL;
  for (unsigned char c : s) h = nn::hash_combine(h, c);
  return h;
}

// What a cache must match: the options, the target, every file's identity.
std::string cache_key(bool train, const FolderOptions& options, const Target& t,
                      const std::vector<FileEntry>& files) {
  std::ostringstream key;
  key << "lockstep image folder\nsplit " << (train ? "train" : "test") << "\nchannels "
      << options.channels << " -> " << t.channels << "\nimage_size " << options.image_size << " -> "
      << t.height << "x" << t.width << "\nskip_bad_images " << options.skip_bad_images << "\n";
  for (const FileEntry& f : files) {
    key << f.rel.size() << ':' << f.rel << ' ' << f.size << ' ' << f.mtime_ns << ' ' << f.label
        << '\n';
  }
  return key.str();
}

std::string cache_path(const std::string& root, bool train, const FolderOptions& options) {
  std::ostringstream o;
  o << options.channels << '/' << options.image_size << '/' << options.skip_bad_images;
  return (fs::path(root) / (std::string(".lockstep-cache-") + (train ? "train" : "test") + "-" +
                            hex64(hash_string(o.str())) + ".bin"))
      .string();
}

// Decodes every file into d (pre-sized for all of them), then drops the
// skipped ones. Without skipping, the first bad file in order is the error.
void decode_all(const std::vector<FileEntry>& files, const Target& t, const FolderOptions& options,
                Dataset& d, FolderLoadStats& stats) {
  const auto n = static_cast<int64_t>(files.size());
  const int64_t bytes = d.image_bytes();
  d.images.resize(static_cast<size_t>(n * bytes));
  std::vector<std::string> errors(files.size());
  std::vector<char> mixed(files.size(), 0);
  std::atomic<int64_t> first_fatal{n};
  parallel_for(n, options.threads, [&](int64_t i) {
    if (i > first_fatal) return;  // an earlier file already failed
    const FileEntry& f = files[static_cast<size_t>(i)];
    try {
      const std::vector<uint8_t> encoded = read_file_bytes(f.path);
      const ImageInfo info = image_info(encoded, f.path);
      if (options.image_size == 0 && (info.height != t.height || info.width != t.width)) {
        mixed[static_cast<size_t>(i)] = 1;
        errors[static_cast<size_t>(i)] = detail::concat(
            f.path, ": image is ", info.width, "x", info.height, " but ", t.reference, " is ",
            t.width, "x", t.height, "; images of different sizes need image_size (e.g. ",
            "image_size = ", std::max(t.height, t.width), ") to resize them all");
      } else {
        Image image = decode_image(encoded, f.path, t.channels);
        if (options.image_size != 0) image = resize_image(image, t.height, t.width);
        to_planar(image, d.images.data() + i * bytes);
        return;
      }
    } catch (const InputError& e) {
      errors[static_cast<size_t>(i)] = e.what();
    }
    if (mixed[static_cast<size_t>(i)] || !options.skip_bad_images) {
      int64_t seen = first_fatal;
      while (i < seen && !first_fatal.compare_exchange_weak(seen, i)) {
      }
    }
  });
  if (first_fatal < n) fail_input(errors[static_cast<size_t>(first_fatal.load())]);
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!errors[static_cast<size_t>(i)].empty()) {
      stats.skipped_files.push_back(errors[static_cast<size_t>(i)]);
      continue;
    }
    if (kept != i) {
      std::copy_n(d.images.begin() + i * bytes, bytes, d.images.begin() + kept * bytes);
    }
    d.labels.push_back(files[static_cast<size_t>(i)].label);
    ++kept;
  }
  d.images.resize(static_cast<size_t>(kept * bytes));
  stats.skipped = n - kept;
}

}  // namespace

std::vector<std::string> FolderLoadStats::notes() const {
  std::vector<std::string> out;
  if (skipped > 0) {
    out.push_back(detail::concat("note: skipped ", skipped, " of ", files,
                                 " images that could not be read (first: ", skipped_files.front(),
                                 ")"));
  }
  if (!cache_problem.empty()) {
    out.push_back("note: image cache not written (" + cache_problem +
                  "); the next run decodes again");
  }
  return out;
}

std::vector<std::string> folder_class_names(const std::string& root) {
  const std::string dir = split_dir(root, true);
  std::vector<std::string> names = subfolders(dir);
  if (names.empty()) {
    fail_input(dir, ": no class folders (expected ", dir, "/<class>/<image>.png)");
  }
  if (names.size() < 2) {
    fail_input(dir, ": one class folder (", names[0],
               "); a classifier needs at least two (is the data folder one level too deep?)");
  }
  return names;
}

FolderDataset load_image_folder(const std::string& root, bool train, const FolderOptions& options) {
  if (options.channels != 0 && options.channels != 1 && options.channels != 3) {
    fail_input("image_channels is ", options.channels, "; expected 1, 3 or 0 (from the images)");
  }
  if (options.image_size < 0 || options.image_size > kMaxImageSide) {
    fail_input("image_size is ", options.image_size, "; expected 0 (keep) to ", kMaxImageSide,
               " pixels");
  }
  FolderDataset out;
  Dataset& d = out.dataset;
  d.class_names = folder_class_names(root);
  d.num_classes = static_cast<int64_t>(d.class_names.size());
  const std::vector<FileEntry> files = list_split(root, train, d.class_names);
  const Target t = resolve_target(root, d.class_names, options);
  d.name = train ? "folder/train" : "folder/test";
  d.source = split_dir(root, train);
  out.stats.files = static_cast<int64_t>(files.size());

  const std::string key = cache_key(train, options, t, files);
  if (options.use_cache) {
    out.stats.cache_path = cache_path(root, train, options);
    FolderDataset cached;
    if (read_folder_cache(out.stats.cache_path, key, cached) &&
        cached.dataset.class_names == d.class_names) {
      cached.dataset.name = d.name;
      cached.dataset.source = d.source;
      cached.stats.cache_path = out.stats.cache_path;
      cached.stats.from_cache = true;
      cached.dataset.validate();
      return cached;
    }
  }
  d.channels = t.channels;
  d.height = t.height;
  d.width = t.width;
  decode_all(files, t, options, d, out.stats);
  if (d.size() == 0) {
    fail_input(d.source, ": none of the ", files.size(),
               " images could be read (first: ", out.stats.skipped_files.front(), ")");
  }
  d.validate();
  if (options.use_cache) {
    try {
      write_folder_cache(out.stats.cache_path, key, out);
    } catch (const InputError& e) {
      out.stats.cache_problem = e.what();
    }
  }
  return out;
}

}  // namespace lockstep::data
