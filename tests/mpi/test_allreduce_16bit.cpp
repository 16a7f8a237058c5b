// Communicator::allreduce_16bit under mpiexec: fp16 and bf16, sum and
// average, sizes 0, 1, 7 and 65537, over polled whole spans and blocking
// 7-element chunks. Values are chosen so that every partial sum is exact
// (then the result is exact, whatever order MPI reduces in), or not (then
// every rank gets the same bits, within one 16-bit rounding per reduction
// step of the exact sum, and with 2 ranks exactly the once-rounded sum).
// Overflow and NaN reach every rank.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <vector>

#include "common/error.h"
#include "distributed/mpi_communicator.h"
#include "mpi/mpi_test_util.h"

namespace lockstep::distributed {
namespace {

using testing::make_test_comm;

uint16_t narrow(float x, Compression f) {
  return f == Compression::kFp16 ? float_to_fp16(x) : float_to_bf16(x);
}
float widen(uint16_t h, Compression f) {
  return f == Compression::kFp16 ? fp16_to_float(h) : bf16_to_float(h);
}

// Multiples of 1/4 in [-5, 5]: sums over a few ranks stay exact in both formats.
float exact_value(int r, size_t i) {
  return static_cast<float>(static_cast<int>((i * 7 + static_cast<size_t>(r) * 3) % 41) - 20) *
         0.25f;
}
// Values with full 16-bit mantissas (an integer hash of rank and index
// picks sign, exponent in [1/4, 4) and mantissa): their sums need rounding.
float inexact_value(int r, size_t i, Compression f) {
  uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(r) * 40503u;
  h ^= h >> 15;
  h *= 2246822519u;
  h ^= h >> 13;
  const uint32_t sign = (h >> 31) & 1u, exponent = (h >> 16) % 4u;
  if (f == Compression::kFp16) {
    const uint32_t bits = (sign << 15) | ((13u + exponent) << 10) | (h & 0x3ffu);
    return fp16_to_float(static_cast<uint16_t>(bits));
  }
  const uint32_t bits = (sign << 15) | ((125u + exponent) << 7) | (h & 0x7fu);
  return bf16_to_float(static_cast<uint16_t>(bits));
}

std::vector<uint16_t> local_values(int rank, size_t n, Compression f, bool exact) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i] = narrow(exact ? exact_value(rank, i) : inexact_value(rank, i, f), f);
  }
  return out;
}

std::unique_ptr<Communicator> make_chunked_comm() {
  MpiCommunicatorOptions options;
  options.max_chunk = 7;  // blocking calls, 7 values per MPI call
  return make_mpi_communicator(MPI_COMM_WORLD, options);
}

const Compression kFormats[] = {Compression::kFp16, Compression::kBf16};

TEST(Allreduce16bit, ExactSumsAndAveragesForEverySizeAndFormat) {
  auto polled = make_test_comm();
  auto chunked = make_chunked_comm();
  const int size = polled->size(), rank = polled->rank();
  for (Communicator* comm : {polled.get(), chunked.get()}) {
    for (Compression f : kFormats) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{65537}}) {
          if (comm == chunked.get() && n > 1000) continue;  // 9363 calls: slow on 2 cores
          SCOPED_TRACE(to_string(f) + " " + to_string(op) + " of " + std::to_string(n));
          std::vector<uint16_t> data = local_values(rank, n, f, true);
          comm->allreduce_16bit(data, f, op);
          size_t wrong = 0;
          for (size_t i = 0; i < n; ++i) {
            float sum = 0.0f;
            for (int r = 0; r < size; ++r) sum += exact_value(r, i);
            const uint16_t want =
                op == ReduceOp::kSum ? narrow(sum, f) : narrow(sum / static_cast<float>(size), f);
            if (data[i] != want && wrong++ < 3) {
              ADD_FAILURE() << "element " << i << ": " << widen(data[i], f) << ", expected "
                            << widen(want, f);
            }
          }
          EXPECT_EQ(wrong, 0u);
        }
      }
    }
  }
}

