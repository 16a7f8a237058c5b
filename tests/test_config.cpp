// The config schema (app/config/config_schema.h): TOML files through toml++ (syntax,
// duplicate, unknown and wrong-typed keys), command-line flags (booleans,
// out-of-range numbers), ranges, the JSON round trip, per-subcommand help,
// the generated configs/README.md, and the one-line errors of `lockstep`
// for bad threads and for thread creation that fails.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "app/checkpoint/checkpoint.h"
#include "app/config/config.h"
#include "app/config/config_schema.h"
#include "common/error.h"
#include "support/dataset_files.h"
#include "support/run_command.h"
#include "support/run_files.h"

namespace lockstep {
namespace {

using app::TrainConfig;
using testing::read_file;
using testing::run_command;
using testing::run_lockstep;
using testing::ScratchDir;

// The InputError message of applying `text` as a TOML config file for train.
std::string file_error(const std::string& text, std::string* path_out = nullptr) {
  ScratchDir dir;
  const std::string path = dir.file("c.toml");
  std::ofstream(path, std::ios::binary) << text;
  if (path_out) *path_out = path;
  TrainConfig c;
  try {
    app::apply_config_file(path, app::kTrain, c);
  } catch (const InputError& e) {
    const std::string prefix = "config file " + path;
    const std::string message = e.what();
    EXPECT_EQ(message.rfind(prefix, 0), 0u) << message;
    return message.substr(prefix.size());
  }
  return "(no error)";
}

std::string validate_error(const TrainConfig& c) {
  try {
    app::validate(c);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// read_config for `train ARGS`; error text or "" when fine.
std::string parse_train(const std::vector<std::string>& args, TrainConfig* out = nullptr) {
  CLI::App cli;
  auto* train = cli.add_subcommand("train");
  app::add_config_options(*train, app::kTrain);
  std::vector<std::string> argv = {"lockstep", "train"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> ptrs;
  for (auto& a : argv) ptrs.push_back(a.data());
  try {
    cli.parse(static_cast<int>(ptrs.size()), ptrs.data());
    const TrainConfig c = app::read_config(*train, app::kTrain);
    if (out) *out = c;
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigFile, WrongTypesNameTheKeyAndTheExpectedType) {
  EXPECT_EQ(file_error("nesterov = []\n"),
            ":1: key nesterov has value [] of the wrong type (true/false expected)");
  EXPECT_EQ(file_error("momentum_correction = []\n"),
            ":1: key momentum_correction has value [] of the wrong type (true/false expected)");
  EXPECT_EQ(file_error("nesterov = 7\n"),
            ":1: key nesterov has value 7 of the wrong type (true/false expected)");
  EXPECT_EQ(file_error("\nepochs = \"x\"\n"),
            ":2: key epochs has value \"x\" of the wrong type (integer expected)");
  EXPECT_EQ(file_error("lr_milestones = [1, \"a\"]\n"),
            ":1: key lr_milestones has value [1, \"a\"] of the wrong type (list of integers "
            "expected)");
  EXPECT_EQ(file_error("seed = -1\n"),
            ":1: key seed has value -1 of the wrong type (integer >= 0 expected)");
  EXPECT_EQ(file_error("lr = \"0.1\"\n"),
            ":1: key lr has value \"0.1\" of the wrong type (number expected)");
}

TEST(ConfigFile, RangeErrorsNameTheLine) {
  EXPECT_EQ(file_error("epochs = 1\nthreads = 100000\n"),
            ":2: config key threads must be from 0 to 1024, got 100000");
  EXPECT_EQ(file_error("lr = inf\n"), ":1: config key lr must be a finite number, got inf");
  EXPECT_EQ(file_error("batch_size = 0\n"),
            ":1: config key batch_size must be > 0 and <= 16777216, got 0");
  // The optimizer's and the image folder's own bounds, named at the key
  EXPECT_EQ(file_error("adam_beta2 = 1\n"),
            ":1: config key adam_beta2 must be >= 0 and < 1, got 1");
  EXPECT_EQ(file_error("adam_eps = 0\n"), ":1: config key adam_eps must be > 0, got 0");
  EXPECT_EQ(file_error("image_size = 16385\n"),
            ":1: config key image_size must be from 0 to 16384, got 16385");
}

TEST(ConfigFile, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(file_error("epochs = 2\nlr_milestones = [1, 2\n"),
            ":2: Error while parsing array: encountered end-of-file");
  EXPECT_EQ(file_error("model = \"mnist_net"),
            ":1: Error while parsing string: encountered end-of-file");
  EXPECT_EQ(file_error("model = \"mnist_net\nepochs = 1\n"),
            ":1: Error while parsing string: unescaped control characters other than TAB (U+0009) "
            "are explicitly prohibited");
  EXPECT_EQ(file_error("epochs = 3\nepochs = 4\n"),
            ":2: Error while parsing key-value pair: cannot redefine existing integer 'epochs'");
  EXPECT_EQ(file_error("epochs = 1 x\n"),
            ":1: Error while parsing key-value pair: expected a comment or whitespace, saw 'x'");
}

TEST(ConfigFile, BinaryGarbageIsOneLine) {
  std::string path;
  const std::string message = file_error(std::string("\x01\x02\nfoo\0bar\n\xff\xfe", 14), &path);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_EQ(message.rfind(":", 0), 0u) << message;  // right after the file name
}

// `data show --config` reads a training file: the keys it does not use are
// still checked (type and range) with their line, but not applied.
TEST(ConfigFile, OtherSubcommandsKeysAreCheckedButNotApplied) {
  TrainConfig c;
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::apply_config_text("seed = 3\nepochs = \"ten\"\n", "in", app::kDataShow, c); },
      {"config file in:2: key epochs has value \"ten\" of the wrong type (integer expected)"}));
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::apply_config_text("batch_size = 0\n", "in", app::kDataShow, c); },
      {"config file in:1: config key batch_size must be > 0 and <= 16777216, got 0"}));
  TrainConfig show;
  app::FileLines lines;
  app::apply_config_text("epochs = 3\nseed = 7\n", "in", app::kDataShow, show, &lines);
  EXPECT_EQ(show.epochs, TrainConfig{}.epochs);
  EXPECT_EQ(lines, (app::FileLines{{"seed", "config file in:2"}}));
  ScratchDir dir;
  std::ofstream(dir.file("c.toml")) << "dataset = \"mnist\"\nmomentum = \"high\"\n";
  const auto r =
      run_lockstep("data show --config " + dir.file("c.toml") + " --out " + dir.file("s.png"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("c.toml:2: key momentum has value \"high\" of the wrong type (number "
                          "expected)"),
            std::string::npos)
      << r.output;
}

TEST(ConfigFile, KeysMayBeSpelledWithDashesOnce) {
  TrainConfig c;
  app::apply_config_text("batch-size = 32\n", "inline", app::kTrain, c);
  EXPECT_EQ(c.batch_size, 32);
  EXPECT_EQ(file_error("batch_size = 32\nbatch-size = 16\n"),
            ":2: key batch_size is given twice (lines 1 and 2, once with '-')");
}

TEST(ConfigFile, TheFirstBadLineIsNamed) {
  EXPECT_EQ(file_error("zz = 1\nepochs = 0\n"), ":1: unknown key zz");
  EXPECT_EQ(file_error("lr = 0\naa = 1\n"), ":1: config key lr must be > 0, got 0");
}

TEST(ConfigFile, UnknownKeysAndSectionsAreRefused) {
  EXPECT_EQ(file_error("batch_sise = 32\n"),
            ":1: unknown key batch_sise (did you mean batch_size?)");
  EXPECT_EQ(file_error("epochs = 1\n[train]\nlr = 0.1\n"),
            ":2: unknown key train (sections are not used: write every key at the top level)");
  EXPECT_EQ(file_error("a.b = 1\n"),
            ":1: unknown key a (sections are not used: write every key at the top level)");
}

TEST(ConfigFile, MissingFileIsNamed) {
  TrainConfig c;
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::apply_config_file("/nonexistent/x.toml", app::kTrain, c); },
      {"config file /nonexistent/x.toml: cannot be read"}));
  // A folder: named, not libstdc++'s "basic_filebuf::underflow"
  ScratchDir dir;
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::apply_config_file(dir.path(), app::kTrain, c); },
      {"config file " + dir.path() + ": is a folder, not a TOML file"}));
}

