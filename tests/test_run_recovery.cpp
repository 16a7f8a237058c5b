// Runs that meet trouble between launches: corrupt checkpoints under
// `--resume auto`, finished runs resubmitted, fresh runs into another run's
// directory, changed settings on resume, diverging losses, and what a job
// script reports when the launcher's exit code cannot be trusted.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/resume_policy.h"
#include "app/config/config_schema.h"
#include "app/run/report.h"
#include "common/error.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_command;
using testing::run_lockstep;
using testing::ScratchDir;

std::string recovery_run(const std::string& dir, int epochs, int train_subset = 256) {
  return testing::fashion_mnist_train_args(dir, epochs, train_subset, 128, 1) +
         " --keep-checkpoints 0";
}

size_t lines_in(const std::string& path) {
  return testing::lines_of(testing::read_file(path)).size();
}

size_t count_lines_with(const std::string& output, const std::string& part) {
  size_t n = 0;
  for (const std::string& line : testing::lines_of(output))
    n += line.find(part) != std::string::npos;
  return n;
}

TEST(RunRecovery, ResumeAutoSkipsCorruptCheckpointsAndNamesThem) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto paths = app::CheckpointStore(dir.file("checkpoints"), 0).numbered();
  ASSERT_EQ(paths.size(), 3u);
  // The newest loses its second half, the one before gets a flipped byte.
  fs::resize_file(paths[2], fs::file_size(paths[2]) / 2);
  {
    std::fstream f(paths[1], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(paths[1]) / 2));
    f.put('\x5a');
  }
  const std::string corrupt = dir.file("corrupt.lsck");  // the resume replaces paths[1]
  fs::copy_file(paths[1], corrupt);
  r = run_lockstep(recovery_run(dir.path(), 4) + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(count_lines_with(r.output, "resume auto: skipping a bad checkpoint"), 2u) << r.output;
  for (const std::string& bad : {paths[2], paths[1]}) {
    EXPECT_EQ(count_lines_with(r.output, "skipping a bad checkpoint: checkpoint " + bad), 1u)
        << bad << "\n"
        << r.output;
  }
  EXPECT_TRUE(contains(r.output, "resuming from " + paths[0])) << r.output;
  EXPECT_TRUE(contains(r.output, "epoch   2/4")) << r.output;
  // metrics.csv holds each epoch of the resumed history once: the rows of
  // the abandoned epochs 2 and 3 went.
  std::vector<std::string> epochs;
  for (const std::string& line : testing::lines_of(testing::read_file(dir.file("metrics.csv"))))
    epochs.push_back(line.substr(0, line.find(',')));
  EXPECT_EQ(epochs, (std::vector<std::string>{"epoch", "1", "2", "3", "4"}));
  // An explicit path to a bad file stays an error that names it.
  r = run_lockstep(recovery_run(dir.path(), 4) + " --resume " + corrupt);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, corrupt)) << r.output;
}

// The process ends after epoch 2's checkpoint but before its metrics.csv
// row (the row is written last, since it carries the checkpoint's time):
// the resume restores the row the checkpoint kept, so no epoch goes
// missing from the history. Its checkpoint_s is unknown (nan).
TEST(RunRecovery, ARowLostAfterItsCheckpointIsRestoredOnResume) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 2));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> rows = testing::lines_of(testing::read_file(dir.file("metrics.csv")));
  ASSERT_EQ(rows.size(), 3u);
  const std::string lost = rows.back();
  rows.pop_back();
  {
    std::ofstream out(dir.file("metrics.csv"), std::ios::trunc);
    for (const std::string& row : rows) out << row << "\n";
  }
  fs::remove(dir.file("COMPLETE"));
  r = run_lockstep(recovery_run(dir.path(), 3) + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rows = testing::lines_of(testing::read_file(dir.file("metrics.csv")));
  ASSERT_EQ(rows.size(), 4u) << testing::read_file(dir.file("metrics.csv"));
  const auto cells = [](const std::string& row) {
    std::vector<std::string> out;
    std::stringstream in(row);
    for (std::string cell; std::getline(in, cell, ',');) out.push_back(cell);
    return out;
  };
  const std::vector<std::string> header = cells(rows[0]), was = cells(lost), now = cells(rows[2]);
  ASSERT_EQ(now.size(), header.size()) << rows[2];
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "checkpoint_s") {
      EXPECT_EQ(now[i], "nan") << rows[2];
    } else if (header[i] != "seconds" && header[i] != "straggler_slowdown") {
      EXPECT_EQ(now[i], was[i]) << header[i] << "\n" << lost << "\n" << rows[2];
    }
  }
  EXPECT_EQ(cells(rows[3])[0], "3");
}

