// The scripts in jobs/ and scripts/ and the stand-in launchers (bash -n,
// shellcheck), a 2-rank job through jobs/local.sh with resume, the scaling
// study (jobs/scale.sh), and every configs/*.toml training one epoch
// (configs/README.md: test_config.cpp).
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::kSourceDir;
using testing::lines_of;
using testing::read_file;
using testing::run_command;
using testing::run_lockstep;
using testing::ScratchDir;

std::vector<std::string> files_in(const std::string& dir, const std::string& extension) {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == extension) files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Runs a script of the repository from its root, lockstep as LOCKSTEP.
testing::CommandResult run_script(const std::string& script_and_args) {
  return run_command("cd " + kSourceDir + " && LOCKSTEP=" LOCKSTEP_BINARY " bash " +
                     script_and_args);
}

std::vector<std::string> shell_scripts() {
  auto scripts = files_in(kSourceDir + "/jobs", ".sh");
  for (const auto& s : files_in(kSourceDir + "/scripts", ".sh")) scripts.push_back(s);
  // tests/launchers/: aprun, mpiexec, mpirun, srun (no extension) and their helpers.
  for (const auto& s : files_in(kSourceDir + "/tests/launchers", "")) scripts.push_back(s);
  for (const auto& s : files_in(kSourceDir + "/tests/launchers", ".sh")) scripts.push_back(s);
  return scripts;
}

TEST(Jobs, EveryScriptPassesBashNAndShellcheck) {
  ASSERT_EQ(run_command("command -v shellcheck").exit_code, 0)
      << "shellcheck is not installed (scripts/setup.sh installs it)";
  const auto scripts = shell_scripts();
  ASSERT_GE(scripts.size(), 10u);
  for (const auto& s : scripts) {
    auto r = run_command("bash -n " + s);
    EXPECT_EQ(r.exit_code, 0) << s << "\n" << r.output;
    r = run_command("cd " + kSourceDir + " && shellcheck -x " + s);
    EXPECT_EQ(r.exit_code, 0) << s << "\n" << r.output;
  }
}

size_t metrics_rows(const std::string& run_dir) {
  return lines_of(read_file(run_dir + "/metrics.csv")).size();
}

TEST(Jobs, LocalRunsATwoRankJobLogsItAndResumes) {
  REQUIRE_FASHION_MNIST();
  ScratchDir run;
  const std::string args =
      "jobs/local.sh 2 configs/fashion_mnist.toml --train-subset 256 "
      "--test-subset 128 --progress plain --run-dir " +
      run.path();
  auto r = run_script(args + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("2 ranks on 1 node"), std::string::npos) << r.output;
  EXPECT_EQ(metrics_rows(run.path()), 2u) << r.output;
  const auto logs = files_in(run.path(), ".log");
  ASSERT_EQ(logs.size(), 1u);
  const std::string log = read_file(logs[0]);
  EXPECT_EQ(log.rfind("host     : ", 0), 0u) << log;
  for (const char* part :
       {"date     : ", "git      : ", "command  : mpiexec", "--resume auto",
        "dataset = \"fashion-mnist\"", "overrides: --train-subset 256", "epoch   1/1"}) {
    EXPECT_NE(log.find(part), std::string::npos) << part << " missing from\n" << log;
  }

  // Submitted again with more epochs, the job continues where it stopped.
  r = run_script(args + " --epochs 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resumed after epoch 1"), std::string::npos) << r.output;
  EXPECT_EQ(metrics_rows(run.path()), 3u) << r.output;
}

// PNG signature, then the IHDR chunk: width and height, big-endian.
void expect_png(const std::string& path) {
  const std::string png = read_file(path);
  ASSERT_GE(png.size(), 24u) << path;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  EXPECT_EQ(png.substr(12, 4), "IHDR") << path;
  auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(png[at + i]);
    return v;
  };
  EXPECT_GE(be32(16), 200u) << "width of " << path;
  EXPECT_GE(be32(20), 150u) << "height of " << path;
}

