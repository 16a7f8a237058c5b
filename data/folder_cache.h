// The decoded-split cache of image folders (data/image_folder.h): one
// binary file per (split, options) beside the images.
//
//   offset 0  "LSIMGCAC"                      8 bytes, magic
//          8  format version                  u32
//             key length                      u64, then the key bytes: the options and
//                                             every file's relative path, size, mtime
//             channels, height, width         3 x i64
//             samples, files listed           2 x i64
//             class count                     u64, then per class u32 length + name
//             skipped count                   u64, then per file u32 length + message
//             labels                          samples x i32
//             pixels                          samples x C x H x W u8
//   size - 4  CRC-32 (zlib) of every byte before it
//
// Host byte order: a local cache, not an exchange format. A cache of another
// version or key, or a damaged one, is simply not used.
#pragma once

#include <string>

#include "data/image_folder.h"

namespace lockstep::data {

inline constexpr uint32_t kFolderCacheVersion = 1;

// Fills out (dataset and the stats it stores: files, skipped) from path when
// it exists, is intact and holds exactly `key`. Returns false otherwise.
bool read_folder_cache(const std::string& path, const std::string& key, FolderDataset& out);

// Writes data under key to path atomically. Throws InputError naming path.
void write_folder_cache(const std::string& path, const std::string& key, const FolderDataset& data);

}  // namespace lockstep::data
