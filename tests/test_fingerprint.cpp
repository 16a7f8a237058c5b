// The start-up fingerprint in one process (distributed/fingerprint.h): the
// hash and the message naming the first difference. Across ranks:
// tests/mpi/test_fingerprint.cpp.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "distributed/fingerprint.h"

namespace lockstep::distributed {
namespace {

TEST(Fingerprint, HashSeesEveryKeyValueAndBoundary) {
  const FingerprintItems a = {{"ab", "c"}};
  const FingerprintItems b = {{"a", "bc"}};
  EXPECT_NE(fingerprint_hash(a), fingerprint_hash(b));
  EXPECT_NE(fingerprint_hash({}), fingerprint_hash({{"", ""}}));
  EXPECT_EQ(fingerprint_hash(a), fingerprint_hash(FingerprintItems{{"ab", "c"}}));
}

TEST(Fingerprint, DifferenceNamesTheFirstDifferingItem) {
  const FingerprintItems base = {{"config.batch_size", "64"}, {"config.lr", "0.1"}};
  FingerprintItems other = base;
  other[1].second = "0.2";
  EXPECT_EQ(describe_fingerprint_difference({base, other, base, other}),
            "ranks disagree on config.lr: ranks 0, 2 have 0.1, ranks 1, 3 have 0.2 (start every "
            "rank with the same config and data)");
  FingerprintItems reordered = {base[1], base[0]};
  EXPECT_EQ(describe_fingerprint_difference({base, reordered}),
            "ranks list the same items in different orders: at item 1, rank 0 has "
            "config.batch_size, rank 1 has config.lr (start every rank with the same config and "
            "data)");
  FingerprintItems empty_value = base;
  empty_value[0].second = "";
  EXPECT_EQ(describe_fingerprint_difference({base, empty_value}),
            "ranks disagree on config.batch_size: rank 0 has 64, rank 1 has \"\" (start every "
            "rank with the same config and data)");
  std::vector<FingerprintItems> many;
  for (int r = 0; r < 7; ++r) many.push_back({{"seed", std::to_string(r)}});
  EXPECT_EQ(describe_fingerprint_difference(many),
            "ranks disagree on seed: rank 0 has 0, rank 1 has 1, rank 2 has 2, rank 3 has 3, and "
            "3 more values (start every rank with the same config and data)");
}

}  // namespace
}  // namespace lockstep::distributed
