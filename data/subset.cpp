#include "data/subset.h"

#include <algorithm>
#include <vector>

namespace lockstep::data {

Dataset stratified_subset(const Dataset& dataset, int64_t n) {
  const int64_t total = dataset.size();
  if (n <= 0 || n >= total) return dataset;
  std::vector<std::vector<int64_t>> members(static_cast<size_t>(dataset.num_classes));
  for (int64_t i = 0; i < total; ++i) {
    members[static_cast<size_t>(dataset.labels[static_cast<size_t>(i)])].push_back(i);
  }
  // Largest-remainder apportionment of n over the classes.
  std::vector<int64_t> take(members.size());
  std::vector<std::pair<int64_t, size_t>> remainders;  // (remainder, class)
  int64_t given = 0;
  for (size_t c = 0; c < members.size(); ++c) {
    const int64_t share = n * static_cast<int64_t>(members[c].size());
    take[c] = share / total;
    given += take[c];
    remainders.emplace_back(share % total, c);
  }
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < n && k < remainders.size(); ++k, ++given) {
    ++take[remainders[k].second];
  }
  std::vector<int64_t> chosen;
  for (size_t c = 0; c < members.size(); ++c) {
    const auto count = static_cast<int64_t>(members[c].size());
    for (int64_t j = 0; j < take[c]; ++j) {
      chosen.push_back(members[c][static_cast<size_t>(j * count / take[c])]);
    }
  }
  std::sort(chosen.begin(), chosen.end());
  return dataset.select(chosen);
}

}  // namespace lockstep::data