TEST(Jobs, ScaleWritesTableCsvAndChart) {
  REQUIRE_FASHION_MNIST();
  ASSERT_EQ(run_command("command -v gnuplot").exit_code, 0)
      << "gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)";
  ScratchDir out;
  const auto r = run_script(
      "jobs/scale.sh --config configs/fashion_mnist.toml --ranks 1,2 "
      "--epochs 1 --train-subset 256 --test-subset 128 --out " +
      out.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string md = read_file(out.file("scaling.md"));
  const std::regex row(R"(^\| ([0-9]+) \| [0-9.]+ \| [0-9.]+ \| [0-9]+% \| [0-9.]+% \|.*)");
  std::vector<std::string> ranks;
  for (const auto& line : lines_of(md)) {
    std::smatch m;
    if (std::regex_match(line, m, row)) ranks.push_back(m[1]);
  }
  EXPECT_EQ(ranks, (std::vector<std::string>{"1", "2"})) << md;
  EXPECT_NE(md.find("time for 1 epochs (s)"), std::string::npos) << md;
  EXPECT_NE(md.find("allreduce wait"), std::string::npos) << md;
  const auto csv = lines_of(read_file(out.file("scaling.csv")));
  ASSERT_EQ(csv.size(), 3u) << r.output;
  EXPECT_EQ(csv[0].rfind("ranks,wall_s,", 0), 0u) << csv[0];
  EXPECT_EQ(csv[1].rfind("1,", 0), 0u) << csv[1];
  expect_png(out.file("scaling.png"));
}

// A rank count whose run fails is named, in the table and the exit status;
// the others' rows are kept (a long study is not lost to one launch), and
// speedups count from the first count that ran.
TEST(Jobs, ScaleKeepsTheRowsOfTheRunsThatFinished) {
  REQUIRE_FASHION_MNIST();
  ScratchDir out;
  const auto r = run_command(
      "cd " + kSourceDir +
      " && LOCKSTEP=" LOCKSTEP_BINARY
      " LAUNCHER='bash tests/helpers/fail_for_ranks.sh {n} 1 mpiexec -n {n}' bash jobs/scale.sh "
      "--config configs/fashion_mnist.toml --ranks 1,2 --epochs 1 --train-subset 256 "
      "--test-subset 128 --eval-every 0 --out " +
      out.path());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("the runs with 1 rank(s) failed; the table has the others"),
            std::string::npos)
      << r.output;
  const auto csv = lines_of(read_file(out.file("scaling.csv")));
  ASSERT_EQ(csv.size(), 2u) << r.output;
  EXPECT_EQ(csv[1].rfind("2,", 0), 0u) << csv[1];
  // Its own base: speedup and efficiency 1; no test accuracy measured (0, not nan).
  EXPECT_NE(csv[1].find(",1.000,1.000"), std::string::npos) << csv[1];
  EXPECT_NE(csv[1].find(",0.0000,"), std::string::npos) << csv[1];
  const std::string md = read_file(out.file("scaling.md"));
  EXPECT_NE(md.find("**Failed:** the runs with 1 rank(s)"), std::string::npos) << md;
  EXPECT_NE(md.find("against 2 rank(s)"), std::string::npos) << md;
}

// ALPS refuses an aprun with more ranks per node than ranks in all; a
// LAUNCHER template's fixed -N is held to the rank count at small counts
// (jobs/common.sh: aprun_fit_per_node), whatever its spelling; other
// launchers and the program's own arguments are left alone.
TEST(Jobs, AprunRanksPerNodeAreHeldToTheRankCount) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"aprun -n 1 -N 4 -d 32 -j 2 -cc depth", "aprun -n 1 -N 1 -d 32 -j 2 -cc depth"},
      {"aprun -n 8 -N 4 -d 32", "aprun -n 8 -N 4 -d 32"},
      {"aprun -N 4 -n 2 prog -N 9", "aprun -N 2 -n 2 prog -N 9"},
      {"env A=1 /opt/cray/bin/aprun --pes 3 --pes-per-node=4 x",
       "env A=1 /opt/cray/bin/aprun --pes 3 --pes-per-node=3 x"},
      {"aprun --pes=2 --pes-per-node 4 x", "aprun --pes=2 --pes-per-node 2 x"},
      {"mpiexec -n 1 --ppn 4 -N 4", "mpiexec -n 1 --ppn 4 -N 4"},
      {"aprun -n 1 -d 4", "aprun -n 1 -d 4"}};
  for (const auto& [given, expected] : cases) {
    const auto r = run_command("cd " + kSourceDir +
                               " && bash -c 'set -euo pipefail; source jobs/common.sh; launcher=(" +
                               given + "); aprun_fit_per_node; echo \"${launcher[*]}\"'");
    ASSERT_EQ(r.exit_code, 0) << given << "\n" << r.output;
    EXPECT_EQ(r.output, expected + "\n") << given;
  }
}