TEST(ConfigFile, TextReadsAsAFileNamedByItsSource) {
  TrainConfig c;
  app::apply_config_text("epochs = 3\nlr = 1e-3\n", "inline", app::kTrain, c);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(c.lr, 1e-3);
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::apply_config_text("epochs = [", "inline", app::kTrain, c); },
      {"config file inline:1: Error while parsing array"}));
  // Keys of other subcommands are known but not applied.
  TrainConfig show;
  app::apply_config_text("epochs = 3\nseed = 7\n", "inline", app::kDataShow, show);
  EXPECT_EQ(show.epochs, TrainConfig{}.epochs);
  EXPECT_EQ(show.seed, 7u);
}

// A file's values, through JSON (as checkpoints store them) and back.
TEST(ConfigFile, RoundTripsThroughJson) {
  ScratchDir dir;
  const std::string path = dir.file("c.toml");
  std::ofstream(path) << "epochs = 7\nlr = 0.25\nwarmup_epochs = 1\nnesterov = true\n"
                         "seed = 12345678901\nlayers = [\"flatten\", \"linear out=10\"]\n"
                         "model = \"custom\"\nnormalize_mean = [0.5]\nnormalize_std = [0.25]\n"
                         "lr_milestones = [2, 4]\noverlap = false\ndataset = \"mnist\"\n";
  TrainConfig c;
  app::apply_config_file(path, app::kTrain, c);
  app::validate(c);
  EXPECT_EQ(c.epochs, 7);
  EXPECT_EQ(c.lr, 0.25);
  EXPECT_EQ(c.warmup_epochs, 1.0);
  EXPECT_TRUE(c.nesterov);
  EXPECT_FALSE(c.overlap);
  EXPECT_EQ(c.seed, 12345678901u);
  EXPECT_EQ(c.layers, (std::vector<std::string>{"flatten", "linear out=10"}));
  EXPECT_EQ(c.normalize_mean, std::vector<float>{0.5f});
  EXPECT_EQ(c.lr_milestones, (std::vector<int64_t>{2, 4}));
  const nlohmann::json j = app::to_json(c);
  const TrainConfig back = app::train_config_from_json(j, "test");
  EXPECT_EQ(app::to_json(back), j);
  EXPECT_EQ(back.layers, c.layers);
  // A stored config of an older version (fewer keys) keeps the defaults.
  const TrainConfig old = app::train_config_from_json({{"epochs", 3}, {"model", "mnist_net"}}, "x");
  EXPECT_EQ(old.epochs, 3);
  EXPECT_EQ(old.batch_size, TrainConfig{}.batch_size);
}