TEST(RunRecovery, ExplicitResumeToAnEarlierCheckpointDiscardsTheLaterOnlyWithOverwrite) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 3));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const app::CheckpointStore store(dir.file("checkpoints"), 0);
  const auto paths = store.numbered();
  ASSERT_EQ(paths.size(), 3u);
  // Back to epoch 1: epochs 2 and 3 belong to the abandoned timeline, which
  // a later --resume auto would otherwise take up.
  r = run_lockstep(recovery_run(dir.path(), 2) + " --resume " + paths[0]);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "holds 2 later checkpoints (newest " + paths[2] + ")"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "--overwrite")) << r.output;
  EXPECT_EQ(store.numbered(), paths);
  r = run_lockstep(recovery_run(dir.path(), 2) + " --resume " + paths[0] + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string& later : {paths[1], paths[2]}) {
    EXPECT_EQ(count_lines_with(r.output, "resume: removed the later checkpoint " + later), 1u)
        << r.output;
  }
  // Epoch 2 written again; epoch 3 gone.
  EXPECT_EQ(store.numbered(), (std::vector<std::string>{paths[0], paths[1]}));
}

TEST(RunRecovery, MetricsThatCannotBeWrittenAreAnError) {
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  try {
    app::Report report(true, "none", "/dev/full", false);
    app::EpochResult r;
    r.epoch = 1;
    report.epoch(r, 1);
    ADD_FAILURE() << "writes to /dev/full were not noticed";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "/dev/full: cannot write metrics file: ")) << e.what();
  }
}

TEST(RunRecovery, FinishedRunSaysAlreadyCompleteAndTrainsNothing) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir.file("COMPLETE"))) << r.output;
  r = run_lockstep(recovery_run(dir.path(), 1) + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "already complete: 1 of 1 epochs")) << r.output;
  EXPECT_FALSE(contains(r.output, "epoch   1/1")) << r.output;
  EXPECT_EQ(lines_in(dir.file("metrics.csv")), 2u);
  EXPECT_TRUE(fs::exists(dir.file("COMPLETE")));
}

TEST(RunRecovery, FreshRunRefusesAnotherRunsCheckpointsUnlessOverwrite) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(recovery_run(dir.path(), 1) + " --seed 3");
  EXPECT_NE(r.exit_code, 0) << r.output;
  for (const char* remedy : {"--resume auto", "another --run-dir", "--overwrite"}) {
    EXPECT_TRUE(contains(r.output, remedy)) << remedy << " missing from\n" << r.output;
  }
  EXPECT_EQ(count_lines_with(r.output, "lockstep: rank"), 1u) << r.output;
  // A run that fails to start (a typo, a missing file) deletes nothing, even
  // under --overwrite: the run directory is touched only once all is known good.
  const std::string weights = testing::read_file(dir.file("model.safetensors"));
  ASSERT_FALSE(weights.empty());
  for (const char* typo : {" --model resnet-20",
                           " --init-from "
                           "/nonexistent.safetensors"}) {
    r = run_lockstep(recovery_run(dir.path(), 1) + " --seed 3 --overwrite" + typo);
    EXPECT_NE(r.exit_code, 0) << typo << "\n" << r.output;
    EXPECT_EQ(app::CheckpointStore(dir.file("checkpoints"), 0).numbered().size(), 1u) << typo;
    EXPECT_EQ(testing::read_file(dir.file("model.safetensors")), weights) << typo;
    EXPECT_EQ(lines_in(dir.file("metrics.csv")), 2u) << typo;
  }
  // The other run's best checkpoint goes with the rest of its results.
  testing::write_bytes(dir.file("best.lsck"), {'o', 'l', 'd'});
  r = run_lockstep(recovery_run(dir.path(), 1) + " --seed 3 --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines_in(dir.file("metrics.csv")), 2u);
  EXPECT_EQ(app::CheckpointStore(dir.file("checkpoints"), 0).numbered().size(), 1u);
  EXPECT_FALSE(fs::exists(dir.file("best.lsck")));
  EXPECT_TRUE(fs::exists(dir.file("model.safetensors")));  // this run's
}

