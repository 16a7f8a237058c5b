#include "app/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>
#include <string_view>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "nn/error.h"

namespace lockstep::app {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian and this code writes host order; a "
              "big-endian host needs byte swapping here");

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'L', 'O', 'C', 'K', 'S', 'T', 'E', 'P'};
constexpr char kEndMagic[8] = {'L', 'S', 'C', 'K', '-', 'E', 'N', 'D'};
constexpr uint64_t kHeaderSize = 24;   // magic, version, file size, header CRC
constexpr uint64_t kTrailerSize = 12;  // CRC, end magic
constexpr uint64_t kMinFileSize = kHeaderSize + 8 + 8 + kTrailerSize;  // no meta, no entries
constexpr uint32_t kMaxNameLength = 4096;
constexpr size_t kIoChunk = size_t{1} << 20;

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {
    const auto n = static_cast<uInt>(std::min(size, kIoChunk));
    crc = static_cast<uint32_t>(::crc32(crc, p, n));
    p += n;
    size -= n;
  }
  return crc;
}

template <typename T>
T load_le(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename T>
void append_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Owns a POSIX file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now; returns 0 or the errno of close() (NFS reports late errors here).
  int close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

[[noreturn]] void fail_corrupt(const std::string& path, const std::string& detail) {
  fail_input("checkpoint ", path, " is corrupt: ", detail,
             "; use an earlier checkpoint (or copy this one again)");
}

// Why the first bytes (n of them, of a file of file_size bytes) are not a
// valid version-1 header, or "" when they are.
std::string header_problem(const std::string& path, const char* h, uint64_t n, uint64_t file_size) {
  const std::string file = "checkpoint " + path;
  if (file_size == 0) return file + " is empty (0 bytes): truncated; use an earlier checkpoint";
  if (std::memcmp(h, kMagic, std::min<uint64_t>(n, sizeof(kMagic))) != 0) {
    return path +
           " is not a lockstep checkpoint (it does not start with \"LOCKSTEP\"); pass a "
           ".lsck file written by lockstep";
  }
  const std::string truncated = file + " is truncated: it ends after " + std::to_string(file_size) +
                                " bytes, expected at least " + std::to_string(kHeaderSize) +
                                " (the header); use an earlier "
                                "checkpoint";
  if (n < 12) return truncated;
  const auto version = load_le<uint32_t>(h + 8);
  if (version != kCheckpointFormatVersion) {
    return file + " has format version " + std::to_string(version) + "; this lockstep (" +
           LOCKSTEP_VERSION + ") reads version " + std::to_string(kCheckpointFormatVersion) +
           " only; load it with the lockstep that wrote it";
  }
  if (n < kHeaderSize) return truncated;
  if (crc32_update(0, h, 20) != load_le<uint32_t>(h + 20)) {
    return file + " is corrupt: its header fails its CRC-32 check; use an earlier checkpoint";
  }
  const auto recorded = load_le<uint64_t>(h + 12);
  if (recorded < kMinFileSize) {
    return file + " is corrupt: its header records an impossible size of " +
           std::to_string(recorded) + " bytes; use an earlier checkpoint";
  }
  if (file_size < recorded) {
    return file + " is truncated: it ends after " + std::to_string(file_size) +
           " bytes, expected " + std::to_string(recorded) +
           "; it was not completely written or copied: use an earlier checkpoint";
  }
  if (file_size > recorded) {
    return file + " is corrupt: it has " + std::to_string(file_size) + " bytes, expected " +
           std::to_string(recorded) + " (data after its end); use an earlier checkpoint";
  }
  return "";
}

// Reads n bytes at offset; returns how many were read (fewer at end of file).
uint64_t read_at(int fd, char* dst, uint64_t n, uint64_t offset) {
  uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, dst + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += static_cast<uint64_t>(got);
  }
  return done;
}

// ---------------------------------------------------------------------------
// Writing

void check_writable(const Checkpoint& checkpoint) {
  LOCKSTEP_CHECK(checkpoint.meta.is_object(), "checkpoint metadata must be a JSON object");
  std::unordered_set<std::string_view> names;
  for (const CheckpointEntry& e : checkpoint.entries) {
    LOCKSTEP_CHECK(!e.name.empty() && e.name.size() <= kMaxNameLength, "entry name \"", e.name,
                   "\"");
    LOCKSTEP_CHECK(names.insert(e.name).second, "entry \"", e.name, "\" appears twice");
    LOCKSTEP_CHECK(e.shape.size() <= kMaxCheckpointDims, "entry \"", e.name, "\" has ",
                   e.shape.size(), " dims");
    for (int64_t d : e.shape) LOCKSTEP_CHECK(d >= 0, "entry \"", e.name, "\" dim ", d);
    LOCKSTEP_CHECK(static_cast<int64_t>(e.values.size()) == nn::shape_numel(e.shape), "entry \"",
                   e.name, "\" has ", e.values.size(), " values for shape ",
                   nn::shape_string(e.shape));
  }
}

