// AtomicFile: replaces a file so that a reader sees the old content or the
// new one, never a part. The bytes go to a temporary file beside the target;
// commit() syncs it (when asked), closes it and renames it over the target,
// then syncs the folder. Destroyed without commit() (an error, an
// exception), it removes the temporary and the target is untouched. Serves
// checkpoints (app/checkpoint/checkpoint_write.cpp), images, caches and exports.
//
// Errors: InputError "cannot write <what> <path>: <step> failed: <reason>;
// <remedy>", the previous file being kept wherever the rename has not
// happened. One object per file; not shared between threads.
#pragma once

#include <cstddef>
#include <string>

namespace lockstep::data {

class AtomicFile {
 public:
  // Creates `temp` (a name in path's folder, unique to this writer). what:
  // the kind of file for messages ("checkpoint", "file").
  AtomicFile(std::string path, std::string temp, std::string what);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // The temporary's descriptor, for writers of their own (checkpoints).
  int fd() const { return fd_; }
  // Writes all n bytes (EINTR retried).
  void write(const void* data, size_t n);
  // With sync, fsync the file before the rename and its folder after it (a
  // folder that cannot be synced, EINVAL, is accepted).
  void commit(bool sync);

 private:
  [[noreturn]] void fail(const char* step, int err, const char* remedy) const;

  std::string path_, temp_, what_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes all n bytes to fd, retrying EINTR and short writes: 0, or the
// errno of the failure (EIO for a write that took nothing).
int write_fully(int fd, const void* data, size_t n);

// How a writer replaces `path`, decided for every writer here (checkpoints,
// write_file_atomically): the regular file to replace, so that a symbolic
// link at path stays a link (the file it points to, links followed; a
// dangling link's target, to be created; path itself when it is no link or
// its target cannot be resolved), or in_place for an existing device or
// pipe (/dev/null, /dev/stdout), to be written into, never replaced. A
// folder is an InputError "cannot write <path>: it is a folder".
struct ReplaceTarget {
  std::string path;
  bool in_place = false;
};
ReplaceTarget replace_target(const std::string& path);

// Creates folder `path` and any missing parents, then syncs the folder
// above each one it made, so that the new entries survive a crash (as
// AtomicFile::commit's rename does). Errors: InputError "cannot create
// <what> <path>: <reason>; <remedy>".
void create_folders_durably(const std::string& path, const std::string& what,
                            const std::string& remedy);

}  // namespace lockstep::data