TEST(RunRecovery, ResumePrintsChangedSettingsAndRefusesModelOrDataChanges) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  auto r = run_lockstep(recovery_run(dir.path(), 1));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lockstep(recovery_run(dir.path(), 2, 128) + " --resume auto");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "train_subset 256 -> 128")) << r.output;
  r = run_lockstep(recovery_run(dir.path(), 2) + " --resume auto --lr 0.02");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "setting changed since the checkpoint: lr: 0.01 -> 0.02"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "setting changed since the checkpoint: epochs: 1 -> 2"))
      << r.output;
  // Evaluation is no resume of the run: it may take another test subset.
  r = run_lockstep("evaluate --checkpoint " + testing::newest_checkpoint(dir.path()) +
                   " --test-subset 64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "(64 samples of fashion-mnist)")) << r.output;
}

// Files that changed under the same data_dir pass every key's comparison:
// the checkpoint's data hashes refuse them, naming the checkpoint, the set
// and where the data were read; the files it was trained on resume.
TEST(RunRecovery, ResumeRefusesOtherDataUnderTheSameDataDir) {
  ScratchDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  const auto written = testing::write_mnist_dir(data, 64, 32);
  const std::string args =
      testing::mnist_train_args(data, run, "--batch-size 16 --val-fraction 0.25");
  auto r = run_lockstep(args + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string checkpoint = testing::newest_checkpoint(run);
  const nlohmann::json stored = testing::final_checkpoint(run).meta.at("data");
  EXPECT_EQ(stored.at("train").at("samples"), 48);
  EXPECT_EQ(stored.at("validation").at("samples"), 16);
  EXPECT_EQ(stored.at("test").at("samples"), 32);
  EXPECT_EQ(stored.at("train").at("hash").get<std::string>().size(), 16u);

  // The same number of images, other pixels (labels kept).
  const std::string images = data + "/train-images-idx3-ubyte.gz";
  const auto other = testing::synthetic_images(64, 1, 28, 28, 10, 7);
  testing::write_idx_images(images, 64, 28, 28, other.images, true);
  r = run_lockstep(args + " --epochs 2 --resume auto");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, checkpoint + ": checkpoint was trained on other data than "))
      << r.output;
  EXPECT_TRUE(contains(r.output, "(training set 48 samples, hash " +
                                     stored.at("train").at("hash").get<std::string>() + " -> 48"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "; validation split 16 samples")) << r.output;
  EXPECT_FALSE(contains(r.output, "test set")) << r.output;
  EXPECT_TRUE(contains(r.output, "than " + data + " holds now")) << r.output;
  EXPECT_EQ(count_lines_with(r.output, "lockstep: rank 0: "), 1u) << r.output;

  testing::write_idx_images(images, 64, 28, 28, written.train.images, true);
  r = run_lockstep(args + " --epochs 2 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resuming from " + checkpoint)) << r.output;
}