TEST(ConfigRanges, EveryBadValueIsNamed) {
  auto with = [](auto set) {
    TrainConfig c;
    set(c);
    return validate_error(c);
  };
  EXPECT_EQ(validate_error(TrainConfig{}), "(no error)");
  EXPECT_EQ(with([](TrainConfig& c) { c.lr = INFINITY; }),
            "config key lr must be a finite number, got inf");
  EXPECT_EQ(with([](TrainConfig& c) { c.lr = NAN; }),
            "config key lr must be a finite number, got nan");
  EXPECT_EQ(with([](TrainConfig& c) { c.lr = 0; }), "config key lr must be > 0, got 0");
  EXPECT_EQ(with([](TrainConfig& c) { c.batch_size = 0; }),
            "config key batch_size must be > 0 and <= 16777216, got 0");
  EXPECT_EQ(with([](TrainConfig& c) { c.threads = 100000; }),
            "config key threads must be from 0 to 1024, got 100000");
  EXPECT_EQ(with([](TrainConfig& c) { c.threads = -1; }),
            "config key threads must be from 0 to 1024, got -1");
  EXPECT_EQ(with([](TrainConfig& c) { c.epochs = 2000000; }),
            "config key epochs must be > 0 and <= 1000000, got 2000000");
  EXPECT_EQ(with([](TrainConfig& c) { c.augment = "maybe"; }),
            "config key augment is \"maybe\"; expected one of auto, on, off");
  EXPECT_EQ(with([](TrainConfig& c) { c.image_channels = 2; }),
            "config key image_channels is 2; expected one of 0, 1, 3");
  EXPECT_EQ(with([](TrainConfig& c) {
              c.normalize_mean = {0.5f};
              c.normalize_std = {0.0f};
            }),
            "config key normalize_std must be > 0, got 0");
}

TEST(ConfigFlags, BooleansTakeASeparateValue) {
  TrainConfig c;
  ASSERT_EQ(parse_train({"--overlap", "false"}, &c), "");
  EXPECT_FALSE(c.overlap);
  ASSERT_EQ(parse_train({"--overlap=false", "--nesterov"}, &c), "");
  EXPECT_FALSE(c.overlap);
  EXPECT_TRUE(c.nesterov);
  ASSERT_EQ(parse_train({"--drop-last", "true", "--epochs", "3"}, &c), "");
  EXPECT_TRUE(c.drop_last);
  EXPECT_EQ(c.epochs, 3);
  EXPECT_EQ(parse_train({"--overlap", "maybe"}), "flag --overlap maybe: expected true or false");
}

