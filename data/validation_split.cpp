#include "data/validation_split.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "nn/counter_rng.h"

namespace lockstep::data {
namespace {
__extension__ using Wide = __int128;  // target x class size, exact for any size
}  // namespace

std::vector<int64_t> validation_counts(const std::vector<int64_t>& class_sizes, double fraction) {
  LOCKSTEP_CHECK(fraction >= 0.0 && fraction < 1.0, "validation fraction ", fraction);
  int64_t total = 0;
  for (int64_t n : class_sizes) total += n;
  std::vector<int64_t> take(class_sizes.size(), 0);
  const int64_t target = std::llround(fraction * static_cast<double>(total));
  if (target == 0) return take;
  // Largest-remainder apportionment of target over the classes, exact in
  // integers: class c's share is target * n_c / total.
  std::vector<std::pair<int64_t, size_t>> order;  // (remainder, class), largest first
  int64_t given = 0;
  for (size_t c = 0; c < class_sizes.size(); ++c) {
    const auto share = static_cast<Wide>(target) * class_sizes[c];
    take[c] = static_cast<int64_t>(share / total);
    given += take[c];
    order.emplace_back(static_cast<int64_t>(share % total), c);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < target && k < order.size(); ++k, ++given) ++take[order[k].second];
  // Every class keeps one sample for training; what it cannot give goes,
  // one at a time in the same order, to the classes that can.
  int64_t owed = 0;
  for (size_t c = 0; c < take.size(); ++c) {
    const int64_t most = std::max<int64_t>(class_sizes[c] - 1, 0);
    owed += std::max<int64_t>(take[c] - most, 0);
    take[c] = std::min(take[c], most);
  }
  std::vector<size_t> open;  // classes that can give more, in remainder order
  for (const auto& [remainder, c] : order)
    if (take[c] < class_sizes[c] - 1) open.push_back(c);
  while (owed > 0 && !open.empty()) {
    std::vector<size_t> still_open;
    for (size_t c : open) {
      if (owed == 0) break;
      ++take[c];
      --owed;
      if (take[c] < class_sizes[c] - 1) still_open.push_back(c);
    }
    if (owed > 0) open = std::move(still_open);
  }
  return take;
}

Split stratified_split(const std::vector<int32_t>& labels, int64_t classes, double fraction,
                       uint64_t seed) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    LOCKSTEP_CHECK(labels[i] >= 0 && labels[i] < classes, "label ", labels[i]);
    by_class[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  Split s;
  for (const auto& ids : by_class) s.class_sizes.push_back(static_cast<int64_t>(ids.size()));
  const std::vector<int64_t> take = validation_counts(s.class_sizes, fraction);
  std::vector<char> in_validation(labels.size(), 0);
  const uint64_t key = nn::hash_combine(seed, 0x76616c6964ULL);  // "valid"
  for (size_t c = 0; c < by_class.size(); ++c) {
    std::vector<int64_t>& ids = by_class[c];
    std::stable_sort(ids.begin(), ids.end(), [key](int64_t a, int64_t b) {
      return nn::hash_combine(key, static_cast<uint64_t>(a)) <
             nn::hash_combine(key, static_cast<uint64_t>(b));
    });
    for (int64_t k = 0; k < take[c]; ++k) in_validation[static_cast<size_t>(ids[k])] = 1;
  }
  for (size_t i = 0; i < labels.size(); ++i)
    (in_validation[i] ? s.validation : s.train).push_back(static_cast<int64_t>(i));
  return s;
}

Dataset split_off_validation(Dataset& train, const Split& split) {
  LOCKSTEP_CHECK(split.train.size() + split.validation.size() == train.labels.size(), "split of ",
                 split.train.size() + split.validation.size(), " samples for ",
                 train.labels.size());
  Dataset validation = train.select(split.validation);
  validation.name += "/validation";
  train = train.select(split.train);
  return validation;
}

Dataset split_off_validation(Dataset& train, double fraction, uint64_t seed) {
  return split_off_validation(train,
                              stratified_split(train.labels, train.num_classes, fraction, seed));
}

}  // namespace lockstep::data