TEST(Allreduce16bit, RoundedSumsAreTheSameOnEveryRankWithinOneRoundingPerStep) {
  auto comm = make_test_comm();
  const int size = comm->size(), rank = comm->rank();
  const size_t n = 65537;
  for (Compression f : kFormats) {
    SCOPED_TRACE(to_string(f));
    std::vector<uint16_t> data = local_values(rank, n, f, false);
    comm->allreduce_16bit(data, f, ReduceOp::kSum);
    std::vector<uint16_t> root = data;
    comm->broadcast_values(std::span<uint16_t>(root), 0);
    EXPECT_EQ(data, root) << "rank " << rank << " differs from rank 0";
    // Each step rounds to nearest: at most half an ulp, 2^-11 (fp16) or
    // 2^-8 (bf16) relative to a partial sum, which is at most sum |x|.
    const double half_ulp = f == Compression::kFp16 ? 0x1p-11 : 0x1p-8;
    size_t wrong = 0, rounded = 0;
    for (size_t i = 0; i < n; ++i) {
      double exact = 0.0, magnitude = 0.0;
      for (int r = 0; r < size; ++r) {
        exact += inexact_value(r, i, f);
        magnitude += std::fabs(inexact_value(r, i, f));
      }
      const double got = widen(data[i], f);
      rounded += got != exact;
      const bool bad = size == 2 ? data[i] != narrow(static_cast<float>(exact), f)
                                 : std::fabs(got - exact) > (size - 1) * half_ulp * magnitude;
      if (bad && wrong++ < 3) {
        ADD_FAILURE() << "element " << i << ": " << got << ", exact sum " << exact;
      }
    }
    EXPECT_EQ(wrong, 0u);
    EXPECT_GT(rounded, n / 4) << "the values were meant to need rounding";
  }
}

TEST(Allreduce16bit, OverflowAndNaNReachEveryRank) {
  auto comm = make_test_comm();
  const int size = comm->size(), last = size - 1, rank = comm->rank();
  auto reduce = [&](Compression f, float mine) {
    std::vector<uint16_t> data(9);
    to_16bit(std::vector<float>(9, mine), data, f);
    comm->allreduce_16bit(data, f, ReduceOp::kSum);
    return widen(data[8], f);
  };
  // Every contribution fits, the sum does not.
  EXPECT_EQ(reduce(Compression::kFp16, 40000.0f), INFINITY);
  EXPECT_EQ(reduce(Compression::kFp16, -40000.0f), -INFINITY);
  // One rank's value overflows fp16 on its own.
  EXPECT_EQ(reduce(Compression::kFp16, rank == last ? 70000.0f : 1.0f), INFINITY);
  // A NaN on one rank.
  EXPECT_TRUE(std::isnan(reduce(Compression::kFp16, rank == last ? std::nanf("") : 1.0f)));
  EXPECT_TRUE(std::isnan(reduce(Compression::kBf16, rank == 0 ? std::nanf("") : 2.0f)));
  // Opposite overflows on two ranks: inf + -inf.
  const float opposite = rank == 0 ? 70000.0f : (rank == 1 ? -70000.0f : 0.0f);
  EXPECT_TRUE(std::isnan(reduce(Compression::kFp16, opposite)));
  // bf16 keeps fp32's range: what overflows fp16 is exact here.
  EXPECT_EQ(reduce(Compression::kFp16, 32768.0f), INFINITY);
  EXPECT_EQ(reduce(Compression::kBf16, 32768.0f), 32768.0f * static_cast<float>(size));
}

TEST(Allreduce16bit, RefusesMinMaxAndNoneOnEveryRankWithoutCommunicating) {
  auto comm = make_test_comm();
  std::vector<uint16_t> data(3);
  EXPECT_THROW(comm->allreduce_16bit(data, Compression::kFp16, ReduceOp::kMax), Error);
  EXPECT_THROW(comm->allreduce_16bit(data, Compression::kNone, ReduceOp::kSum), Error);
  // Still in step: a real reduction follows.
  data.assign(3, float_to_bf16(1.0f));
  comm->allreduce_16bit(data, Compression::kBf16, ReduceOp::kSum);
  EXPECT_EQ(bf16_to_float(data[2]), static_cast<float>(comm->size()));
}

}  // namespace
}  // namespace lockstep::distributed