uint64_t encoded_size(const Checkpoint& checkpoint, const std::string& meta_text) {
  uint64_t size = kHeaderSize + 8 + meta_text.size() + 8 + kTrailerSize;
  for (const CheckpointEntry& e : checkpoint.entries) {
    size += 4 + e.name.size() + 4 + 8 * e.shape.size() + 4 * e.values.size();
  }
  return size;
}

// Buffered writer to a file descriptor that keeps the CRC-32 of what it wrote.
class Writer {
 public:
  Writer(int fd, const std::string& path, int64_t fail_after)
      : fd_(fd), path_(path), fail_after_(fail_after) {
    buffer_.reserve(kIoChunk);
  }

  void bytes(const void* data, size_t n) {
    crc_ = crc32_update(crc_, data, n);
    const char* p = static_cast<const char*>(data);
    if (buffer_.size() + n > kIoChunk) flush();
    if (n >= kIoChunk) {
      write_all(p, n);
    } else {
      buffer_.append(p, n);
    }
  }
  template <typename T>
  void value(T v) {
    bytes(&v, sizeof(T));
  }
  void flush() {
    write_all(buffer_.data(), buffer_.size());
    buffer_.clear();
  }
  uint32_t crc() const { return crc_; }
  uint64_t written() const { return written_; }

 private:
  void write_all(const char* p, size_t n) {
    while (n > 0) {
      size_t chunk = n;
      if (fail_after_ >= 0) {
        const uint64_t allowed = static_cast<uint64_t>(fail_after_);
        if (written_ >= allowed) fail(ENOSPC);
        chunk = std::min<uint64_t>(chunk, allowed - written_);
      }
      const ssize_t put = ::write(fd_, p, chunk);
      if (put < 0 && errno == EINTR) continue;
      if (put < 0) fail(errno);
      p += put;
      n -= static_cast<size_t>(put);
      written_ += static_cast<uint64_t>(put);
    }
  }
  [[noreturn]] void fail(int err) const {
    fail_input("cannot write checkpoint ", path_, ": ", errno_text(err), " after ", written_,
               " bytes; the previous checkpoint is kept; free disk space or choose another "
               "checkpoint directory");
  }

  int fd_;
  const std::string& path_;
  int64_t fail_after_;
  std::string buffer_;
  uint32_t crc_ = 0;
  uint64_t written_ = 0;
};

void write_body(Writer& w, const Checkpoint& checkpoint, const std::string& meta_text,
                uint64_t size) {
  std::string header(kMagic, sizeof(kMagic));
  append_le<uint32_t>(header, kCheckpointFormatVersion);
  append_le<uint64_t>(header, size);
  append_le<uint32_t>(header, crc32_update(0, header.data(), header.size()));
  w.bytes(header.data(), header.size());
  w.value<uint64_t>(meta_text.size());
  w.bytes(meta_text.data(), meta_text.size());
  w.value<uint64_t>(checkpoint.entries.size());
  for (const CheckpointEntry& e : checkpoint.entries) {
    w.value<uint32_t>(static_cast<uint32_t>(e.name.size()));
    w.bytes(e.name.data(), e.name.size());
    w.value<uint32_t>(static_cast<uint32_t>(e.shape.size()));
    for (int64_t d : e.shape) w.value<int64_t>(d);
    w.bytes(e.values.data(), e.values.size() * sizeof(float));
  }
  w.value<uint32_t>(w.crc());
  w.bytes(kEndMagic, sizeof(kEndMagic));
  w.flush();
  LOCKSTEP_CHECK(w.written() == size, "wrote ", w.written(), " bytes, expected ", size);
}

// Makes a rename in dir durable. File systems that cannot sync directories
// (EINVAL) are accepted.
void sync_directory(const std::string& dir, const std::string& path) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0 || ::fsync(fd.get()) != 0) {
    const int err = errno;
    if (err == EINVAL) return;
    fail_input("checkpoint ", path, " was written but its directory ", dir,
               " could not be synced: ", errno_text(err),
               "; check the file system before trusting this checkpoint");
  }
}

// ---------------------------------------------------------------------------
// Reading

