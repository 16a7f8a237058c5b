// Every command the README shows in its ```sh blocks is run, in the order
// shown, from a scratch folder that holds `build/lockstep`, `configs/` and
// `jobs/` as in a checkout: training with small subsets and one epoch (two
// where a command asks for more), benchmarks for a fraction of a second.
// Commands that need what a test cannot have are listed and not run: a batch
// system (qsub, sbatch), a network (fetch_data.sh), a batch allocation
// (LAUNCHER=...), the fake cluster (root; tests/cluster/), and the set-up
// scripts that build everything again.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "data/image_io.h"
#include "support/dataset_files.h"
#include "support/run_command.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::ScratchDir;

// The commands of the ```sh blocks: comments removed, continued lines joined.
std::vector<std::string> readme_commands() {
  std::ifstream in(LOCKSTEP_SOURCE_DIR "/README.md");
  std::vector<std::string> commands;
  bool in_sh = false;
  std::string pending;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("```", 0) == 0) {
      in_sh = !in_sh && line == "```sh";
      continue;
    }
    if (!in_sh) continue;
    const size_t comment = line.find(" #");
    if (comment != std::string::npos) line.resize(comment);
    if (line.rfind("#", 0) == 0) continue;
    line = std::regex_replace(line, std::regex(R"(\s+$)"), "");
    if (!line.empty() && line.back() == '\\') {
      pending += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    line = std::regex_replace(pending + line, std::regex(R"(^\s+)"), "");
    pending.clear();
    if (!line.empty()) commands.push_back(line);
  }
  return commands;
}

std::string skip_reason(const std::string& command) {
  for (const char* prefix : {"qsub ", "sbatch "}) {
    if (command.rfind(prefix, 0) == 0) return "needs a batch system";
  }
  if (command.find("fetch_data.sh") != std::string::npos) return "needs a network";
  if (command.rfind("LAUNCHER=", 0) == 0) return "runs inside a batch allocation";
  if (command.rfind("scripts/fake_cluster.sh", 0) == 0)
    return "makes network namespaces as root (tests/cluster/cluster_test.sh runs each of these)";
  if (command.rfind("scripts/train.sh", 0) == 0 || command.rfind("scripts/test.sh", 0) == 0)
    return "sets up and builds everything again";
  if (command.rfind("cmake ", 0) == 0)
    return "builds and installs lockstep again (tests/test_install.cpp installs a build into a "
           "prefix and trains with it)";
  if (command.rfind("tensorboard ", 0) == 0)
    return "starts TensorBoard's server (test_tensorboard.cpp reads the event files with its "
           "reader)";
  return "";
}

bool has(const std::string& command, const std::string& flag) {
  return std::regex_search(command, std::regex("(^| )" + flag + "( |=|$)"));
}

// Small, quick versions of the training and benchmark commands.
std::string shrink(std::string command, const std::string& mnist_dir) {
  const bool trains =
      command.find(" train ") != std::string::npos || command.rfind("jobs/", 0) == 0;
  if (trains) {
    command = std::regex_replace(command, std::regex(R"(--epochs [0-9]+)"), "--epochs 2");
    if (!has(command, "--epochs")) command += " --epochs 1";
    command += " --train-subset 256 --test-subset 128 --threads 1";
    if (command.find("scale.sh") == std::string::npos) command += " --progress plain";
    if (command.find("--resume") == std::string::npos &&
        command.rfind("jobs/", 0) == std::string::npos) {
      command += " --overwrite";  // the README shows alternatives, not one sequence
    }
    if (command.find("configs/mnist.toml") != std::string::npos) {
      command += " --data-dir " + mnist_dir;
    }
    command = std::regex_replace(command, std::regex(R"(--ranks 1,2,4,8)"), "--ranks 1,2");
  }
  if (command.find(" bench") != std::string::npos) {
    command = std::regex_replace(command, std::regex(R"(--seconds [0-9.]+)"), "");
    command = std::regex_replace(command, std::regex(R"(--repeats [0-9]+)"), "--repeats 2");
    command += " --seconds 0.05";
    if (!has(command, "--model")) command += " --model mnist_net";
    if (!has(command, "--threads")) command += " --threads 1";
  }
  return command;
}

// Replaces runs/<run>/checkpoints/<file>.lsck with that run's newest file.
std::string fill_checkpoint(const std::string& command, const std::string& root) {
  std::smatch m;
  if (!std::regex_search(command, m, std::regex(R"((runs/[^ ]+/checkpoints)/<file>\.lsck)")))
    return command;
  std::string newest;
  for (const auto& e : fs::directory_iterator(root + "/" + m[1].str())) {
    if (e.path().extension() == ".lsck" && e.path().string() > newest) newest = e.path();
  }
  return m.prefix().str() + newest + m.suffix().str();
}

// What the commands read: an image folder, photos, traces, MNIST files.
void prepare(const ScratchDir& dir) {
  fs::create_directories(dir.file("build"));
  fs::create_symlink(LOCKSTEP_BINARY, dir.file("build/lockstep"));
  for (const char* part : {"configs", "jobs"}) {
    fs::create_symlink(std::string(LOCKSTEP_SOURCE_DIR) + "/" + part, dir.file(part));
  }
  const auto r = run_command("cd " + dir.path() +
                             " && build/lockstep data export --dataset fashion-mnist --out "
                             "mydata --limit 300");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  data::Image photo{28, 28, 3, std::vector<uint8_t>(28 * 28 * 3, 90)};
  testing::write_bytes(dir.file("photo.jpg"), data::encode_jpeg(photo));
  fs::create_directories(dir.file("photos"));
  testing::write_bytes(dir.file("photos/a.png"), data::encode_png(photo));
  testing::write_mnist_dir(dir.file("mnist"), 256, 128);
  for (const char* trace : {"trace.json", "t.json"}) {
    const auto t = run_command("cd " + dir.path() +
                               " && build/lockstep bench --model mnist_net --threads 1 "
                               "--seconds 0.05 --timeline " +
                               trace);
    ASSERT_EQ(t.exit_code, 0) << t.output;
  }
}

TEST(Readme, EveryCommandRuns) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  ASSERT_NO_FATAL_FAILURE(prepare(dir));
  const auto commands = readme_commands();
  ASSERT_GE(commands.size(), 20u);
  int ran = 0;
  for (const std::string& shown : commands) {
    const std::string why = skip_reason(shown);
    if (!why.empty()) {
      std::cout << "[ readme ] not run (" << why << "): " << shown << "\n";
      continue;
    }
    const std::string command = fill_checkpoint(shrink(shown, dir.file("mnist")), dir.path());
    const auto r = run_command("cd " + dir.path() + " && " + command);
    EXPECT_EQ(r.exit_code, 0) << "README command: " << shown << "\nran: " << command << "\n"
                              << r.output;
    ++ran;
  }
  EXPECT_GE(ran, 15);
}

}  // namespace
}  // namespace lockstep
