// A validation split taken from a training set: deterministic (a pure
// function of the labels, the fraction and the seed, so every rank computes
// the same split), round(fraction * size) samples in all (not at least one
// per class: a small fraction holds out its share), stratified (each class
// gives its share of them, the round-off to the largest remainders, ties to
// the lower label, but keeps one sample for training; what a class cannot
// give goes to the others, so fewer are held out only when every class is
// down to one), and disjoint from what remains for training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace lockstep::data {

struct Split {
  std::vector<int64_t> train, validation;  // dataset indices, ascending, disjoint
  std::vector<int64_t> class_sizes;        // samples of each class before the split
};

// How many samples of each class (class_sizes[c] of class c) the split
// holds out (see above). fraction in [0, 1).
std::vector<int64_t> validation_counts(const std::vector<int64_t>& class_sizes, double fraction);

// validation_counts() of each class; within a class the samples with the
// smallest hash of (seed, index) go to validation.
Split stratified_split(const std::vector<int32_t>& labels, int64_t classes, double fraction,
                       uint64_t seed);

// Moves split's validation samples (a stratified_split of train's labels)
// out of train into the returned set (named "<train name>/validation").
Dataset split_off_validation(Dataset& train, const Split& split);
// The same for stratified_split(train's labels, fraction, seed).
Dataset split_off_validation(Dataset& train, double fraction, uint64_t seed);

}  // namespace lockstep::data
