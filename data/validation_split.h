// A validation split taken from a training set: deterministic (a pure
// function of the labels, the fraction and the seed, so every rank computes
// the same split), stratified (each class gives round(fraction * its
// count) samples, at least one when it has two or more and fraction > 0),
// and disjoint from what remains for training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep::data {

struct Split {
  std::vector<int64_t> train, validation;  // dataset indices, ascending, disjoint
};

// Within each class the samples with the smallest hash of (seed, index) go
// to validation. fraction in [0, 1).
Split stratified_split(const std::vector<int32_t>& labels, int64_t classes, double fraction,
                       uint64_t seed);

// Moves the validation samples of stratified_split(train, fraction, seed)
// out of train into the returned set (named "<train name>/validation").
Dataset split_off_validation(Dataset& train, double fraction, uint64_t seed);

}  // namespace lockstep::data