TEST(ConfigFlags, OutOfRangeNumbersAreErrorsNotClamped) {
  EXPECT_EQ(parse_train({"--batch-size", "99999999999999999999"}),
            "flag --batch-size 99999999999999999999: expected an integer (> 0 and <= 16777216)");
  EXPECT_EQ(parse_train({"--lr", "inf"}), "config key lr must be a finite number, got inf");
  EXPECT_EQ(parse_train({"--lr", "0.1x"}), "flag --lr 0.1x: expected a number (> 0)");
  EXPECT_EQ(parse_train({"--seed", "-3"}), "flag --seed -3: expected an integer");
  EXPECT_EQ(parse_train({"--threads", "100000"}),
            "config key threads must be from 0 to 1024, got 100000");
  TrainConfig c;
  ASSERT_EQ(parse_train({"--normalize-mean", "0.5", "0.25", "--normalize-std", "1", "2"}, &c), "");
  EXPECT_EQ(c.normalize_mean, (std::vector<float>{0.5f, 0.25f}));
}

// Ranks must agree on what decides their collectives: the timeline (made
// and merged collectively), not the threads each rank runs.
TEST(ConfigFingerprint, CoversTheTimelineButNotTheThreads) {
  TrainConfig a, b;
  b.threads = a.threads + 1;
  EXPECT_EQ(app::fingerprint_items(a), app::fingerprint_items(b));
  b.timeline = "t.json";
  EXPECT_NE(app::fingerprint_items(a), app::fingerprint_items(b));
}

TEST(ConfigFlags, CommandLineWinsOverTheFile) {
  ScratchDir dir;
  std::ofstream(dir.file("c.toml")) << "epochs = 5\nlr = 0.5\n";
  TrainConfig c;
  ASSERT_EQ(parse_train({"--config", dir.file("c.toml"), "--epochs", "2"}, &c), "");
  EXPECT_EQ(c.epochs, 2);
  EXPECT_EQ(c.lr, 0.5);
  EXPECT_EQ(c.config_file, dir.file("c.toml"));
  // A value out of range in the file: the command line may replace it; kept,
  // it is refused with the file and line.
  std::ofstream(dir.file("bad.toml")) << "epochs = 5\nbatch_size = 0\n";
  ASSERT_EQ(parse_train({"--config", dir.file("bad.toml"), "--batch-size", "5"}, &c), "");
  EXPECT_EQ(c.batch_size, 5);
  EXPECT_EQ(parse_train({"--config", dir.file("bad.toml"), "--epochs", "2"}),
            "config file " + dir.file("bad.toml") +
                ":2: config key batch_size must be > 0 and <= 16777216, got 0");
}

// Each subcommand's help lists the keys it uses and no others.
TEST(ConfigHelp, EachSubcommandListsOnlyItsKeys) {
  const auto show = run_lockstep("data show --help");
  ASSERT_EQ(show.exit_code, 0) << show.output;
  for (const char* used : {"--dataset", "--data-dir", "--augment", "--seed", "--per-class"}) {
    EXPECT_NE(show.output.find(used), std::string::npos) << used << "\n" << show.output;
  }
  for (const char* unused : {"--lr ", "--epochs", "--batch-size", "--overlap", "--optimizer"}) {
    EXPECT_EQ(show.output.find(unused), std::string::npos) << unused << "\n" << show.output;
  }
  const auto eval = run_lockstep("evaluate --help");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  for (const char* used : {"--checkpoint", "--data-dir", "--test-subset", "--threads",
                           "--liveness-timeout-s", "--heartbeat-interval-s"}) {
    EXPECT_NE(eval.output.find(used), std::string::npos) << used << "\n" << eval.output;
  }
  EXPECT_EQ(eval.output.find("--epochs"), std::string::npos) << eval.output;
  const auto train = run_lockstep("train --help");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  for (const app::Key& key : app::config_schema()) {
    if ((key.commands & app::kTrain) == 0) continue;
    EXPECT_NE(train.output.find("--" + std::string(key.name)), std::string::npos) << key.name;
  }
  EXPECT_NE(train.output.find("--overlap BOOL=true"), std::string::npos) << train.output;
}

