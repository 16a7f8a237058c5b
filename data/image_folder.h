// Image-folder datasets, the layout of PyTorch's ImageFolder:
//
//   root/train/<class>/**/*.png|jpg|jpeg|bmp
//   root/test/<class>/**/...
//
// Classes are the subfolders of root/train, sorted (byte order): the i-th
// is label i, for both splits. Samples are class by class, files sorted by
// their path within the class. Hidden entries (".name") and files with other
// extensions are ignored. Every image is decoded (stb_image, all cores) to
// one channel count and, with image_size, resized to image_size squared.
//
// The decoded split is cached in root/.lockstep-cache-<split>-<options
// hash>.bin, keyed by every file's (relative path, size, mtime) and the
// options: a later load with nothing changed reads the cache instead of
// decoding; any added, removed or rewritten file, or other options, decode
// again and rewrite it (atomically). A folder that cannot be written is
// still read, uncached.
//
// Export writes a Dataset as such a folder (lossless PNG), so a built-in set
// can be inspected, edited, or read back through this same path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep::data {

struct FolderOptions {
  int64_t channels = 0;          // 1 or 3; 0: as the first training image (gray 1, colour 3)
  int64_t image_size = 0;        // resize every image to S x S pixels; 0: keep (one size needed)
  bool skip_bad_images = false;  // skip empty, damaged, truncated or huge files, not fail
  bool use_cache = true;         // read and write the decoded-split cache
  int64_t threads = 0;           // decoding threads (0: every core)
};

struct FolderLoadStats {
  int64_t files = 0;                       // image files listed in the split
  int64_t skipped = 0;                     // bad files left out (skip_bad_images)
  std::vector<std::string> skipped_files;  // one message per skipped file, naming it
  bool from_cache = false;                 // read from the cache, nothing decoded
  std::string cache_path;                  // the split's cache file ("" without a cache)
  std::string cache_problem;               // why the cache was not written, or ""

  // One-line remarks for the log: skipped files, a cache that could not be
  // written. Empty when there is nothing to say.
  std::vector<std::string> notes() const;
};

struct FolderDataset {
  Dataset dataset;  // named "folder/train" or "folder/test", source root/<split>
  FolderLoadStats stats;
};

// Loads the train or test split of root. Throws InputError naming the file
// or folder at fault: a missing root or split, fewer than two class
// folders (a one-class model learns nothing), an empty
// class folder, a test class without a train class, a bad image (unless
// skipped), images of different sizes without image_size, bad options.
FolderDataset load_image_folder(const std::string& root, bool train,
                                const FolderOptions& options = {});

// The sorted class folder names of root/train (label order); throws
// InputError naming root/train when there are fewer than two.
std::vector<std::string> folder_class_names(const std::string& root);

// --- Export --------------------------------------------------------------------

// Folder names for class_names that sort in label order: the names with
// characters other than [A-Za-z0-9._-] replaced by '_', prefixed by the
// zero-padded label ("0_T-shirt_top") unless they already sort in order and
// are distinct (MNIST's "0".."9", CIFAR-10's names).
std::vector<std::string> export_class_dirs(const std::vector<std::string>& class_names);

// The indices of dataset that export_image_folder writes (at most
// limit_per_class of each class, the first ones; 0: all), in the order
// load_image_folder reads them back: class by class, dataset order within.
std::vector<int64_t> export_order(const Dataset& dataset, int64_t limit_per_class = 0);

struct ExportStats {
  int64_t train_images = 0, test_images = 0;
};

// Writes out_dir/train/<class dir>/<index>.png and out_dir/test/... (index
// zero-padded so names sort in dataset order). Each split appears complete
// or not at all (written under a temporary name, then renamed). Refuses an
// out_dir whose train or test folder exists, and a training split without
// an image of some class (the folder would have fewer classes); a test
// class without images gets no folder. threads: 0 = every core.
ExportStats export_image_folder(const Dataset& train, const Dataset& test,
                                const std::string& out_dir, int64_t limit_per_class = 0,
                                int64_t threads = 0);

}  // namespace lockstep::data
