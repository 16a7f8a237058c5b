// Writing a checkpoint file (layout in checkpoint.h) through a
// data::AtomicFile: a temporary in the same directory, fsync, rename over
// the target, fsync the directory.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <unordered_set>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/checkpoint_format.h"
#include "common/error.h"
#include "data/atomic_file.h"

namespace lockstep::app {

using namespace checkpoint_detail;

namespace {
namespace fs = std::filesystem;

// Temporaries "<file>.tmp.<pid>" of writers of file that crashed, beside it
// (for a link, beside the file it points to, where they were written).
void remove_stale_temporaries(const std::string& file) {
  const fs::path path = file;
  const std::string name = path.filename().string();
  std::error_code ec;
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const std::string other = item.path().filename().string();
    if (other.starts_with(name) && is_stale_temporary(std::string_view(other).substr(name.size())))
      fs::remove(item.path(), ec);
  }
}

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

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                     const SaveOptions& options) {
  check_writable(checkpoint);
  // Invalid UTF-8 in a string (a class name, say) is replaced, not fatal.
  const std::string meta_text =
      checkpoint.meta.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint64_t size = encoded_size(checkpoint, meta_text);
  // A symbolic link (a run's checkpoint kept on another file system) stays
  // one: the file it points to is replaced, through a temporary beside it.
  const data::ReplaceTarget target = data::replace_target(path);
  if (target.in_place) {
    fail_input("cannot write checkpoint ", path,
               ": it is a device or pipe, not a file; name a file for the checkpoint");
  }
  remove_stale_temporaries(target.path);
  data::AtomicFile file(target.path,
                        target.path + std::string(kTempMarker) + std::to_string(::getpid()),
                        "checkpoint");
  Writer writer(file.fd(), path, options.fail_after_bytes);
  write_body(writer, checkpoint, meta_text, size);
  file.commit(/*sync=*/true);
}

}  // namespace lockstep::app
