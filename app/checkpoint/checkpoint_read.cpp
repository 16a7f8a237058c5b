// Reading and validating a checkpoint file (layout in checkpoint.h): header,
// size, end marker, every entry, and the CRC-32 of it all.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <unordered_set>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/checkpoint_format.h"
#include "common/error.h"

namespace lockstep::app {

using namespace checkpoint_detail;

namespace {

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

}  // namespace

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

}  // namespace lockstep::app
