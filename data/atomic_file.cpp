#include "data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "common/error.h"

namespace lockstep::data {
namespace {

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string temp, std::string what)
    : path_(std::move(path)), temp_(std::move(temp)), what_(std::move(what)) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int err = errno;
    fail_input("cannot write ", what_, " ", path_, ": creating ", temp_,
               " failed: ", errno_text(err), "; check that the directory exists and is writable");
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const char* step, int err, const char* remedy) const {
  fail_input("cannot write ", what_, " ", path_, ": ", step, " failed: ", errno_text(err),
             "; the previous ", what_, " is kept", remedy);
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd_, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) fail("write", put < 0 ? errno : EIO, "; free disk space or write elsewhere");
    p += put;
    n -= static_cast<size_t>(put);
    written_ += static_cast<size_t>(put);
  }
}

void AtomicFile::commit(bool sync) {
  if (sync && ::fsync(fd_) != 0) fail("fsync", errno, "");
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("close", errno, "");  // NFS reports late errors here
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    fail_input("cannot write ", what_, " ", path_, ": renaming ", temp_,
               " over it failed: ", errno_text(err), "; the previous ", what_, " is kept");
  }
  committed_ = true;
  if (!sync) return;
  std::filesystem::path dir = std::filesystem::path(path_).parent_path();
  if (dir.empty()) dir = std::filesystem::path(".");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int err = dir_fd < 0 || ::fsync(dir_fd) != 0 ? errno : 0;
  if (dir_fd >= 0) ::close(dir_fd);
  if (err != 0 && err != EINVAL) {
    fail_input(what_, " ", path_, " was written but its directory ", dir.string(),
               " could not be synced: ", errno_text(err),
               "; check the file system before trusting this ", what_);
  }
}

}  // namespace lockstep::data
