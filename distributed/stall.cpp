#include "distributed/stall.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/error.h"

namespace lockstep::distributed {

std::string format_rank_list(const std::vector<int>& ranks) {
  std::ostringstream out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out << ", ";
    out << ranks[i];
    if (j > i) out << (j == i + 1 ? ", " : "-") << ranks[j];
    i = j + 1;
  }
  return out.str();
}

std::string StallReport::message() const {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", waited_seconds);
  std::ostringstream out;
  out << "rank " << rank << ": stall: " << operation << " #" << sequence;
  if (!label.empty()) out << " [" << label << "]";
  out << " has waited " << seconds << " s for the other ranks";
  if (ranks_known) {
    if (!missing_ranks.empty()) {
      out << "; missing ranks: " << format_rank_list(missing_ranks);
    }
    if (!elsewhere.empty()) {
      out << "; in other collectives:";
      for (size_t i = 0; i < elsewhere.size(); ++i) out << (i ? ", " : " ") << elsewhere[i];
    }
    if (missing_ranks.empty() && elsewhere.empty()) {
      out << "; every rank reports waiting here";
    }
  }
  if (aborting) {
    out << "; ending the job (stall abort limit reached)";
  } else {
    out << " (a rank is slow, stuck, or issuing different collectives)";
  }
  return out.str();
}

void StallPolicy::validate() const {
  auto check = [](double value, const char* name) {
    if (!std::isfinite(value) || value < 0.0) {
      fail_input("stall policy: ", name, " must be a finite number of seconds >= 0, got ", value);
    }
  };
  check(warning_seconds, "warning_seconds");
  check(abort_seconds, "abort_seconds");
  check(spin_seconds, "spin_seconds");
}

}  // namespace lockstep::distributed
