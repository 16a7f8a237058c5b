// Internals shared by the checkpoint reader, writer and run directory
// (checkpoint_read.cpp, checkpoint_write.cpp, checkpoint_store.cpp): the
// constants of the file layout documented in checkpoint.h, CRC-32, an owned
// file descriptor, and the header checks. Not for use outside
// app/checkpoint*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "common/little_endian.h"

namespace lockstep::app::checkpoint_detail {

inline constexpr char kMagic[8] = {'L', 'O', 'C', 'K', 'S', 'T', 'E', 'P'};
inline constexpr char kEndMagic[8] = {'L', 'S', 'C', 'K', '-', 'E', 'N', 'D'};
inline constexpr uint64_t kHeaderSize = 24;   // magic, version, file size, header CRC
inline constexpr uint64_t kTrailerSize = 12;  // CRC, end magic
inline constexpr uint64_t kMinFileSize = kHeaderSize + 8 + 8 + kTrailerSize;  // no meta/entries
inline constexpr uint32_t kMaxNameLength = 4096;
inline constexpr size_t kIoChunk = size_t{1} << 20;
// A writer's temporary is "<path>.tmp.<pid>".
inline constexpr std::string_view kTempMarker = ".tmp.";

// Whether tail (what follows a checkpoint's name) is ".tmp.<pid>" of
// another process than this one: a writer that crashed (or, on a shared
// file system, one that writes the same file at once: a misuse).
bool is_stale_temporary(std::string_view tail);

std::string errno_text(int err);

// zlib's CRC-32 of size bytes, continuing from crc, fed in kIoChunk pieces.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

// Owns a POSIX file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  // Closes now; returns 0 or the errno of close() (NFS reports late errors here).
  int close();

 private:
  int fd_;
};

// Throws InputError: path is corrupt (detail), use an earlier checkpoint.
[[noreturn]] void fail_corrupt(const std::string& path, const std::string& detail);

// Why the first bytes (n of them, of a file of file_size bytes) are not a
// valid version-1 header, or "" when they are.
std::string header_problem(const std::string& path, const char* h, uint64_t n, uint64_t file_size);

// Reads n bytes at offset; returns how many were read (fewer at end of file).
uint64_t read_at(int fd, char* dst, uint64_t n, uint64_t offset);

// Header, size and end marker agree (no full CRC: that is load's job).
bool looks_complete(const std::string& path);

}  // namespace lockstep::app::checkpoint_detail