TEST(ConfigDocs, ReadmeIsCurrent) {
  const std::string readme = read_file(std::string(LOCKSTEP_SOURCE_DIR) + "/configs/README.md");
  const std::string table = app::options_markdown();
  EXPECT_NE(readme.find(table), std::string::npos)
      << "configs/README.md is out of date: run scripts/gen_config_docs.sh";
  const auto r = run_lockstep("options");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, table);
  EXPECT_NE(table.find("| `overlap` | true/false | `true` |"), std::string::npos) << table;
}

// A command's output that cannot be written (a full disk behind `>`) is an
// error, not exit 0 with nothing written.
// A misspelt dataset or model is refused where it is written, with the
// names that exist, before any data is read.
TEST(ConfigErrors, DatasetAndModelNamesAreCheckedAtTheKey) {
  ScratchDir dir;
  std::ofstream(dir.file("c.toml")) << "epochs = 1\ndataset = \"fashion_mnist\"\n";
  TrainConfig c;
  EXPECT_EQ(parse_train({"--config", dir.file("c.toml")}, &c),
            "config file " + dir.file("c.toml") +
                ":2: config key dataset is \"fashion_mnist\"; expected one of fashion-mnist, "
                "mnist, cifar10, folder");
  const std::string model = parse_train({"--model", "resnet-20"}, &c);
  EXPECT_EQ(model.rfind("config key model is \"resnet-20\"; expected one of mnist_net,", 0), 0u)
      << model;
  EXPECT_NE(model.find("custom"), std::string::npos) << model;
}

// A combination of keys that does not go together is named at the line of
// the first key involved that the file set, or at its flag.
TEST(ConfigErrors, CrossKeyErrorsNameTheLineOrTheFlag) {
  ScratchDir dir;
  const std::string path = dir.file("c.toml");
  std::ofstream(path) << "epochs = 1\ngradient_engine = \"nccl\"\ndevice = \"cpu\"\n";
  std::string at = "config file " + path;
  EXPECT_EQ(parse_train({"--config", path}),
            at + ":2: config key gradient_engine = \"nccl\" needs device = \"cuda\" or \"auto\"");
  // The command line replaced the file's gradient_engine: its flag is named.
  EXPECT_EQ(parse_train({"--config", path, "--gradient-engine", "nccl"}),
            "flag --gradient-engine: config key gradient_engine = \"nccl\" needs device = "
            "\"cuda\" or \"auto\"");
  // Left at its default, the other key's line is named.
  std::ofstream(dir.file("best.toml")) << "epochs = 1\n\nkeep_best = true\n";
  at = "config file " + dir.file("best.toml");
  EXPECT_EQ(parse_train({"--config", dir.file("best.toml")}),
            at + ":3: config keys keep_best and patience need a validation split: set "
                 "val_fraction > 0 (and eval_every > 0)");
  EXPECT_EQ(parse_train({"--patience", "2"}),
            "flag --patience: config keys keep_best and patience need a validation split: set "
            "val_fraction > 0 (and eval_every > 0)");
  std::ofstream(dir.file("norm.toml")) << "normalize_std = [0.5, 0.5]\nnormalize_mean = [0.5]\n";
  at = "config file " + dir.file("norm.toml");
  EXPECT_EQ(parse_train({"--config", dir.file("norm.toml")}),
            at + ":2: config keys normalize_mean and normalize_std need the same number of "
                 "values (1 and 2)");
  std::ofstream(dir.file("fp16.toml")) << "epochs = 1\nprecision = \"fp16\"\n";
  const std::string fp16 = parse_train({"--config", dir.file("fp16.toml")});
  EXPECT_EQ(fp16.rfind("config file " + dir.file("fp16.toml") + ":2: config key precision", 0), 0u)
      << fp16;
  std::ofstream(dir.file("beat.toml")) << "liveness_timeout_s = 5\nheartbeat_interval_s = 5\n";
  EXPECT_EQ(parse_train({"--config", dir.file("beat.toml")}),
            "config file " + dir.file("beat.toml") +
                ":2: config key heartbeat_interval_s (5) must be above 0 and below "
                "liveness_timeout_s (5)");
  // val_fraction = 1 is out of its range, named at its line like any other.
  std::ofstream(dir.file("val.toml")) << "epochs = 1\nval_fraction = 1\n";
  EXPECT_EQ(parse_train({"--config", dir.file("val.toml")}),
            "config file " + dir.file("val.toml") +
                ":2: config key val_fraction must be >= 0 and < 1, got 1");
  // The origins travel with the config: a later validate() (the Trainer's)
  // names the same line.
  TrainConfig c;
  std::ofstream(dir.file("ok.toml")) << "epochs = 1\nlr = 0.5\n";
  ASSERT_EQ(parse_train({"--config", dir.file("ok.toml"), "--device", "cpu"}, &c), "");
  c.gradient_engine = "nccl";
  c.origins["gradient_engine"] = c.origins.at("lr");
  EXPECT_EQ(validate_error(c), "config file " + dir.file("ok.toml") +
                                   ":2: config key gradient_engine = \"nccl\" needs device = "
                                   "\"cuda\" or \"auto\"");
  c.lr = 0;
  EXPECT_EQ(validate_error(c),
            "config file " + dir.file("ok.toml") + ":2: config key lr must be > 0, got 0");
}

