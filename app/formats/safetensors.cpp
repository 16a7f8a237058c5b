#include "app/formats/safetensors.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/little_endian.h"
#include "data/image_io.h"

namespace lockstep::app {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // as the reference library

size_t dtype_size(const std::string& dtype) {
  if (dtype == "F64" || dtype == "I64") return 8;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "U8") return 1;
  return 0;
}

// One element of dtype at p as float.
float to_float(const std::string& dtype, const uint8_t* p) {
  if (dtype == "F32") return load_le<float>(p);
  if (dtype == "F64") return static_cast<float>(load_le<double>(p));
  if (dtype == "F16") return half_to_float(load_le<uint16_t>(p));
  if (dtype == "BF16") return bfloat16_to_float(load_le<uint16_t>(p));
  if (dtype == "I64") return static_cast<float>(load_le<int64_t>(p));
  if (dtype == "I32") return static_cast<float>(load_le<int32_t>(p));
  return static_cast<float>(*p);  // U8
}

std::vector<uint8_t> read_raw(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_input(path, ": cannot open safetensors file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) fail_input(path, ": read error");
  return bytes;
}

// info[key] as a list of non-negative integers: a float, a negative number
// or another type is refused, not converted.
std::vector<uint64_t> unsigned_list(const std::string& path, const std::string& name,
                                    const nlohmann::json& info, const char* key) {
  const auto it = info.find(key);
  if (it == info.end() || !it->is_array())
    fail_input(path, ": tensor \"", name, "\" has no ", key, " list");
  std::vector<uint64_t> out;
  for (const nlohmann::json& v : *it) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > uint64_t{INT64_MAX})
      fail_input(path, ": tensor \"", name, "\" has ", key, " ", it->dump(),
                 " (non-negative integers expected)");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

CheckpointEntry read_tensor(const std::string& path, const std::string& name,
                            const nlohmann::json& info, const uint8_t* data, uint64_t data_bytes,
                            std::pair<uint64_t, uint64_t>& range) {
  if (!info.is_object() || !info.contains("dtype") || !info["dtype"].is_string())
    fail_input(path, ": tensor \"", name, "\" has a malformed header entry (no dtype string)");
  const std::string dtype = info["dtype"].get<std::string>();
  const std::vector<uint64_t> dims = unsigned_list(path, name, info, "shape");
  const std::vector<uint64_t> offsets = unsigned_list(path, name, info, "data_offsets");
  if (offsets.size() != 2)
    fail_input(path, ": tensor \"", name, "\" has ", offsets.size(), " data_offsets (2 expected)");
  range = {offsets[0], offsets[1]};
  const size_t size = dtype_size(dtype);
  if (size == 0)
    fail_input(path, ": tensor \"", name, "\" has dtype ", dtype,
               " (supported: F32, F16, BF16, F64, I64, I32, U8)");
  const nn::Shape shape(dims.begin(), dims.end());
  uint64_t numel = 1, bytes = 0;
  bool overflow = false;
  for (uint64_t d : dims) overflow |= __builtin_mul_overflow(numel, d, &numel);
  overflow |= __builtin_mul_overflow(numel, uint64_t{size}, &bytes);
  if (overflow || range.first > range.second || range.second > data_bytes ||
      range.second - range.first != bytes) {
    fail_input(path, ": tensor \"", name, "\" of shape ", nn::shape_string(shape), " and dtype ",
               dtype, " has data_offsets [", range.first, ", ", range.second, "] that do not fit (",
               overflow ? std::string("more than 2^64") : std::to_string(bytes),
               " bytes expected, ", data_bytes, " bytes of data in the file)");
  }
  CheckpointEntry e{name, shape, std::vector<float>(numel)};
  const uint8_t* p = data + range.first;
  for (uint64_t i = 0; i < numel; ++i) e.values[i] = to_float(dtype, p + i * size);
  return e;
}

}  // namespace

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);  // zero and subnormals
  } else if (exp == 31) {
    magnitude =
        mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    magnitude = std::bit_cast<float>(((exp + 112u) << 23) | (mant << 13));
  }
  return std::bit_cast<float>(std::bit_cast<uint32_t>(magnitude) | sign);
}

float bfloat16_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

void save_safetensors(const std::string& path, const SafetensorsFile& file,
                      const std::set<std::string>& int64_names) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const CheckpointEntry& e : file.tensors) {
    LOCKSTEP_CHECK(!e.name.empty() && e.name != "__metadata__" && !header.contains(e.name),
                   "safetensors: bad or repeated tensor name \"", e.name, "\"");
    const bool i64 = int64_names.contains(e.name);
    const uint64_t bytes = e.values.size() * (i64 ? 8 : 4);
    header[e.name] = {{"dtype", i64 ? "I64" : "F32"},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 8, text.data(), text.size());
  uint8_t* p = out.data() + 8 + text.size();
  for (const CheckpointEntry& e : file.tensors) {
    if (int64_names.contains(e.name)) {
      for (float v : e.values) {
        const auto i = static_cast<int64_t>(v);
        std::memcpy(p, &i, 8);
        p += 8;
      }
    } else {
      std::memcpy(p, e.values.data(), e.values.size() * 4);
      p += e.values.size() * 4;
    }
  }
  data::write_file_atomically(path, out);
}

SafetensorsFile load_safetensors(const std::string& path) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  const std::vector<uint8_t> bytes = read_raw(path);
  if (bytes.size() < 8) fail_input(path, ": not a safetensors file (", bytes.size(), " bytes)");
  const uint64_t n = load_le<uint64_t>(bytes.data());
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    fail_input(path, ": not a safetensors file (header length ", n, " for a file of ", bytes.size(),
               " bytes)");
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(n));
  } catch (const nlohmann::json::exception& e) {
    fail_input(path, ": safetensors header is not JSON: ", e.what());
  }
  if (!header.is_object()) fail_input(path, ": safetensors header is not a JSON object");
  SafetensorsFile file;
  const uint8_t* data = bytes.data() + 8 + n;
  const uint64_t data_bytes = bytes.size() - 8 - n;
  std::vector<std::pair<std::pair<uint64_t, uint64_t>, CheckpointEntry>> found;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail_input(path, ": __metadata__ is not a JSON object");
      for (const auto& [k, v] : info.items()) {
        if (!v.is_string()) fail_input(path, ": __metadata__ value of \"", k, "\" is not a string");
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    std::pair<uint64_t, uint64_t> range;
    CheckpointEntry e = read_tensor(path, name, info, data, data_bytes, range);
    found.emplace_back(range, std::move(e));
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  uint64_t end = 0;
  for (auto& [range, e] : found) {
    if (range.first != end)
      fail_input(path, ": tensor \"", e.name, "\" starts at byte ", range.first, " of the data, ",
                 range.first < end ? "overlapping" : "leaving a gap after", " the previous one");
    end = range.second;
    file.tensors.push_back(std::move(e));
  }
  if (end != data_bytes)
    fail_input(path, ": ", data_bytes - end, " bytes after the last tensor (file damaged?)");
  return file;
}

}  // namespace lockstep::app
