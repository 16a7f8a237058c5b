// The start-up CPU baseline check (app/platform/cpu_baseline.h): the message for a
// CPU that lacks features of the build, from fake feature lists; this
// machine has every feature the build uses; and the lockstep binary, shown a
// CPU without AVX2 and FMA (LOCKSTEP_TEST_HIDE_CPU_FEATURES), stops with
// that one line and status 1 before doing anything else.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "app/platform/cpu_baseline.h"
#include "support/run_command.h"

namespace lockstep::app {
namespace {

const char* const kV3[] = {"sse4.2", "popcnt", "avx",   "avx2",  "bmi",  "bmi2",
                           "f16c",   "fma",    "lzcnt", "movbe", nullptr};

std::string problem(const char* const* built_for, const char* target,
                    const std::vector<const char*>& present) {
  char out[1024];
  if (!cpu_baseline_problem(built_for, target, present.data(), present.size(), out, sizeof out)) {
    return "";
  }
  return out;
}

TEST(CpuBaseline, NamesTheMissingFeaturesAndTheRemedy) {
  // A Westmere-like x86-64-v2 CPU: SSE4.2 and POPCNT, no AVX.
  EXPECT_EQ(problem(kV3, "x86-64-v3", {"sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "cx16"}),
            "lockstep: this binary was built for x86-64-v3, and this CPU lacks avx, avx2, bmi, "
            "bmi2, f16c, fma, lzcnt, movbe: rebuild lockstep on this node with cmake "
            "-DLOCKSTEP_NATIVE=ON (code for this CPU)");
  // Sandy Bridge: AVX, no AVX2.
  const std::string sandy =
      problem(kV3, "x86-64-v3", {"sse4.2", "popcnt", "avx", "lzcnt", "movbe", "f16c"});
  EXPECT_NE(sandy.find("this CPU lacks avx2, bmi, bmi2, fma:"), std::string::npos) << sandy;
}

TEST(CpuBaseline, ANativeBuildOnAnAvx2NodeIsToldToBuildPortably) {
  const char* const zen4[] = {"avx2", "fma", "avx512f", "avx512bw", "avx512bf16", nullptr};
  const std::string line =
      problem(zen4, "the CPU of the build machine (-march=native)", {"avx2", "fma", "bmi2"});
  EXPECT_NE(line.find("this CPU lacks avx512f, avx512bw, avx512bf16: rebuild lockstep without "
                      "-DLOCKSTEP_NATIVE"),
            std::string::npos)
      << line;
}

TEST(CpuBaseline, NothingMissingIsNoProblem) {
  EXPECT_EQ(problem(kV3, "x86-64-v3",
                    {"avx512f", "sse4.2", "popcnt", "avx", "avx2", "bmi", "bmi2", "f16c", "fma",
                     "lzcnt", "movbe"}),
            "");
  const char* const none[] = {nullptr};
  EXPECT_EQ(problem(none, "x86-64-v3", {}), "");
}

TEST(CpuBaseline, HidingFeaturesRemovesExactlyTheListedNames) {
  const char* names[] = {"avx", "avx2", "avx512f", "fma", "bmi2"};
  const size_t n = hide_cpu_features(names, 5, "avx2,fma,avx5");
  ASSERT_EQ(n, 3u);
  EXPECT_STREQ(names[0], "avx");
  EXPECT_STREQ(names[1], "avx512f");
  EXPECT_STREQ(names[2], "bmi2");
}

TEST(CpuBaseline, ThisMachineHasEveryFeatureOfTheBuild) {
  const char* present[64];
  const size_t count = detect_cpu_features(present, 64);
  EXPECT_GT(count, 0u);
  EXPECT_EQ(problem(kCpuBuildFeatures, kCpuBuildTarget,
                    std::vector<const char*>(present, present + count)),
            "");
  // The default build's list holds x86-64-v3's features.
  if (std::string(kCpuBuildTarget) != "x86-64-v3") return;
  std::vector<std::string> built;
  for (const char* const* f = kCpuBuildFeatures; *f != nullptr; ++f) built.emplace_back(*f);
  for (const char* const* v3 = kV3; *v3 != nullptr; ++v3) {
    EXPECT_NE(std::find(built.begin(), built.end(), *v3), built.end()) << *v3;
  }
}

// The check's own code in the lockstep binary uses no instruction of
// x86-64-v2 or v3 (VEX-encoded AVX, BMI, LZCNT, MOVBE, POPCNT): it must run
// on the CPUs it turns away.
TEST(CpuBaseline, TheCheckItselfIsPlainX8664Code) {
  FILE* pipe = popen("objdump -d --no-show-raw-insn -C " LOCKSTEP_BINARY " 2>/dev/null", "r");
  ASSERT_NE(pipe, nullptr);
  const std::regex check_function(
      R"(<(\(anonymous namespace\)::check_cpu_baseline|lockstep::app::(cpu_baseline_problem|)"
      R"(detect_cpu_features|hide_cpu_features))\()");
  const std::regex newer(
      R"(\t(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|)"
      R"(tzcnt|movbe|popcnt)\b)");
  std::string function, line;
  int functions = 0;
  for (int ch; (ch = fgetc(pipe)) != EOF;) {
    if (ch != '\n') {
      line.push_back(static_cast<char>(ch));
      continue;
    }
    if (line.size() > 2 && line.back() == ':' && line.find(" <") != std::string::npos) {
      function = std::regex_search(line, check_function) ? line : "";
      functions += function.empty() ? 0 : 1;
    } else if (!function.empty() && std::regex_search(line, newer)) {
      ADD_FAILURE() << function << " uses " << line;
    }
    line.clear();
  }
  pclose(pipe);
  EXPECT_GE(functions, 4) << "the check's functions were not found in " LOCKSTEP_BINARY;
}

TEST(CpuBaseline, TheBinaryStopsWithOneLineOnACpuBelowTheBaseline) {
  const auto r =
      testing::run_command("LOCKSTEP_TEST_HIDE_CPU_FEATURES=avx2,fma " LOCKSTEP_BINARY " info");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.find("lockstep: this binary was built for "), 0u) << r.output;
  EXPECT_NE(r.output.find("this CPU lacks avx2, fma: rebuild lockstep"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "more than one line: " << r.output;
  const auto fine =
      testing::run_command("LOCKSTEP_TEST_HIDE_CPU_FEATURES= " LOCKSTEP_BINARY " info");
  EXPECT_EQ(fine.exit_code, 0) << fine.output;
}

}  // namespace
}  // namespace lockstep::app