// A path in a config file is looked up from the working directory; one that
// is not there is named with its key, its line and that directory.
TEST(ConfigErrors, MissingInputPathsNameTheKeyAndTheWorkingDirectory) {
  ScratchDir dir;
  const std::string path = dir.file("c.toml");
  std::ofstream(path) << "epochs = 1\ndata_dir = \"lockstep-no-such-data\"\n"
                         "init_from = \"/nonexistent/w.safetensors\"\n";
  TrainConfig c;
  ASSERT_EQ(parse_train({"--config", path, "--resume", dir.path()}, &c), "");
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::check_input_path(c, "data_dir"); },
      {"config file " + path +
       ":2: config key data_dir = \"lockstep-no-such-data\": no such folder (a relative path is "
       "looked up from the working directory, " +
       cwd + ", not from the config file's folder)"}));
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::check_input_path(c, "init_from"); },
      {"config file " + path +
       ":3: config key init_from = \"/nonexistent/w.safetensors\": no such file"}));
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::check_input_path(c, "resume"); },
      {"flag --resume: config key resume = \"" + dir.path() + "\": not a regular file"}));
  c.dataset = "cifar10";  // a built-in set that is downloaded: says how
  EXPECT_TRUE(testing::throws_input_error(
      [&] { app::check_input_path(c, "data_dir"); },
      {"not from the config file's folder); scripts/fetch_data.sh cifar10 downloads cifar10 into "
       "data/cifar10 of the repository"}));
  c.data_dir = dir.path();
  c.resume = "auto";
  EXPECT_NO_THROW(app::check_input_path(c, "data_dir"));
  EXPECT_NO_THROW(app::check_input_path(c, "resume"));
  // Through the command: before any data is read.
  const auto r =
      run_lockstep("train --config " + path + " --progress none --run-dir " + dir.file("run"));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("c.toml:2: config key data_dir = \"lockstep-no-such-data\": no such "
                          "folder (a relative path is looked up from the working directory"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir.file("run"))) << "nothing written";
}

TEST(ConfigErrors, AnUnwritableStandardOutputIsAnError) {
  const auto r = run_command("{ " LOCKSTEP_BINARY " info >/dev/full; }");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot write the standard output: No space left on device"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(run_command(LOCKSTEP_BINARY " info >/dev/null").exit_code, 0);
}

// bench starts the liveness monitor as train does: its two keys reach it.
TEST(ConfigErrors, BenchLivenessKeysAreChecked) {
  const auto r = run_lockstep(
      "bench --model mnist_net --threads 1 --seconds 0.01 --liveness-timeout-s 1 "
      "--heartbeat-interval-s 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("heartbeat_interval_s (2)"), std::string::npos) << r.output;
  const auto help = run_lockstep("bench --help");
  EXPECT_NE(help.output.find("--liveness-timeout-s"), std::string::npos) << help.output;
}

TEST(ConfigErrors, TooManyThreadsIsAOneLineError) {
  const auto r = run_lockstep("train --threads 100000");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("config key threads must be from 0 to 1024, got 100000"),
            std::string::npos)
      << r.output;
}

// Sanitizers reserve more address space than the limit below leaves.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LOCKSTEP_SANITIZED 1
#endif
#endif
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(LOCKSTEP_SANITIZED)
// Thread creation that fails (here: no address space for the stacks) ends
// the run with one line instead of hanging.
TEST(ConfigErrors, ThreadCreationFailureIsAnErrorNotAHang) {
  const auto r = run_command("ulimit -v 3000000 && " LOCKSTEP_BINARY
                             " bench --model mnist_net --threads 1000 --seconds 0.01");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("cannot start 1000 compute threads"), std::string::npos) << r.output;
}
#endif

}  // namespace
}  // namespace lockstep
