#include "distributed/fingerprint.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include "common/error.h"

namespace lockstep::distributed {

namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

void hash_bytes(uint64_t& hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * kFnvPrime;
}

void hash_string(uint64_t& hash, const std::string& s) {
  const uint64_t length = s.size();
  hash_bytes(hash, &length, sizeof(length));
  hash_bytes(hash, s.data(), s.size());
}

// Length-prefixed keys and values, for the rare exchange after a mismatch.
void put_string(std::string& out, const std::string& s) {
  const uint64_t length = s.size();
  out.append(reinterpret_cast<const char*>(&length), sizeof(length));
  out.append(s);
}

std::string serialize(const FingerprintItems& items) {
  std::string out;
  for (const auto& [key, value] : items) {
    put_string(out, key);
    put_string(out, value);
  }
  return out;
}

FingerprintItems deserialize(std::string_view in) {
  FingerprintItems items;
  auto take = [&in]() {
    uint64_t length = 0;
    LOCKSTEP_CHECK(in.size() >= sizeof(length), "fingerprint record truncated");
    std::memcpy(&length, in.data(), sizeof(length));
    in.remove_prefix(sizeof(length));
    LOCKSTEP_CHECK(in.size() >= length, "fingerprint record truncated");
    std::string s(in.substr(0, length));
    in.remove_prefix(length);
    return s;
  };
  while (!in.empty()) {
    std::string key = take();
    std::string value = take();
    items.emplace_back(std::move(key), std::move(value));
  }
  return items;
}

struct Summary {
  uint64_t hash;
  int64_t count;
  int64_t bytes;
};

std::string shorten(const std::string& value) {
  constexpr size_t kMax = 80;
  if (value.empty()) return "\"\"";
  if (value.size() <= kMax) return value;
  return value.substr(0, kMax) + "...";
}

// "rank 0 has 64, ranks 1-2 have 32": per-rank values (nullopt: no such
// item), grouped by value in order of their first rank.
std::string describe_values(const std::vector<std::optional<std::string>>& values) {
  std::vector<std::pair<std::optional<std::string>, std::vector<int>>> groups;
  for (size_t r = 0; r < values.size(); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == values[r]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {values[r], {}});
    it->second.push_back(static_cast<int>(r));
  }
  constexpr size_t kMaxGroups = 4;
  std::ostringstream out;
  for (size_t g = 0; g < std::min(groups.size(), kMaxGroups); ++g) {
    const auto& [value, ranks] = groups[g];
    if (g > 0) out << ", ";
    out << (ranks.size() == 1 ? "rank " : "ranks ") << format_rank_list(ranks)
        << (ranks.size() == 1 ? " has " : " have ") << (value ? shorten(*value) : "no such item");
  }
  if (groups.size() > kMaxGroups) out << ", and " << groups.size() - kMaxGroups << " more values";
  return out.str();
}

}  // namespace

std::string describe_fingerprint_difference(const std::vector<FingerprintItems>& lists) {
  const std::string hint = " (start every rank with the same config and data)";
  size_t longest = 0;
  for (const auto& list : lists) longest = std::max(longest, list.size());
  for (size_t i = 0; i < longest; ++i) {
    bool same = true;
    for (const auto& list : lists) {
      same = same && i < list.size() && i < lists[0].size() && list[i] == lists[0][i];
    }
    if (same) continue;
    // The keys at the first differing position, in rank order: report the
    // first whose value (looked up by key anywhere in each list) differs.
    std::vector<std::string> keys;
    for (const auto& list : lists) {
      if (i < list.size() && std::find(keys.begin(), keys.end(), list[i].first) == keys.end()) {
        keys.push_back(list[i].first);
      }
    }
    for (const std::string& key : keys) {
      std::vector<std::optional<std::string>> values;
      for (const auto& list : lists) {
        auto it = std::find_if(list.begin(), list.end(),
                               [&](const auto& item) { return item.first == key; });
        values.push_back(it == list.end() ? std::nullopt : std::optional(it->second));
      }
      if (std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) != values.end()) {
        return "ranks disagree on " + key + ": " + describe_values(values) + hint;
      }
    }
    std::vector<std::optional<std::string>> at_i;
    for (const auto& list : lists) {
      at_i.push_back(i < list.size() ? std::optional(list[i].first) : std::nullopt);
    }
    return detail::concat("ranks list the same items in different orders: at item ", i + 1, ", ",
                          describe_values(at_i), hint);
  }
  return "ranks disagree on the fingerprint but their items compare equal (lockstep bug)";
}

uint64_t fingerprint_hash(const FingerprintItems& items) {
  uint64_t hash = kFnvOffset;
  const uint64_t count = items.size();
  hash_bytes(hash, &count, sizeof(count));
  for (const auto& [key, value] : items) {
    hash_string(hash, key);
    hash_string(hash, value);
  }
  return hash;
}

void check_same_fingerprint(Communicator& comm, const FingerprintItems& items) {
  const std::string mine = serialize(items);
  const Summary summary{fingerprint_hash(items), static_cast<int64_t>(items.size()),
                        static_cast<int64_t>(mine.size())};
  const std::vector<Summary> all = comm.allgather_value(summary);
  const bool same = std::all_of(all.begin(), all.end(), [&](const Summary& s) {
    return s.hash == all[0].hash && s.count == all[0].count && s.bytes == all[0].bytes;
  });
  if (same) return;

  // Every rank learned of the mismatch from the same data: exchange the
  // lists (each padded to the longest) and name the first difference.
  int64_t longest = 0;
  for (const Summary& s : all) longest = std::max(longest, s.bytes);
  const size_t block = static_cast<size_t>(longest);
  std::vector<std::byte> padded(block);
  if (!mine.empty()) std::memcpy(padded.data(), mine.data(), mine.size());
  std::vector<std::byte> gathered(block * all.size());
  comm.allgather(padded, gathered);
  std::vector<FingerprintItems> lists;
  for (size_t r = 0; r < all.size(); ++r) {
    const char* start = reinterpret_cast<const char*>(gathered.data()) + r * block;
    lists.push_back(deserialize(std::string_view(start, static_cast<size_t>(all[r].bytes))));
  }
  throw DistributedError(describe_fingerprint_difference(lists));
}

}  // namespace lockstep::distributed
