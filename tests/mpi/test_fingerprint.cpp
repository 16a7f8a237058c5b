// check_same_fingerprint across ranks: agreement passes; a differing value
// or a differing item count makes every rank throw the same message.
#include <gtest/gtest.h>

#include <string>

#include "common/error.h"
#include "distributed/fingerprint.h"
#include "mpi/mpi_test_util.h"

namespace lockstep::distributed {
namespace {

using testing::make_test_comm;

FingerprintItems base_items() {
  return {{"config.batch_size", "64"},
          {"config.lr", "0.01"},
          {"model.conv1.weight", "(10, 1, 5, 5)"},
          {"dataset.train.size", "60000"}};
}

// The message every rank threw, or "" when it did not throw.
std::string thrown_message(Communicator& comm, const FingerprintItems& items) {
  try {
    check_same_fingerprint(comm, items);
  } catch (const DistributedError& error) {
    return error.what();
  }
  return "";
}

// "ranks 0, 2 have 64" for the ranks other than `odd_one`.
std::string others(int size, int odd_one, const std::string& what) {
  std::vector<int> ranks;
  for (int r = 0; r < size; ++r) {
    if (r != odd_one) ranks.push_back(r);
  }
  return (ranks.size() == 1 ? "rank " : "ranks ") + format_rank_list(ranks) +
         (ranks.size() == 1 ? " has " : " have ") + what;
}

TEST(Fingerprint, IdenticalListsPass) {
  auto comm = make_test_comm();
  EXPECT_NO_THROW(check_same_fingerprint(*comm, base_items()));
  EXPECT_NO_THROW(check_same_fingerprint(*comm, {}));
}

TEST(Fingerprint, DifferingValueOnOneRankFailsOnEveryRank) {
  auto comm = make_test_comm();
  FingerprintItems items = base_items();
  if (comm->rank() == 1) items[0].second = "32";
  // 2 ranks: "rank 0 has 64, rank 1 has 32"; 3: "ranks 0, 2 have 64, rank 1 has 32".
  const std::string want = "ranks disagree on config.batch_size: " + others(comm->size(), 1, "64") +
                           ", rank 1 has 32 (start every rank with the same config and data)";
  if (comm->size() == 2) {
    EXPECT_EQ(want,
              "ranks disagree on config.batch_size: rank 0 has 64, rank 1 has 32 (start every "
              "rank with the same config and data)");
  }
  EXPECT_EQ(thrown_message(*comm, items), want);
  // The communicator is still usable and in step afterwards.
  EXPECT_NO_THROW(check_same_fingerprint(*comm, base_items()));
}

TEST(Fingerprint, DifferingItemCountFailsOnEveryRank) {
  auto comm = make_test_comm();
  FingerprintItems items = base_items();
  const int last = comm->size() - 1;
  if (comm->rank() == last) items.emplace_back("model.fc9.weight", "(10, 50)");
  std::string want =
      "ranks disagree on model.fc9.weight: " + others(comm->size(), last, "no such item") +
      ", rank " + std::to_string(last) +
      " has (10, 50) (start every rank with the same config and data)";
  EXPECT_EQ(thrown_message(*comm, items), want);

  // A missing item in the middle of the list.
  items = base_items();
  if (comm->rank() == 0) items.erase(items.begin() + 1);
  want = "ranks disagree on config.lr: rank 0 has no such item, " +
         others(comm->size(), 0, "0.01") + " (start every rank with the same config and data)";
  EXPECT_EQ(thrown_message(*comm, items), want);
  EXPECT_NO_THROW(check_same_fingerprint(*comm, base_items()));
}

}  // namespace
}  // namespace lockstep::distributed
