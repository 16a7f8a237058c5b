// Whole-file reading for the dataset readers: raw files and gzip files
// (detected by their 1f 8b magic, not by name) come back as the same bytes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace lockstep::data {

// The (decompressed) contents of path. Throws InputError naming path when it
// cannot be opened or read, or when a gzip stream is damaged or cut short.
std::vector<uint8_t> read_whole_file(const std::string& path);

// True when path names an existing regular file (or a link to one).
bool is_regular_file(const std::string& path);

// Joins a folder and a file name with one '/'.
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace lockstep::data
