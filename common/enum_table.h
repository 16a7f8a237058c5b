// One table per enumeration, read by every conversion of it: to and from
// names (to_string, parse_*), and to and from a library's constants (MPI,
// NCCL, cuDNN). A table is a constexpr array of {key, value} entries:
//
//   constexpr EnumEntry<ReduceOp, const char*> kReduceOpNames[] = {
//       {ReduceOp::kSum, "sum"}, {ReduceOp::kMax, "max"}};
//   value_of(kReduceOpNames, op).value_or("?");   // "sum"
//   key_of(kReduceOpNames, "max");                // ReduceOp::kMax
//
// Names (const char* values) compare as text.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace lockstep::nn {

template <typename Key, typename Value>
struct EnumEntry {
  Key key;
  Value value;
};

// The value of the first entry for `key`; nothing when there is none.
template <typename Key, typename Value, size_t N>
constexpr std::optional<Value> value_of(const EnumEntry<Key, Value> (&table)[N], Key key) {
  for (const EnumEntry<Key, Value>& entry : table) {
    if (entry.key == key) return entry.value;
  }
  return std::nullopt;
}

// The key of the first entry whose value equals `value`; nothing when there
// is none.
template <typename Key, typename Value, size_t N, typename Probe>
constexpr std::optional<Key> key_of(const EnumEntry<Key, Value> (&table)[N], const Probe& value) {
  for (const EnumEntry<Key, Value>& entry : table) {
    if constexpr (std::is_same_v<Value, const char*>) {
      if (std::string_view(value) == entry.value) return entry.key;
    } else {
      if (value == entry.value) return entry.key;
    }
  }
  return std::nullopt;
}

// "a, b, c": the names of a table, in its order, for messages.
template <typename Key, size_t N>
std::string names_of(const EnumEntry<Key, const char*> (&table)[N], std::string_view separator) {
  std::string out;
  for (const EnumEntry<Key, const char*>& entry : table) {
    if (!out.empty()) out += separator;
    out += entry.value;
  }
  return out;
}

}  // namespace lockstep::nn
