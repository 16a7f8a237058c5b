// Start-up check that every rank runs the same experiment: same config, same
// model (parameter names and shapes), same data set sizes. Ranks that
// disagree would issue different collectives and hang, or silently train
// different models; this turns that into one clear error on every rank.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "distributed/communicator.h"

namespace lockstep::distributed {

// (key, value) pairs such as ("config.batch_size", "64"),
// ("model.conv1.weight", "(10, 1, 5, 5)"), ("dataset.train.size", "60000").
using FingerprintItems = std::vector<std::pair<std::string, std::string>>;

// 64-bit FNV-1a over the count and the length-prefixed keys and values.
uint64_t fingerprint_hash(const FingerprintItems& items);

// Collective. Returns when every rank passed the same items (in the same
// order). Otherwise every rank throws DistributedError with the same message,
// naming the first item (in list order) where ranks differ and what each
// rank has, e.g.
//   "ranks disagree on config.batch_size: rank 0 has 64, rank 1 has 32
//    (start every rank with the same config and data)".
// Works when ranks pass different numbers of items; costs one small
// allgather when they agree.
void check_same_fingerprint(Communicator& comm, const FingerprintItems& items);

// The message check_same_fingerprint throws, from every rank's list (index =
// rank). Exposed for tests.
std::string describe_fingerprint_difference(const std::vector<FingerprintItems>& lists);

}  // namespace lockstep::distributed
