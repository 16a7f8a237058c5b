#include "data/file_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "common/error.h"

namespace lockstep::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const noexcept { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_or_fail(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) fail_input(path, ": cannot open (", std::strerror(errno), ")");
  return f;
}

std::vector<uint8_t> read_raw(const std::string& path) {
  File f = open_or_fail(path);
  std::vector<uint8_t> bytes;
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) bytes.reserve(static_cast<size_t>(size));
  constexpr size_t kChunk = size_t{1} << 20;
  for (;;) {
    const size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const size_t got = std::fread(bytes.data() + old, 1, kChunk, f.get());
    bytes.resize(old + got);
    if (got < kChunk) break;
  }
  if (std::ferror(f.get())) fail_input(path, ": read error (", std::strerror(errno), ")");
  return bytes;
}

struct GzCloser {
  void operator()(gzFile_s* f) const noexcept { gzclose(f); }
};

std::vector<uint8_t> read_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (!gz) fail_input(path, ": cannot open (", std::strerror(errno), ")");
  gzbuffer(gz.get(), 1u << 18);
  std::vector<uint8_t> bytes;
  constexpr unsigned kChunk = 1u << 20;
  for (;;) {
    const size_t old = bytes.size();
    bytes.resize(old + kChunk);
    const int got = gzread(gz.get(), bytes.data() + old, kChunk);
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(gz.get(), &code);
      fail_input(path, ": damaged gzip stream after ", old, " bytes (zlib: ", message, ")");
    }
    bytes.resize(old + static_cast<size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(gz.get(), &code);
  if (code != Z_OK) {
    fail_input(path, ": gzip stream cut short or damaged after ", bytes.size(),
               " decompressed bytes (zlib: ", message, ")");
  }
  return bytes;
}

}  // namespace

std::vector<uint8_t> read_whole_file(const std::string& path) {
  unsigned char magic[2] = {0, 0};
  size_t got = 0;
  {
    File f = open_or_fail(path);
    got = std::fread(magic, 1, 2, f.get());
  }
  if (got == 2 && magic[0] == 0x1f && magic[1] == 0x8b) return read_gzip(path);
  return read_raw(path);
}

bool is_regular_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return dir + "/" + name;
}

}  // namespace lockstep::data
