#include "distributed/stragglers.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace lockstep::distributed {
namespace {

// The value at index (n - 1) / 2 of the sorted values; 0 when empty.
double lower_median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

// One rank's figures on the wire: fixed size, trivially copyable.
struct PackedCompute {
  int64_t steps = 0;
  double total_seconds = 0.0;
  double median_step_seconds = 0.0;
  std::array<char, 64> node{};
};

}  // namespace

double ComputeRecorder::total() const {
  return std::accumulate(steps_.begin(), steps_.end(), 0.0);
}

double ComputeRecorder::median() const {
  return lower_median(steps_);
}

std::vector<RankCompute> gather_compute(Communicator& comm, const ComputeRecorder& mine) {
  PackedCompute packed;
  packed.steps = mine.steps();
  packed.total_seconds = mine.total();
  packed.median_step_seconds = mine.median();
  const std::string node = comm.host_name();
  std::memcpy(packed.node.data(), node.data(), std::min(node.size(), packed.node.size() - 1));
  comm.set_stall_label("straggler figures (compute time per rank)");
  const std::vector<PackedCompute> all = comm.allgather_value(packed);
  std::vector<RankCompute> out;
  out.reserve(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const PackedCompute& p = all[r];
    out.push_back({.rank = static_cast<int>(r),
                   .node = std::string(p.node.data(), strnlen(p.node.data(), p.node.size())),
                   .steps = p.steps,
                   .total_seconds = p.total_seconds,
                   .median_step_seconds = p.median_step_seconds});
  }
  return out;
}

StragglerVerdict find_straggler(std::span<const double> times, double threshold) {
  StragglerVerdict v;
  if (times.size() < 2) return v;
  const double median = lower_median({times.begin(), times.end()});
  if (!(median > 0.0)) return v;
  // The first of equal maxima: the lowest rank among equally slow ones.
  const auto slowest = std::max_element(times.begin(), times.end());
  v.slowest = static_cast<int>(slowest - times.begin());
  v.slowdown = *slowest / median;
  if (threshold <= 0.0) return v;
  const double limit = (1.0 + threshold) * median;
  v.over_threshold = static_cast<int>(
      std::count_if(times.begin(), times.end(), [&](double t) { return t > limit; }));
  if (v.over_threshold > 0) v.rank = v.slowest;
  return v;
}

StragglerVerdict find_straggler(const std::vector<RankCompute>& ranks, double threshold) {
  std::vector<double> times;
  times.reserve(ranks.size());
  for (const RankCompute& r : ranks) times.push_back(r.median_step_seconds);
  return find_straggler(times, threshold);
}

std::string straggler_line(const StragglerVerdict& verdict, const std::string& node,
                           double threshold) {
  if (verdict.rank < 0) return "";
  char line[256];
  std::snprintf(line, sizeof(line), "straggler: rank %d (%s) computes %.2fx the median step time",
                verdict.rank, node.c_str(), verdict.slowdown);
  std::string out = line;
  if (verdict.over_threshold > 1) {
    std::snprintf(line, sizeof(line), "; %d ranks over %.2fx", verdict.over_threshold,
                  1.0 + threshold);
    out += line;
  }
  return out;
}

}  // namespace lockstep::distributed
