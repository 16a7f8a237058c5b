#include "data/cifar10.h"

#include <algorithm>

#include "common/error.h"
#include "data/file_io.h"

namespace lockstep::data {

std::vector<std::string> cifar10_class_names() {
  return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
}

Dataset read_cifar10_files(const std::vector<std::string>& paths) {
  LOCKSTEP_CHECK(!paths.empty());
  constexpr int64_t kPixels = kCifar10RecordBytes - 1;
  Dataset out;
  out.name = paths.front();
  out.source = paths.size() == 1 ? paths.front() : paths.front() + " ...";
  out.channels = 3;
  out.height = 32;
  out.width = 32;
  out.class_names = cifar10_class_names();
  out.num_classes = static_cast<int64_t>(out.class_names.size());
  for (const std::string& path : paths) {
    const std::vector<uint8_t> bytes = read_whole_file(path);
    const auto size = static_cast<int64_t>(bytes.size());
    if (size == 0 || size % kCifar10RecordBytes != 0) {
      fail_input(path, ": ", size, " bytes is not a positive multiple of the ", kCifar10RecordBytes,
                 "-byte CIFAR-10 record (1 label + 3072 pixels); ", size / kCifar10RecordBytes,
                 " whole records and ", size % kCifar10RecordBytes,
                 " bytes left over (is it the binary version, cifar-10-binary.tar.gz?)");
    }
    const int64_t records = size / kCifar10RecordBytes;
    const size_t first_pixel = out.images.size();
    out.images.resize(first_pixel + static_cast<size_t>(records * kPixels));
    out.labels.reserve(out.labels.size() + static_cast<size_t>(records));
    for (int64_t r = 0; r < records; ++r) {
      const uint8_t* record = bytes.data() + r * kCifar10RecordBytes;
      if (record[0] >= out.num_classes) {
        fail_input(path, ": label ", int{record[0]}, " of record ", r, " (byte offset ",
                   r * kCifar10RecordBytes, ") is outside [0, ", out.num_classes,
                   "); is this a CIFAR-10 (not CIFAR-100) file?");
      }
      out.labels.push_back(record[0]);
      std::copy(record + 1, record + kCifar10RecordBytes,
                out.images.begin() + static_cast<std::ptrdiff_t>(first_pixel + r * kPixels));
    }
  }
  out.validate();
  return out;
}

Dataset load_cifar10(const std::string& dir, bool train) {
  std::string folder = dir;
  const std::string first = train ? "data_batch_1.bin" : "test_batch.bin";
  const std::string nested = join_path(dir, "cifar-10-batches-bin");
  if (!is_regular_file(join_path(dir, first)) && is_regular_file(join_path(nested, first))) {
    folder = nested;
  }
  std::vector<std::string> paths;
  if (train) {
    for (int i = 1; i <= 5; ++i) {
      paths.push_back(join_path(folder, "data_batch_" + std::to_string(i) + ".bin"));
    }
  } else {
    paths.push_back(join_path(folder, "test_batch.bin"));
  }
  for (const std::string& path : paths) {
    if (!is_regular_file(path)) {
      fail_input(path, ": not found (CIFAR-10 binary needs data_batch_1..5.bin and ",
                 "test_batch.bin in ", dir, " or in ", nested,
                 "; scripts/fetch_data.sh downloads them)");
    }
  }
  Dataset out = read_cifar10_files(paths);
  out.name = train ? "cifar10/train" : "cifar10/test";
  out.source = folder;
  return out;
}

}  // namespace lockstep::data