// Checkpoints keep the kernels that trained them; a resume on others (here
// direct convolutions instead of Winograd's, as an AVX2 node after an
// AVX-512 one would be) says so, and one on the same says nothing.
TEST(RunRecovery, ResumeOnOtherKernelsSaysSo) {
  ScratchDir dir;
  const std::string data = dir.file("data"), run = dir.file("run");
  testing::write_mnist_dir(data, 64, 32);
  const std::string args = testing::mnist_train_args(data, run, "--batch-size 16");
  auto r = run_lockstep(args + " --epochs 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string kernels = testing::final_checkpoint(run).meta.at("kernels");
  EXPECT_TRUE(kernels.ends_with(" kernels, Winograd 3x3 convolutions")) << kernels;
  r = run_command("LOCKSTEP_CPU_WINOGRAD=0 " LOCKSTEP_BINARY " " + args +
                  " --epochs 2 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resume: the checkpoint was trained on " + kernels +
                                     ", this run uses " + kernels.substr(0, kernels.find(',')) +
                                     ", direct convolutions\n"))
      << r.output;
  r = run_command("LOCKSTEP_CPU_WINOGRAD=0 " LOCKSTEP_BINARY " " + args +
                  " --epochs 3 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "resuming from ")) << r.output;
  EXPECT_FALSE(contains(r.output, "was trained on")) << r.output;
}

// A checkpoint written before the data were kept (no "data") resumes: there
// is nothing to compare. Sets that one side lacks are not compared either.
TEST(RunRecovery, DataIdentityComparesTheSetsBothSidesRecord) {
  const nlohmann::json now = {{"train", {{"samples", 10}, {"hash", "00000000000000aa"}}},
                              {"test", {{"samples", 5}, {"hash", "00000000000000bb"}}}};
  EXPECT_NO_THROW(app::refuse_other_data(nlohmann::json(), now, "ck.lsck", "/data"));
  EXPECT_NO_THROW(app::refuse_other_data(now, now, "ck.lsck", "/data"));
  nlohmann::json grown = now;
  grown["test"]["samples"] = 6;
  EXPECT_NO_THROW(app::refuse_other_data({{"train", now["train"]}}, grown, "ck.lsck", "/data"));
  try {
    app::refuse_other_data(now, grown, "ck.lsck", "/data");
    ADD_FAILURE() << "a grown test set was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()),
              "ck.lsck: checkpoint was trained on other data than /data holds now (test set 5 "
              "samples, hash 00000000000000bb -> 6 samples, hash 00000000000000bb): resume with "
              "the files it was trained on, or start a new run (another run_dir, or --overwrite)");
  }
}

// Another value of the key's field (any type).
void change(const app::Key& key, app::TrainConfig& c) {
  std::visit(
      [&](auto app::TrainConfig::*field) {
        auto& v = c.*field;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          v = !v;
        } else if constexpr (std::is_enum_v<T>) {
          v = static_cast<T>(static_cast<int>(v) + 1);  // the defaults are the first values
        } else if constexpr (std::is_arithmetic_v<T>) {
          v = static_cast<T>(v + 1);
        } else if constexpr (std::is_same_v<T, std::string>) {
          v += "x";
        } else {
          v.emplace_back();
        }
      },
      key.field);
}

// The resume policy follows each key's OnResume attribute in the schema:
// a fixed key's change is refused naming it, any other change is allowed,
// and launch-only keys are not even listed.
TEST(RunRecovery, ResumePolicyFollowsTheSchemasOnResumeAttribute) {
  std::set<std::string> fixed, launch_only;
  for (const app::Key& key : app::config_schema()) {
    SCOPED_TRACE(key.name);
    const app::TrainConfig stored;
    app::TrainConfig current;
    change(key, current);
    const auto changed = app::changed_settings(stored, current);
    bool refused = false;
    try {
      app::refuse_model_or_data_changes(stored, current, "ck.lsck");
    } catch (const InputError& e) {
      refused = true;
      EXPECT_TRUE(contains(e.what(), std::string("(") + key.name + " ")) << e.what();
    }
    EXPECT_EQ(refused, key.on_resume == app::OnResume::kFixed);
    EXPECT_EQ(changed.size(), key.on_resume == app::OnResume::kLaunchOnly ? 0u : 1u);
    if (key.on_resume == app::OnResume::kFixed) fixed.insert(key.name);
    if (key.on_resume == app::OnResume::kLaunchOnly) launch_only.insert(key.name);
  }
  EXPECT_EQ(fixed, (std::set<std::string>{"augment", "dataset", "image_channels", "image_size",
                                          "layers", "loss", "model", "normalize_mean",
                                          "normalize_std", "skip_bad_images", "test_subset",
                                          "train_subset", "val_fraction"}));
  EXPECT_EQ(launch_only, (std::set<std::string>{"overwrite", "progress", "resident_data_mb",
                                                "resume", "timeline"}));
}

