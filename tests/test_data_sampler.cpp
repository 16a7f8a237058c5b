// DistributedSampler: PyTorch's padding / drop_last / strided sharding, the
// seed+epoch permutation, and the evaluation sharding.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "data/sampler.h"

namespace lockstep::data {
namespace {

std::vector<int64_t> all_ranks(int64_t n, int world, bool shuffle, uint64_t seed, bool drop_last,
                               int64_t epoch, std::vector<int64_t>* per_rank = nullptr) {
  std::vector<int64_t> all;
  for (int r = 0; r < world; ++r) {
    DistributedSampler s(n, r, world, shuffle, seed, drop_last);
    s.set_epoch(epoch);
    if (per_rank) per_rank->push_back(s.num_samples());
    all.insert(all.end(), s.indices().begin(), s.indices().end());
  }
  return all;
}

TEST(SamplerPermutation, IsAPermutationReproducibleAndChangesWithKey) {
  const auto a = permutation(1000, 7);
  std::vector<int64_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  EXPECT_EQ(sorted, iota);
  EXPECT_NE(a, iota);
  EXPECT_EQ(a, permutation(1000, 7));
  EXPECT_NE(a, permutation(1000, 8));
  EXPECT_TRUE(permutation(0, 1).empty());
  EXPECT_EQ(permutation(1, 1), std::vector<int64_t>{0});
}

TEST(SamplerPermutation, FirstPositionIsRoughlyUniform) {
  // Over 2000 keys, each of 10 values lands first about 200 times.
  std::vector<int> counts(10, 0);
  for (uint64_t key = 0; key < 2000; ++key) ++counts[static_cast<size_t>(permutation(10, key)[0])];
  for (int c : counts) {
    EXPECT_GT(c, 140);
    EXPECT_LT(c, 260);
  }
}

TEST(SamplerEpoch, ChangesWithEpochReproducibleAndSameOnAllRanks) {
  DistributedSampler s(100, 0, 1, true, 42);
  const std::vector<int64_t> e0 = s.indices();
  s.set_epoch(1);
  const std::vector<int64_t> e1 = s.indices();
  EXPECT_NE(e0, e1);
  s.set_epoch(0);
  EXPECT_EQ(s.indices(), e0);
  // The key is seed + epoch, as in PyTorch.
  DistributedSampler t(100, 0, 1, true, 41);
  t.set_epoch(1);
  EXPECT_EQ(t.indices(), e0);
  // Every rank strides through the same permutation.
  for (int world : {2, 3, 4}) {
    for (int r = 0; r < world; ++r) {
      DistributedSampler shard(100, r, world, true, 42);
      shard.set_epoch(1);
      for (size_t i = 0; i < shard.indices().size(); ++i) {
        const size_t pos = static_cast<size_t>(r) + i * static_cast<size_t>(world);
        EXPECT_EQ(shard.indices()[i], e1[pos % 100]) << "world " << world << " rank " << r;
      }
    }
  }
}

TEST(SamplerShards, NoShuffleIsStridedLikePyTorch) {
  // N = 10, R = 3: padded [0..9, 0, 1]; rank 1 takes positions 1, 4, 7, 10.
  DistributedSampler s(10, 1, 3, false);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 4, 7, 0}));
  EXPECT_EQ(s.padding(), 2);
  EXPECT_EQ(s.total_size(), 12);
  DistributedSampler d(10, 2, 3, false, 0, true);
  EXPECT_EQ(d.indices(), (std::vector<int64_t>{2, 5, 8}));
  EXPECT_EQ(d.padding(), 0);
}

TEST(SamplerShards, DisjointAndCoveringForWorldSizes1To5) {
  for (int64_t n : {1, 7, 10, 12, 60, 61, 97}) {
    for (int world = 1; world <= 5; ++world) {
      for (bool shuffle : {false, true}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " world=" + std::to_string(world));
        std::vector<int64_t> sizes;
        std::vector<int64_t> all = all_ranks(n, world, shuffle, 3, false, 2, &sizes);
        const int64_t per = (n + world - 1) / world;
        for (int64_t s : sizes) EXPECT_EQ(s, per);
        const int64_t padding = per * world - n;
        ASSERT_EQ(static_cast<int64_t>(all.size()), n + padding);
        // Every sample appears; the padding repeats `padding` of them (more
        // than once each when the padding exceeds the dataset).
        std::vector<int64_t> seen(static_cast<size_t>(n), 0);
        for (int64_t i : all) ++seen[static_cast<size_t>(i)];
        const int64_t max_count = 1 + (padding + n - 1) / n;
        int64_t repeats = 0;
        for (int64_t c : seen) {
          EXPECT_GE(c, 1);
          EXPECT_LE(c, max_count);
          repeats += c - 1;
        }
        EXPECT_EQ(repeats, padding);
        // With no padding, the shards are disjoint.
        if (n % world == 0) {
          EXPECT_EQ(repeats, 0);
        }
      }
    }
  }
}

