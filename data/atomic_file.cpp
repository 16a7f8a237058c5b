#include "data/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "common/error.h"

namespace lockstep::data {
namespace {

// The folder holding path ("." for a bare name).
std::filesystem::path folder_of(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  return dir.empty() ? std::filesystem::path(".") : dir;
}

// fsync of a folder: 0, or the errno (a folder that cannot be synced,
// EINVAL, counts as done).
int sync_folder(const std::filesystem::path& dir) {
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const int err = dir_fd < 0 || ::fsync(dir_fd) != 0 ? errno : 0;
  if (dir_fd >= 0) ::close(dir_fd);
  return err == EINVAL ? 0 : err;
}

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

int write_fully(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t put = ::write(fd, p, n);
    if (put < 0 && errno == EINTR) continue;
    if (put <= 0) return put < 0 ? errno : EIO;
    p += put;
    n -= static_cast<size_t>(put);
  }
  return 0;
}

void AtomicFile::write(const void* data, size_t n) {
  if (const int err = write_fully(fd_, data, n); err != 0) {
    fail("write", err, "; free disk space or write elsewhere");
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
  const std::filesystem::path dir = folder_of(path_);
  if (const int err = sync_folder(dir); err != 0) {
    fail_input(what_, " ", path_, " was written but its directory ", dir.string(),
               " could not be synced: ", errno_text(err),
               "; check the file system before trusting this ", what_);
  }
}

namespace {

// replace_target's file for a path that is no device, pipe or folder.
std::string link_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = path;
  // Link by link: weakly_canonical alone stops at a dangling link.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)) && !ec; ++hops) {
    const fs::path to = fs::read_symlink(p, ec);
    if (ec || hops == 40) return path;  // unreadable, or a loop: as if no link
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  if (p == fs::path(path)) return path;
  const fs::path target = fs::weakly_canonical(p, ec);
  return ec ? p.string() : target.string();
}

}  // namespace

ReplaceTarget replace_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);  // links followed, as open() does
  if (!ec && fs::is_directory(status)) fail_input("cannot write ", path, ": it is a folder");
  if (!ec && fs::exists(status) && !fs::is_regular_file(status)) return {path, true};
  return {link_target(path), false};
}

void create_folders_durably(const std::string& path, const std::string& what,
                            const std::string& remedy) {
  namespace fs = std::filesystem;
  std::vector<fs::path> made;  // the folders this call creates, deepest first
  std::error_code ec;
  for (fs::path p = fs::path(path).lexically_normal(); !p.empty() && !fs::exists(p, ec);
       p = p.parent_path()) {
    made.push_back(p);
    if (p == p.parent_path()) break;
  }
  fs::create_directories(path, ec);
  if (ec) fail_input("cannot create ", what, " ", path, ": ", ec.message(), "; ", remedy);
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    const fs::path above = folder_of(it->string());
    if (const int err = sync_folder(above); err != 0) {
      fail_input("created ", what, " ", path, " but could not sync ", above.string(), ": ",
                 errno_text(err), "; check the file system");
    }
  }
}

}  // namespace lockstep::data
