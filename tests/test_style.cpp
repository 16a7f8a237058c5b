// The repository's own rule for C++ and CUDA sources: every one is as
// clang-format writes it with the checked-in .clang-format (the files under
// app, bench, common, data, distributed, nn and tests; compared with cmp,
// not --dry-run, which flags namespace comments after the
// `inline LOCKSTEP_CPU_ISA` macro that formatting leaves alone). scripts/setup.sh
// --test installs clang-format; without it the test fails, naming it.
#include <gtest/gtest.h>

#include <string>

#include "support/run_command.h"

namespace lockstep {
namespace {

using testing::kSourceDir;
using testing::run_command;

TEST(Style, EverySourceFileIsAsClangFormatWritesIt) {
  ASSERT_EQ(run_command("command -v clang-format").exit_code, 0)
      << "clang-format is not installed (scripts/setup.sh --test installs it)";
  const std::string list =
      "find app bench common data distributed nn tests -type f \\( -name '*.cpp' -o -name "
      "'*.h' -o -name '*.cu' -o -name '*.cuh' \\) -print0";
  const std::string check =
      "for f; do clang-format --style=file \"$f\" | cmp -s - \"$f\" || echo \"$f\"; done";
  const auto r = run_command("cd " + kSourceDir + " && " + list + " | xargs -0 -n 25 -P 2 sh -c '" +
                             check + "' _ 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "") << "not as clang-format writes them (run clang-format -i on each):\n"
                          << r.output;
}

}  // namespace
}  // namespace lockstep