// The seed may change on resume (listed), except where it drew the
// validation split: then it would move samples between the two sets.
TEST(RunRecovery, SeedIsFixedOnResumeOnlyWhereItDrewTheValidationSplit) {
  app::TrainConfig stored, current;
  current.seed = stored.seed + 1;
  EXPECT_NO_THROW(app::refuse_model_or_data_changes(stored, current, "ck.lsck"));
  stored.val_fraction = current.val_fraction = 0.1;
  try {
    app::refuse_model_or_data_changes(stored, current, "ck.lsck");
    ADD_FAILURE() << "a new seed was accepted with val_fraction 0.1";
  } catch (const InputError& e) {
    EXPECT_TRUE(contains(e.what(), "ck.lsck: ")) << e.what();
    EXPECT_TRUE(contains(e.what(), "(seed ")) << e.what();
  }
}

TEST(RunRecovery, NonFiniteLossStopsTrainingWithoutACheckpoint) {
  REQUIRE_FASHION_MNIST();
  for (const char* lr : {"1e30", "1e38"}) {  // inf itself is refused by validation
    ScratchDir dir;
    const auto r = run_lockstep(recovery_run(dir.path(), 2) + " --lr " + lr);
    EXPECT_EQ(r.exit_code, 1) << lr << "\n" << r.output;
    EXPECT_EQ(count_lines_with(r.output, "training diverged: the loss is"), 1u) << r.output;
    EXPECT_TRUE(contains(r.output, "in epoch 1 step ")) << r.output;
    EXPECT_TRUE(app::CheckpointStore(dir.file("checkpoints"), 0).numbered().empty()) << lr;
    EXPECT_FALSE(fs::exists(dir.file("COMPLETE")));
  }
}

TEST(RunRecovery, OneProcessErrorIsOneLine) {
  const auto r = run_lockstep("train --batch-size 0");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::vector<std::string> lines = testing::lines_of(r.output);
  ASSERT_EQ(lines.size(), 1u) << r.output;
  EXPECT_TRUE(contains(lines[0], "lockstep: rank 0: config key batch_size must be > 0"))
      << r.output;
}

// A stand-in launcher that reports success whatever the run did, as
// mpiexec did after SIGTERM: the job script still tells the two apart.
TEST(RunRecovery, JobScriptExitsNonZeroWhenTheRunDidNotFinish) {
  REQUIRE_FASHION_MNIST();
  ScratchDir dir;
  const std::string launcher = dir.file("srun");
  // Drops srun's options (--cpu-bind=cores -c N ...), runs the command.
  std::ofstream(launcher) << "#!/bin/sh\nwhile [ \"${1#-}\" != \"$1\" ]; do\n"
                             "  case $1 in -c|-n|-N) shift 2 ;; *) shift ;; esac\ndone\n"
                             "\"$@\"\nexit 0\n";
  fs::permissions(launcher, fs::perms::owner_all);
  const std::string job = "cd " LOCKSTEP_SOURCE_DIR " && PATH=" + dir.path() +
                          ":$PATH LOCKSTEP=" LOCKSTEP_BINARY
                          " DEVICE=cpu bash jobs/slurm.sbatch.sh configs/fashion_mnist.toml "
                          "--train-subset 256 --test-subset 128 --epochs 1 --progress plain "
                          "--run-dir " +
                          dir.file("run");
  auto r = run_command(job + " --lr inf");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "did not reach its last epoch (launcher exit status 0)"))
      << r.output;
  r = run_command(job + " --overwrite");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "complete: epoch 1 of 1")) << r.output;
}

}  // namespace
}  // namespace lockstep
