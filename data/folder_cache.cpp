#include "data/folder_cache.h"

#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "data/image_io.h"

namespace lockstep::data {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'I', 'M', 'G', 'C', 'A', 'C'};

class Writer {
 public:
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void put_bytes(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    put_bytes(s.data(), s.size());
  }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

// Reads from a buffer whose CRC was checked; every read is bounds-checked so
// a cache written by a buggy or foreign program cannot overrun.
class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes, size_t end) : bytes_(bytes), end_(end) {}
  template <typename T>
  bool get(T& v) {
    return get_bytes(&v, sizeof(T));
  }
  bool get_bytes(void* out, size_t n) {
    if (n > end_ - pos_) return false;
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  bool get_string(std::string& s) {
    uint32_t n = 0;
    if (!get(n) || n > end_ - pos_) return false;
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return true;
  }
  size_t left() const { return end_ - pos_; }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t end_, pos_ = 0;
};

uint32_t crc_of(const uint8_t* p, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

bool read_body(Reader& in, const std::string& key, FolderDataset& out) {
  char magic[8];
  uint32_t version = 0;
  uint64_t key_length = 0;
  if (!in.get_bytes(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return false;
  if (!in.get(version) || version != kFolderCacheVersion) return false;
  if (!in.get(key_length) || key_length != key.size() || key_length > in.left()) return false;
  std::string stored(key.size(), '\0');
  if (!in.get_bytes(stored.data(), stored.size()) || stored != key) return false;
  Dataset& d = out.dataset;
  int64_t samples = 0;
  uint64_t classes = 0, skipped = 0;
  if (!in.get(d.channels) || !in.get(d.height) || !in.get(d.width) || !in.get(samples) ||
      !in.get(out.stats.files) || !in.get(classes)) {
    return false;
  }
  if (d.channels <= 0 || d.height <= 0 || d.width <= 0 || samples < 0 || classes > in.left()) {
    return false;
  }
  d.class_names.resize(classes);
  for (std::string& name : d.class_names) {
    if (!in.get_string(name)) return false;
  }
  if (!in.get(skipped) || skipped > in.left()) return false;
  out.stats.skipped_files.resize(skipped);
  for (std::string& message : out.stats.skipped_files) {
    if (!in.get_string(message)) return false;
  }
  out.stats.skipped = static_cast<int64_t>(skipped);
  // Sizes from the file, multiplied without overflow (a cache that does
  // not add up is decoded again).
  const auto n = static_cast<size_t>(samples);
  size_t pixels = 0, image_bytes = 0, total = 0;
  if (__builtin_mul_overflow(static_cast<size_t>(d.channels), static_cast<size_t>(d.height),
                             &pixels) ||
      __builtin_mul_overflow(pixels, static_cast<size_t>(d.width), &pixels) ||
      __builtin_mul_overflow(n, pixels, &image_bytes) ||
      __builtin_add_overflow(image_bytes, n * sizeof(int32_t), &total) || n > in.left() ||
      in.left() != total) {
    return false;
  }
  d.labels.resize(n);
  d.images.resize(n * pixels);
  d.num_classes = static_cast<int64_t>(classes);
  return in.get_bytes(d.labels.data(), n * sizeof(int32_t)) &&
         in.get_bytes(d.images.data(), n * pixels);
}

}  // namespace

bool read_folder_cache(const std::string& path, const std::string& key, FolderDataset& out) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return false;
  const std::streamoff size = file.tellg();
  if (size < static_cast<std::streamoff>(sizeof(kMagic) + 4)) return false;
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  file.seekg(0);
  if (!file.read(reinterpret_cast<char*>(bytes.data()), size)) return false;
  const size_t body = bytes.size() - 4;
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, bytes.data() + body, 4);
  if (crc_of(bytes.data(), body) != stored_crc) return false;
  Reader in(bytes, body);
  FolderDataset read;
  if (!read_body(in, key, read)) return false;
  out.dataset = std::move(read.dataset);
  out.stats.files = read.stats.files;
  out.stats.skipped = read.stats.skipped;
  out.stats.skipped_files = std::move(read.stats.skipped_files);
  return true;
}

void write_folder_cache(const std::string& path, const std::string& key,
                        const FolderDataset& data) {
  const Dataset& d = data.dataset;
  Writer out;
  out.put_bytes(kMagic, sizeof(kMagic));
  out.put(kFolderCacheVersion);
  out.put(static_cast<uint64_t>(key.size()));
  out.put_bytes(key.data(), key.size());
  for (int64_t v : {d.channels, d.height, d.width, d.size(), data.stats.files}) out.put(v);
  out.put(static_cast<uint64_t>(d.class_names.size()));
  for (const std::string& name : d.class_names) out.put_string(name);
  out.put(static_cast<uint64_t>(data.stats.skipped_files.size()));
  for (const std::string& message : data.stats.skipped_files) out.put_string(message);
  out.put_bytes(d.labels.data(), d.labels.size() * sizeof(int32_t));
  out.put_bytes(d.images.data(), d.images.size());
  out.put(crc_of(out.bytes().data(), out.bytes().size()));
  write_file_atomically(path, out.bytes(), /*sync=*/false);
}

}  // namespace lockstep::data
