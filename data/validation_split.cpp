#include "data/validation_split.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "nn/counter_rng.h"

namespace lockstep::data {

Split stratified_split(const std::vector<int32_t>& labels, int64_t classes, double fraction,
                       uint64_t seed) {
  LOCKSTEP_CHECK(fraction >= 0.0 && fraction < 1.0, "validation fraction ", fraction);
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(classes));
  for (size_t i = 0; i < labels.size(); ++i) {
    LOCKSTEP_CHECK(labels[i] >= 0 && labels[i] < classes, "label ", labels[i]);
    by_class[static_cast<size_t>(labels[i])].push_back(static_cast<int64_t>(i));
  }
  std::vector<char> in_validation(labels.size(), 0);
  const uint64_t key = nn::hash_combine(seed, 0x76616c6964ULL);  // "valid"
  for (std::vector<int64_t>& ids : by_class) {
    const auto n = static_cast<int64_t>(ids.size());
    int64_t take = std::llround(fraction * static_cast<double>(n));
    if (fraction > 0 && take == 0 && n >= 2) take = 1;
    take = std::min(take, n - 1 < 0 ? 0 : n - 1);  // keep one for training
    std::stable_sort(ids.begin(), ids.end(), [key](int64_t a, int64_t b) {
      return nn::hash_combine(key, static_cast<uint64_t>(a)) <
             nn::hash_combine(key, static_cast<uint64_t>(b));
    });
    for (int64_t k = 0; k < take; ++k) in_validation[static_cast<size_t>(ids[k])] = 1;
  }
  Split s;
  for (size_t i = 0; i < labels.size(); ++i)
    (in_validation[i] ? s.validation : s.train).push_back(static_cast<int64_t>(i));
  return s;
}

Dataset split_off_validation(Dataset& train, double fraction, uint64_t seed) {
  const Split s = stratified_split(train.labels, train.num_classes, fraction, seed);
  Dataset validation = train.select(s.validation);
  validation.name += "/validation";
  train = train.select(s.train);
  return validation;
}

}  // namespace lockstep::data
