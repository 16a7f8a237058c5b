// safetensors files (the format of Hugging Face's `safetensors` library,
// which PyTorch users save state_dicts in):
//
//   u64 little-endian N, then N bytes of JSON (padded with spaces to a
//   multiple of 8), then the tensor bytes:
//   {"__metadata__": {"key": "string", ...},
//    "conv1.weight": {"dtype": "F32", "shape": [10, 1, 5, 5], "data_offsets": [0, 1000]}, ...}
//   data_offsets are [begin, end) relative to the byte after the header; the
//   tensors cover that region exactly, without gaps or overlap. Values are
//   row-major and little-endian.
//
// lockstep holds float32 values: reading converts F16, BF16, F64, I64, I32
// and U8 tensors to float32; writing writes F32, or I64 for the entries
// named in `int64_names` (PyTorch's integer buffers such as
// "bn1.num_batches_tracked").
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "app/checkpoint/checkpoint.h"

namespace lockstep::app {

struct SafetensorsFile {
  std::map<std::string, std::string> metadata;  // "__metadata__" (string values only)
  std::vector<CheckpointEntry> tensors;         // in file order (by data offset)
};

// Writes file atomically (temporary file, fsync, rename). Tensor names must
// be unique and non-empty. Throws InputError naming path when it cannot be
// written.
void save_safetensors(const std::string& path, const SafetensorsFile& file,
                      const std::set<std::string>& int64_names = {});

// Reads and checks path (header length, JSON, dtypes, shapes against byte
// counts, offsets inside the file and covering the data exactly). Throws
// InputError naming path and the tensor at fault.
SafetensorsFile load_safetensors(const std::string& path);

// IEEE half and bfloat16 bit patterns to float (exact).
float half_to_float(uint16_t bits);
float bfloat16_to_float(uint16_t bits);

}  // namespace lockstep::app