// The scaling study under aprun (the stand-in refuses -N above -n, as ALPS
// does) with the template the Theta script documents: 1 rank runs with -N 1.
TEST(Jobs, ScaleUnderAprunRunsFewerRanksThanRanksPerNode) {
  REQUIRE_FASHION_MNIST();
  ScratchDir out;
  const auto r = run_command("cd " + kSourceDir + " && PATH=" + kSourceDir +
                             "/tests/launchers:$PATH REAL_MPIEXEC=" LOCKSTEP_MPIEXEC
                             " LOCKSTEP=" LOCKSTEP_BINARY
                             " LAUNCHER='aprun -n {n} -N 2 -d 1 -cc depth' bash jobs/scale.sh "
                             "--config configs/fashion_mnist.toml --ranks 1,2 --epochs 1 "
                             "--train-subset 256 --test-subset 128 --eval-every 0 --out " +
                             out.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "ALPS refuses")) << r.output;
  const auto csv = lines_of(read_file(out.file("scaling.csv")));
  ASSERT_EQ(csv.size(), 3u) << r.output;
  EXPECT_EQ(csv[1].rfind("1,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("2,", 0), 0u) << csv[2];
  for (const std::string n : {"1", "2"}) {
    const auto logs = files_in(out.file("n" + n), ".log");
    ASSERT_EQ(logs.size(), 1u) << n;
    EXPECT_TRUE(
        contains(read_file(logs[0]), "command  : aprun -n " + n + " -N " + n + " -d 1 -cc depth "))
        << read_file(logs[0]);
  }
}

// The experiment files (configs/*.toml) by name, e.g. "resnet20_cifar10".
std::vector<std::string> config_names() {
  std::vector<std::string> names;
  for (const auto& file : files_in(LOCKSTEP_SOURCE_DIR "/configs", ".toml")) {
    names.push_back(fs::path(file).stem().string());
  }
  return names;
}

TEST(Jobs, TheExperimentFilesAreThere) {
  const auto names = config_names();
  ASSERT_GE(names.size(), 3u);
  EXPECT_NE(std::find(names.begin(), names.end(), "fashion_mnist"), names.end());
}

// Every experiment file trains one epoch on a small subset (32 samples, 16
// for the test: resnet110 under ASan on an AVX2-only core took most of the
// 600 s limit at 128 and 64): real Fashion-MNIST, or small files in the
// real formats for the data sets that are not installed. One test per file
// (Jobs/EveryConfig.TrainsOneEpoch/resnet20_cifar10), so that they run in
// parallel and a lane can leave some out by name.
class EveryConfig : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryConfig, TrainsOneEpoch) {
  const std::string config = kSourceDir + "/configs/" + GetParam() + ".toml";
  const std::regex dataset_key(R"((^|\n)\s*dataset\s*=\s*"([^"]*)\")");
  std::smatch m;
  const std::string text = read_file(config);
  ASSERT_TRUE(std::regex_search(text, m, dataset_key)) << config << " sets no dataset";
  const std::string dataset = m[2];
  ScratchDir data;
  std::string data_dir;
  if (dataset == "mnist") {
    testing::write_mnist_dir(data.file("mnist"), 160, 64);
    data_dir = " --data-dir " + data.file("mnist");
  } else if (dataset == "cifar10") {
    testing::write_cifar10_dir(data.file("cifar10"), 32, 64);
    data_dir = " --data-dir " + data.file("cifar10");
  } else if (dataset == "fashion-mnist") {
    REQUIRE_FASHION_MNIST();
  }
  ScratchDir run;
  const auto r = run_lockstep("train --config " + config + data_dir +
                              " --epochs 1 --train-subset 32 --test-subset 16"
                              " --checkpoint-every 0 --progress plain --run-dir " +
                              run.path());
  EXPECT_EQ(r.exit_code, 0) << config << "\n" << r.output;
  EXPECT_EQ(metrics_rows(run.path()), 2u) << config << "\n" << r.output;
}

// Test names take letters, digits and '_' only: "my-run.v2" becomes "my_run_v2".
INSTANTIATE_TEST_SUITE_P(Jobs, EveryConfig, ::testing::ValuesIn(config_names()),
                         [](const ::testing::TestParamInfo<std::string>& config) {
                           std::string name = config.param;
                           for (char& c : name) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace lockstep
