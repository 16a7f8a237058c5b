// Checkpoints: named float32 tensors (weights, optimizer state) plus JSON
// metadata (epoch, step, RNG and sampler state, config, model, dataset, ...),
// in one self-checking binary file that is replaced atomically.
//
// File layout (little-endian; version 1):
//   offset 0   "LOCKSTEP"                 8 bytes, magic
//          8   format version             u32
//         12   file size in bytes         u64 (the whole file, trailer included)
//         20   CRC-32 of bytes [0, 20)    u32 (the header alone)
//         24   metadata length            u64, then that many bytes of UTF-8 JSON (an object)
//              entry count                u64, then per entry:
//                name length              u32, then the name (UTF-8, unique, non-empty)
//                ndim                     u32 (at most kMaxCheckpointDims)
//                dims                     ndim x i64 (each >= 0)
//                values                   prod(dims) x f32
//   size - 12  CRC-32 (zlib) of bytes [0, size - 12)   u32
//   size - 8   "LSCK-END"                 8 bytes, end magic
//
// The model-agnostic part is Checkpoint / save / load; restore_tensors() maps
// entries back onto a model's tensors by name and refuses any difference in
// names or shapes before it changes anything. CheckpointStore manages a run
// directory of numbered checkpoints for `--resume auto`.
//
// Sources: checkpoint.cpp (Checkpoint, restore_tensors), checkpoint_write.cpp
// (save_checkpoint), checkpoint_read.cpp (load_checkpoint),
// checkpoint_store.cpp (CheckpointStore); checkpoint_format.h holds what
// they share of the layout (constants, CRC-32, header checks).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/tensor.h"

namespace lockstep::app {

inline constexpr uint32_t kCheckpointFormatVersion = 1;
inline constexpr uint32_t kMaxCheckpointDims = 16;

// A tensor to save from or restore into, named like PyTorch's state_dict
// ("conv1.weight", "conv1.weight.momentum_buffer"). Either device.
using NamedTensor = std::pair<std::string, nn::Tensor*>;

struct CheckpointEntry {
  std::string name;
  nn::Shape shape;
  std::vector<float> values;  // shape_numel(shape) values, row-major
};

struct Checkpoint {
  nlohmann::json meta = nlohmann::json::object();  // must be an object
  std::vector<CheckpointEntry> entries;            // in the order they were added

  // The entry with this name, or nullptr.
  const CheckpointEntry* find(const std::string& name) const;
  // Appends a copy of tensor's values (a device tensor is copied to the host
  // first). A name already present is a caller bug (internal check).
  void add(std::string name, const nn::Tensor& tensor);
};

// Copies every tensor (in order) into a new checkpoint with this metadata.
Checkpoint make_checkpoint(nlohmann::json meta, const std::vector<NamedTensor>& tensors);

// Options of save_checkpoint(). Tests use the fault to prove atomicity.
struct SaveOptions {
  // When >= 0: the write fails like a full disk (ENOSPC) once this many bytes
  // of the temporary file have been written.
  int64_t fail_after_bytes = -1;
};

// Writes checkpoint to path atomically: to "<path>.tmp.<pid>" in the same
// directory, fsync, rename over path, fsync the directory. On any failure
// the temporary file is removed, a previous file at path is left untouched,
// and InputError names path, the cause and the remedy. Temporaries of
// crashed writers of the same file (other pids) are removed first. A device
// or pipe at path is refused.
void save_checkpoint(const std::string& path, const Checkpoint& checkpoint,
                     const SaveOptions& options = {});

// Reads and validates path (magic, version, size, CRC-32, JSON, every entry).
// Throws InputError naming path when it is missing, truncated, not a
// checkpoint, of an unsupported version, corrupt or malformed.
Checkpoint load_checkpoint(const std::string& path);

// Copies the entries into targets (matched by name, either device). Refuses,
// with an InputError naming path, the entry and both shapes, any target
// without an entry, any entry without a target, and any shape mismatch; all
// of it is checked before any target is modified. path is only used in
// messages (the file the checkpoint came from).
void restore_tensors(const Checkpoint& checkpoint, const std::string& path,
                     const std::vector<NamedTensor>& targets);

// A run directory of numbered checkpoints
// ("checkpoint-epoch0003-step00000360.lsck"), newest by (epoch, step).
class CheckpointStore {
 public:
  // keep_last: how many checkpoints save() keeps (0 = all). The directory is
  // created by the first save().
  CheckpointStore(std::string dir, int keep_last);

  // Writes checkpoint atomically under its numbered name (replacing one with
  // the same epoch and step), then removes temporaries left by crashed
  // writers and prunes all but the newest keep_last checkpoints (never the
  // one just written). Returns the path written.
  std::string save(int64_t epoch, int64_t step, const Checkpoint& checkpoint,
                   const SaveOptions& options = {});

  // Path of the newest complete checkpoint (its header, size and end marker
  // are checked; the full CRC is left to load_checkpoint), or "" when there
  // is none or the directory does not exist. Temporaries are ignored.
  std::string latest() const;
  // Paths of every complete checkpoint, oldest first.
  std::vector<std::string> list() const;
  // Paths of every numbered checkpoint, complete or not, oldest first.
  std::vector<std::string> numbered() const;
  // Those named after (epoch, step): written by a run that went on past it.
  std::vector<std::string> numbered_after(int64_t epoch, int64_t step) const;

  const std::string& dir() const { return dir_; }
  // "checkpoint-epoch0003-step00000360.lsck"
  static std::string file_name(int64_t epoch, int64_t step);

 private:
  std::string dir_;
  int keep_last_;
};

}  // namespace lockstep::app