// Sequential reader over bytes [0, limit) of a file that keeps the CRC-32 of
// what it consumed. Reading past limit means a length field is corrupt.
class Reader {
 public:
  Reader(int fd, const std::string& path, uint64_t limit) : fd_(fd), path_(path), limit_(limit) {}

  uint64_t remaining() const { return limit_ - position_; }

  void bytes(void* dst, uint64_t n, const std::string& what) {
    if (n > remaining()) {
      fail_corrupt(path_, what + " runs past the end of the data (" + std::to_string(n) +
                              " bytes at offset " + std::to_string(position_) + ")");
    }
    char* out = static_cast<char*>(dst);
    while (n > 0) {
      if (begin_ == buffer_.size()) refill();
      const uint64_t take = std::min<uint64_t>(n, buffer_.size() - begin_);
      std::memcpy(out, buffer_.data() + begin_, take);
      crc_ = crc32_update(crc_, buffer_.data() + begin_, take);
      begin_ += take;
      position_ += take;
      out += take;
      n -= take;
    }
  }
  template <typename T>
  T value(const std::string& what) {
    T v;
    bytes(&v, sizeof(T), what);
    return v;
  }
  // Consumes the rest (up to limit) so that crc() covers all of it.
  void drain() {
    while (remaining() > 0) {
      if (begin_ == buffer_.size()) refill();
      const uint64_t take = std::min<uint64_t>(remaining(), buffer_.size() - begin_);
      crc_ = crc32_update(crc_, buffer_.data() + begin_, take);
      begin_ += take;
      position_ += take;
    }
  }
  uint32_t crc() const { return crc_; }

 private:
  void refill() {
    buffer_.resize(std::min<uint64_t>(kIoChunk, remaining()));
    const uint64_t got = read_at(fd_, buffer_.data(), buffer_.size(), position_);
    if (got < buffer_.size()) {
      fail_input("checkpoint ", path_, " is truncated: it ends after ", position_ + got,
                 " bytes while being read (was it changed meanwhile?); use an earlier checkpoint");
    }
    begin_ = 0;
  }

  int fd_;
  const std::string& path_;
  uint64_t limit_;
  uint64_t position_ = 0;
  std::vector<char> buffer_;
  size_t begin_ = 0;
  uint32_t crc_ = 0;
};

nlohmann::json parse_meta(const std::string& path, const std::string& text) {
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail_input("checkpoint ", path, " has malformed JSON metadata (", e.what(),
               "); use an earlier checkpoint");
  }
  if (!meta.is_object()) {
    fail_input("checkpoint ", path,
               " has malformed JSON metadata: ", meta.is_array() ? "an " : "a ", meta.type_name(),
               ", not an object; use an earlier checkpoint");
  }
  return meta;
}

CheckpointEntry read_entry(Reader& r, const std::string& path, uint64_t index) {
  const std::string where = "entry #" + std::to_string(index);
  CheckpointEntry e;
  const auto name_length = r.value<uint32_t>(where);
  if (name_length == 0 || name_length > kMaxNameLength) {
    fail_corrupt(path, where + " has a name of " + std::to_string(name_length) + " bytes");
  }
  e.name.resize(name_length);
  r.bytes(e.name.data(), name_length, where + "'s name");
  const std::string what = "entry \"" + e.name + "\"";
  const auto ndim = r.value<uint32_t>(what);
  if (ndim > kMaxCheckpointDims) {
    fail_corrupt(path, what + " has " + std::to_string(ndim) + " dimensions");
  }
  e.shape.resize(ndim);
  uint64_t numel = 1;
  for (int64_t& d : e.shape) {
    d = r.value<int64_t>(what + "'s shape");
    // Bound numel by what is left so neither the product nor the
    // allocation can run away on a corrupt dimension.
    if (d < 0 || (d > 0 && numel > r.remaining() / 4 / static_cast<uint64_t>(d))) {
      fail_corrupt(path, what + " has an impossible dimension " + std::to_string(d));
    }
    numel *= static_cast<uint64_t>(d);
  }
  if (numel > r.remaining() / 4) {
    fail_corrupt(path, what + "'s values run past the end of the data");
  }
  e.values.resize(numel);
  r.bytes(e.values.data(), numel * sizeof(float), what + "'s values");
  return e;
}

void read_body(Reader& r, const std::string& path, Checkpoint& checkpoint) {
  char header[kHeaderSize];
  r.bytes(header, kHeaderSize, "the header");
  const auto meta_length = r.value<uint64_t>("the metadata length");
  std::string text(std::min(meta_length, r.remaining()), '\0');
  r.bytes(text.data(), meta_length, "the metadata");
  checkpoint.meta = parse_meta(path, text);
  const auto count = r.value<uint64_t>("the entry count");
  std::unordered_set<std::string> names;
  for (uint64_t i = 0; i < count; ++i) {
    CheckpointEntry e = read_entry(r, path, i);
    if (!names.insert(e.name).second) fail_corrupt(path, "entry \"" + e.name + "\" appears twice");
    checkpoint.entries.push_back(std::move(e));
  }
  if (r.remaining() != 0) {
    fail_corrupt(path, std::to_string(r.remaining()) + " unexpected bytes after the last entry");
  }
}