TEST(SamplerShards, PaddingWrapsWhenLargerThanTheDataset) {
  // N = 2, R = 5: padded order is p0 p1 p0 p1 p0.
  const auto perm = permutation(2, 9);
  std::vector<int64_t> got;
  for (int r = 0; r < 5; ++r) {
    DistributedSampler s(2, r, 5, true, 9);
    ASSERT_EQ(s.num_samples(), 1);
    EXPECT_EQ(s.padding(), 3);
    got.push_back(s.indices()[0]);
  }
  EXPECT_EQ(got, (std::vector<int64_t>{perm[0], perm[1], perm[0], perm[1], perm[0]}));
}

TEST(SamplerShards, DropLastCutsTheTail) {
  for (int64_t n : {10, 11, 12, 13, 3}) {
    for (int world = 1; world <= 5; ++world) {
      std::vector<int64_t> sizes;
      const auto all = all_ranks(n, world, true, 5, true, 0, &sizes);
      for (int64_t s : sizes) EXPECT_EQ(s, n / world);
      // PyTorch: ceil((N - R) / R) when N % R != 0.
      if (n % world != 0 && n >= world) {
        EXPECT_EQ(sizes[0], (n - world + world - 1) / world);
      }
      // No duplicates, and the dropped samples are the permutation's tail.
      std::vector<int64_t> sorted = all;
      std::sort(sorted.begin(), sorted.end());
      EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
      const auto perm = permutation(n, 5);
      std::vector<int64_t> head(perm.begin(), perm.begin() + (n / world) * world);
      std::sort(head.begin(), head.end());
      EXPECT_EQ(sorted, head);
    }
  }
  EXPECT_EQ(DistributedSampler(3, 0, 5, true, 0, true).num_samples(), 0);
}

TEST(SamplerSteps, CeilOrFloor) {
  DistributedSampler s(10, 0, 1, false);
  EXPECT_EQ(s.steps(3), 4);
  EXPECT_EQ(s.steps(3, true), 3);
  EXPECT_EQ(s.steps(10), 1);
  EXPECT_EQ(s.steps(64), 1);
  EXPECT_EQ(s.steps(64, true), 0);
  // CIFAR-10 on 32 ranks: 1563 per rank, 16 padded duplicates.
  DistributedSampler c(50000, 31, 32);
  EXPECT_EQ(c.num_samples(), 1563);
  EXPECT_EQ(c.padding(), 16);
  EXPECT_THROW(s.steps(0), InputError);
}

TEST(SamplerEval, CountsEverySampleExactlyOnce) {
  for (int64_t n : {1, 7, 10, 10000}) {
    for (int world = 1; world <= 5; ++world) {
      std::vector<int> seen(static_cast<size_t>(n), 0);
      int64_t total = 0;
      for (int r = 0; r < world; ++r) {
        auto s = DistributedSampler::for_evaluation(n, r, world);
        s.set_epoch(3);  // no effect
        EXPECT_TRUE(s.evaluation());
        EXPECT_EQ(s.padding(), 0);
        EXPECT_EQ(s.num_samples(), n / world + (r < n % world ? 1 : 0));
        for (size_t i = 0; i < s.indices().size(); ++i) {
          EXPECT_EQ(s.indices()[i], r + static_cast<int64_t>(i) * world);
          ++seen[static_cast<size_t>(s.indices()[i])];
        }
        total += s.num_samples();
      }
      EXPECT_EQ(total, n);
      for (int c : seen) EXPECT_EQ(c, 1);
    }
  }
}

TEST(SamplerErrors, BadRankOrWorld) {
  EXPECT_THROW(DistributedSampler(10, 2, 2), InputError);
  EXPECT_THROW(DistributedSampler(10, -1, 2), InputError);
  EXPECT_THROW(DistributedSampler(10, 0, 0), InputError);
  EXPECT_THROW(DistributedSampler(-1, 0, 1), InputError);
  EXPECT_EQ(DistributedSampler(0, 0, 3).num_samples(), 0);
}

}  // namespace
}  // namespace lockstep::data
