#include "app/checkpoint/checkpoint_format.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <system_error>

#include "app/checkpoint/checkpoint.h"
#include "common/error.h"

namespace lockstep::app::checkpoint_detail {

bool is_stale_temporary(std::string_view tail) {
  if (!tail.starts_with(kTempMarker)) return false;
  const std::string_view digits = tail.substr(kTempMarker.size());
  int64_t pid = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
  return ec == std::errc() && !digits.empty() && digits.front() != '-' && digits.front() != '+' &&
         end == digits.data() + digits.size() && pid != static_cast<int64_t>(::getpid());
}

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

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::close() {
  const int fd = fd_;
  fd_ = -1;
  return ::close(fd) == 0 ? 0 : errno;
}

void fail_corrupt(const std::string& path, const std::string& detail) {
  fail_input("checkpoint ", path, " is corrupt: ", detail,
             "; use an earlier checkpoint (or copy this one again)");
}

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

}  // namespace lockstep::app::checkpoint_detail