// ---------------------------------------------------------------------------
// Run directory

struct StoredCheckpoint {
  int64_t epoch;
  int64_t step;
  std::string path;
};

constexpr std::string_view kNamePrefix = "checkpoint-epoch";
constexpr std::string_view kNameStep = "-step";
constexpr std::string_view kNameSuffix = ".lsck";
constexpr std::string_view kTempMarker = ".tmp.";

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

bool is_stale_temporary(std::string_view tail) {
  if (!tail.starts_with(kTempMarker)) return false;
  int64_t pid = 0;
  const auto rest = parse_number(tail.substr(kTempMarker.size()), pid);
  return rest && rest->empty() && pid != static_cast<int64_t>(::getpid());
}

// Header, size and end marker agree (no full CRC: that is load's job).
bool looks_complete(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const auto size = static_cast<uint64_t>(st.st_size);
  char header[kHeaderSize];
  const uint64_t n = read_at(fd.get(), header, kHeaderSize, 0);
  if (!header_problem(path, header, n, size).empty()) return false;
  char end[sizeof(kEndMagic)];
  return read_at(fd.get(), end, sizeof(end), size - sizeof(end)) == sizeof(end) &&
         std::memcmp(end, kEndMagic, sizeof(end)) == 0;
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

// ---------------------------------------------------------------------------

const CheckpointEntry* Checkpoint::find(const std::string& name) const {
  for (const CheckpointEntry& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void Checkpoint::add(std::string name, const nn::Tensor& tensor) {
  LOCKSTEP_CHECK(find(name) == nullptr, "checkpoint entry \"", name, "\" added twice");
  LOCKSTEP_CHECK(tensor.numel() == nn::shape_numel(tensor.shape()), "tensor \"", name,
                 "\" is unallocated");
  CheckpointEntry e{std::move(name), tensor.shape(), {}};
  if (tensor.device() == nn::Device::kCpu) {
    e.values.assign(tensor.span().begin(), tensor.span().end());
  } else {
    nn::Tensor host(tensor.shape(), nn::Device::kCpu);
    host.copy_from(tensor);
    e.values.assign(host.span().begin(), host.span().end());
  }
  entries.push_back(std::move(e));
}

Checkpoint make_checkpoint(nlohmann::json meta, const std::vector<NamedTensor>& tensors) {
  Checkpoint checkpoint;
  checkpoint.meta = std::move(meta);
  checkpoint.entries.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    LOCKSTEP_CHECK(tensor != nullptr, "tensor \"", name, "\" is null");
    checkpoint.add(name, *tensor);
  }
  return checkpoint;
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                     const SaveOptions& options) {
  check_writable(checkpoint);
  // Invalid UTF-8 in a string (a class name, say) is replaced, not fatal.
  const std::string meta_text =
      checkpoint.meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint64_t size = encoded_size(checkpoint, meta_text);
  const std::string temp = path + std::string(kTempMarker) + std::to_string(::getpid());
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    const int err = errno;
    fail_input("cannot write checkpoint ", path, ": creating ", temp, " failed: ", errno_text(err),
               "; check that the directory exists and is writable");
  }
  try {
    Writer writer(fd.get(), path, options.fail_after_bytes);
    write_body(writer, checkpoint, meta_text, size);
    if (::fsync(fd.get()) != 0) {
      const int err = errno;
      fail_input("cannot write checkpoint ", path, ": fsync failed: ", errno_text(err),
                 "; the previous checkpoint is kept");
    }
    if (const int err = fd.close(); err != 0) {
      fail_input("cannot write checkpoint ", path, ": close failed: ", errno_text(err),
                 "; the previous checkpoint is kept");
    }
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      fail_input("cannot write checkpoint ", path, ": renaming ", temp,
                 " over it failed: ", errno_text(err), "; the previous checkpoint is kept");
    }
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  const std::string dir = fs::path(path).parent_path().string();
  sync_directory(dir.empty() ? "." : dir, path);
}

Checkpoint load_checkpoint(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) {
      fail_input("checkpoint ", path,
                 " does not exist; check the path (--resume auto picks the "
                 "newest checkpoint of the run directory)");
    }
    fail_input("cannot open checkpoint ", path, ": ", errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    const int err = errno;
    fail_input("cannot stat checkpoint ", path, ": ", errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    fail_input("checkpoint ", path, " is not a regular file; pass a .lsck file");
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  char header[kHeaderSize];
  const uint64_t n = read_at(fd.get(), header, kHeaderSize, 0);
  if (std::string problem = header_problem(path, header, n, size); !problem.empty()) {
    throw InputError(problem);
  }
  char trailer[kTrailerSize];
  if (read_at(fd.get(), trailer, kTrailerSize, size - kTrailerSize) != kTrailerSize) {
    fail_input("checkpoint ", path, " is truncated: its trailer could not be read");
  }
  if (std::memcmp(trailer + 4, kEndMagic, sizeof(kEndMagic)) != 0) {
    fail_corrupt(path, "its end marker \"LSCK-END\" is missing");
  }
  // Parse first, but let a CRC mismatch explain any parse failure: a flipped
  // bit is reported as corruption, not as whatever it happened to break.
  Checkpoint checkpoint;
  Reader reader(fd.get(), path, size - kTrailerSize);
  std::exception_ptr parse_error;
  try {
    read_body(reader, path, checkpoint);
  } catch (const InputError&) {
    parse_error = std::current_exception();
  }
  reader.drain();
  const auto stored = load_le<uint32_t>(trailer);
  if (reader.crc() != stored) {
    char detail[96];
    std::snprintf(detail, sizeof(detail), "CRC-32 mismatch (stored %08x, computed %08x)", stored,
                  reader.crc());
    fail_corrupt(path, detail);
  }
  if (parse_error) std::rethrow_exception(parse_error);
  return checkpoint;
}

void restore_tensors(const Checkpoint& checkpoint, const std::string& path,
                     const std::vector<NamedTensor>& targets) {
  std::unordered_map<std::string_view, const CheckpointEntry*> entries;
  for (const CheckpointEntry& e : checkpoint.entries) entries.emplace(e.name, &e);
  std::unordered_set<std::string_view> wanted;
  std::vector<std::string> problems;
  for (const auto& [name, tensor] : targets) {
    LOCKSTEP_CHECK(tensor != nullptr, "restore target \"", name, "\" is null");
    LOCKSTEP_CHECK(wanted.insert(name).second, "restore target \"", name, "\" listed twice");
    const auto it = entries.find(name);
    if (it == entries.end()) {
      problems.push_back("has no entry \"" + name + "\" (this model has it with shape " +
                         nn::shape_string(tensor->shape()) + ")");
    } else if (it->second->shape != tensor->shape()) {
      problems.push_back("has entry \"" + name + "\" with shape " +
                         nn::shape_string(it->second->shape) + ", this model expects " +
                         nn::shape_string(tensor->shape()));
    }
  }
  for (const CheckpointEntry& e : checkpoint.entries) {
    if (!wanted.contains(e.name)) {
      problems.push_back("has entry \"" + e.name + "\" with shape " + nn::shape_string(e.shape) +
                         " that this model does not have");
    }
  }
  if (!problems.empty()) {
    const auto model = checkpoint.meta.find("model");
    const std::string saved_from =
        model != checkpoint.meta.end() && model->is_string()
            ? " (it was saved from model \"" + model->get<std::string>() + "\")"
            : "";
    const std::string more =
        problems.size() > 1 ? " (and " + std::to_string(problems.size() - 1) +
                                  (problems.size() > 2 ? " more differences)" : " more difference)")
                            : "";
    fail_input("checkpoint ", path, " does not match this model: it ", problems.front(), more,
               saved_from, "; resume with the model and optimizer it was saved with");
  }
  for (const auto& [name, tensor] : targets) {
    const CheckpointEntry& e = *entries.at(name);
    if (tensor->device() == nn::Device::kCpu) {
      std::copy(e.values.begin(), e.values.end(), tensor->span().begin());
    } else {
      nn::Tensor host(e.shape, nn::Device::kCpu);
      std::copy(e.values.begin(), e.values.end(), host.span().begin());
      tensor->copy_from(host);
    }
  }
}

// ---------------------------------------------------------------------------

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
  fs::create_directories(dir_, ec);
  if (ec) {
    fail_input("cannot create checkpoint directory ", dir_, ": ", ec.message(),
               "; choose a writable checkpoint directory");
  }
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

std::string CheckpointStore::latest() const {
  const std::vector<StoredCheckpoint> all = scan(dir_, /*complete_only=*/false);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    if (looks_complete(it->path)) return it->path;
  }
  return "";
}

}  // namespace lockstep::app
