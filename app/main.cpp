// The lockstep command: parse, build the communicator, run one subcommand.
// Any error on any rank prints one line tagged with the rank and ends the
// whole job non-zero (distributed/failure.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "app/bench.h"
#include "app/build_info.h"
#include "app/checkpoint.h"
#include "app/config.h"
#include "app/data_show.h"
#include "app/predict.h"
#include "app/timeline_report.h"
#include "app/trainer.h"
#include "distributed/failure.h"
#include "distributed/mpi_communicator.h"

namespace {

using lockstep::app::TrainConfig;

struct EvaluateArgs {
  std::string checkpoint, data_dir;
  int64_t test_subset = -1, threads = 0;
};

int train(const TrainConfig& config, lockstep::distributed::Communicator& comm) {
  lockstep::app::Trainer trainer(config, comm);
  trainer.run();
  return 0;
}

int evaluate(const EvaluateArgs& args, lockstep::distributed::Communicator& comm) {
  const auto ckpt = lockstep::app::load_checkpoint(args.checkpoint);
  TrainConfig config = lockstep::app::train_config_from_json(
      ckpt.meta.value("config", nlohmann::json::object()), args.checkpoint);
  config.resume = args.checkpoint;
  config.run_dir.clear();
  config.progress = "none";
  config.timeline.clear();
  if (!args.data_dir.empty()) config.data_dir = args.data_dir;
  if (args.test_subset >= 0) config.test_subset = args.test_subset;
  config.threads = args.threads;
  lockstep::app::Trainer trainer(config, comm);
  const auto r = trainer.evaluate();
  if (comm.rank() == 0) {
    std::printf("%s: test loss %.4f acc %.2f%% (%lld samples of %s)\n", args.checkpoint.c_str(),
                r.loss, 100.0 * r.accuracy, static_cast<long long>(r.samples),
                config.dataset.c_str());
  }
  return 0;
}

struct BenchArgs {
  std::vector<std::string> models{"mnist_net", "alexnet_cifar"};
  std::vector<int> threads{1, 2};
  int64_t batch = 0;
  double seconds = 3.0;
  std::string timeline;  // Chrome trace of the timed steps ("": none)
  bool allreduce = false;
  std::vector<double> bucket_caps{25.0};
  std::vector<double> chunks{1.0};
  double first_bucket_mb = 1.0;
  int repeats = 10;
  bool no_overlap = false;
  double stall_warning_s = 60.0;   // as train's default; 0: blocking MPI calls
  std::string precision = "fp32";  // fp32 | bf16
};

// The fused gradient reduction against one plain allreduce of the same bytes.
int bench_allreduce(const BenchArgs& args, lockstep::distributed::Communicator& comm) {
  for (const std::string& model : args.models) {
    for (double cap : args.bucket_caps) {
      for (double chunk : args.chunks) {
        const auto r = lockstep::app::run_allreduce_bench(
            {model, args.first_bucket_mb, cap, !args.no_overlap, args.repeats, chunk}, comm);
        if (comm.rank() == 0) std::cout << lockstep::app::format_allreduce_result(r, comm.size());
        std::cout.flush();
      }
    }
  }
  return 0;
}

// One line per case: model, batch, ranks, threads, images/second (also as
// JSON lines for scripts: "bench {...}").
int bench(const BenchArgs& args, lockstep::distributed::Communicator& comm) {
  lockstep::distributed::StallPolicy stall;
  stall.warning_seconds = args.stall_warning_s;
  comm.set_stall_policy(stall);
  if (args.allreduce) return bench_allreduce(args, comm);
  std::unique_ptr<lockstep::distributed::Timeline> timeline;
  if (!args.timeline.empty()) timeline = lockstep::distributed::make_timeline(args.timeline, comm);
  for (const std::string& model : args.models) {
    for (int threads : args.threads) {
      for (double chunk : args.chunks) {
        lockstep::app::BenchCase c{model, args.batch, threads, chunk};
        c.precision = lockstep::nn::parse_precision(args.precision, "bench --precision");
        if (c.batch == 0) c.batch = model == "mnist_net" ? 64 : 128;
        const auto r = lockstep::app::run_bench(c, comm, args.seconds, timeline.get());
        if (comm.rank() != 0) continue;
        char chunk_note[48] = "";
        if (args.chunks.size() > 1) {
          std::snprintf(chunk_note, sizeof(chunk_note), "  chunk %g MiB", chunk);
        }
        std::printf("%-14s batch %4lld x %d rank%s  %d thread%s  %10.1f img/s  %8.3f ms/step%s%s\n",
                    model.c_str(), static_cast<long long>(c.batch), comm.size(),
                    comm.size() == 1 ? " " : "s", threads, threads == 1 ? " " : "s",
                    r.images_per_second, 1e3 * r.seconds_per_step, chunk_note,
                    args.precision == "fp32" ? "" : ("  " + args.precision).c_str());
        std::printf(
            "bench {\"model\": \"%s\", \"batch\": %lld, \"ranks\": %d, \"threads\": %d, "
            "\"allreduce_chunk_mb\": %g, \"precision\": \"%s\", \"images_per_second\": %.1f}\n",
            model.c_str(), static_cast<long long>(c.batch), comm.size(), threads, chunk,
            args.precision.c_str(), r.images_per_second);
        std::fflush(stdout);
      }
    }
  }
  if (timeline) {
    for (const std::string& lost : lockstep::distributed::finish_timeline(*timeline, comm))
      std::fprintf(stderr, "lockstep bench: timeline: could not merge %s\n", lost.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  lockstep::distributed::MpiEnvironment mpi(&argc, &argv);
  auto comm = lockstep::distributed::make_mpi_communicator();
  lockstep::distributed::install_failure_handlers(comm->rank());

  CLI::App app{"lockstep: data-parallel training of convolutional networks"};
  app.require_subcommand(1);
  TrainConfig config;
  auto* train_cmd =
      app.add_subcommand("train", "train a model (settings from --config, then flags)");
  train_cmd->add_option("--config", config.config_file, "TOML experiment file");
  lockstep::app::add_train_options(*train_cmd, config);
  EvaluateArgs eval_args;
  auto* eval_cmd = app.add_subcommand("evaluate", "evaluate a checkpoint on its test set");
  eval_cmd->add_option("--checkpoint", eval_args.checkpoint, "checkpoint file")->required();
  eval_cmd->add_option("--data-dir,--data_dir", eval_args.data_dir, "dataset folder");
  eval_cmd->add_option("--test-subset,--test_subset", eval_args.test_subset,
                       "first N test samples");
  eval_cmd->add_option("--threads", eval_args.threads, "compute threads per rank (0: auto)");
  auto* info_cmd = app.add_subcommand("info", "print how lockstep was built and what it sees");
  auto* options_cmd = app.add_subcommand("options", "print every train option as markdown");
  BenchArgs bench_args;
  auto* bench_cmd = app.add_subcommand("bench", "training images/second on synthetic data");
  bench_cmd->add_option("--model", bench_args.models, "models (default: mnist_net alexnet_cifar)");
  bench_cmd->add_option("--threads", bench_args.threads, "thread counts per rank (default: 1 2)");
  bench_cmd->add_option("--batch", bench_args.batch,
                        "batch per rank (0: 64 for mnist_net, 128 for alexnet_cifar)");
  bench_cmd->add_option("--seconds", bench_args.seconds, "minimum timed seconds per case")
      ->capture_default_str();
  bench_cmd->add_option("--timeline", bench_args.timeline, "Chrome trace of the timed steps");
  bench_cmd->add_option("--precision", bench_args.precision, "fp32 | bf16 (as train's key)")
      ->capture_default_str();
  bench_cmd->add_flag("--allreduce", bench_args.allreduce,
                      "time the fused gradient reduction against one plain allreduce");
  bench_cmd
      ->add_option("--bucket-cap-mb,--bucket_cap_mb", bench_args.bucket_caps,
                   "--allreduce: bucket caps, MiB (0: one bucket per parameter)")
      ->capture_default_str();
  bench_cmd
      ->add_option("--allreduce-chunk-mb,--allreduce_chunk_mb", bench_args.chunks,
                   "pieces of each bucket's allreduce, MiB (0: whole buckets); several: one "
                   "run each")
      ->capture_default_str();
  bench_cmd
      ->add_option("--first-bucket-mb,--first_bucket_mb", bench_args.first_bucket_mb,
                   "--allreduce: first bucket's limit, MiB")
      ->capture_default_str();
  bench_cmd->add_option("--repeats", bench_args.repeats, "--allreduce: timed repetitions")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bench_cmd->add_flag("--no-overlap,--no_overlap", bench_args.no_overlap,
                      "--allreduce: reduce every bucket on the calling thread");
  bench_cmd
      ->add_option("--stall-warning-s,--stall_warning_s", bench_args.stall_warning_s,
                   "as train's key; 0 makes collectives plain blocking MPI calls (not polled)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  lockstep::app::PredictArgs predict_args;
  auto* predict_cmd = app.add_subcommand("predict", "classify image files with a checkpoint");
  lockstep::app::add_predict_options(*predict_cmd, predict_args);
  auto* data_cmd = app.add_subcommand("data", "look at and convert datasets");
  data_cmd->require_subcommand(1);
  lockstep::app::ShowArgs show_args;
  auto* show_cmd = data_cmd->add_subcommand(
      "show", "PNG contact sheet of samples per class as training sees them");
  lockstep::app::add_show_options(*show_cmd, show_args);
  lockstep::app::ExportArgs export_args;
  auto* export_cmd =
      data_cmd->add_subcommand("export", "write a dataset as an image folder of PNGs");
  lockstep::app::add_export_options(*export_cmd, export_args);
  auto* timeline_cmd = app.add_subcommand("timeline", "read Chrome traces written by --timeline");
  timeline_cmd->require_subcommand(1);
  lockstep::app::TimelineSummaryArgs timeline_args;
  auto* summary_cmd = timeline_cmd->add_subcommand(
      "summary", "per rank and step: backward, allreduce, hidden and exposed communication");
  lockstep::app::add_timeline_summary_options(*summary_cmd, timeline_args);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (comm->rank() != 0) return e.get_exit_code();
    return app.exit(e);
  }

  return lockstep::distributed::run_guarded(*comm, [&]() -> int {
    if (*info_cmd) {
      if (comm->rank() == 0)
        std::cout << lockstep::app::build_info() << "  ranks    : " << comm->describe() << "\n";
      return 0;
    }
    if (*options_cmd) {
      if (comm->rank() == 0) std::cout << lockstep::app::options_markdown(*train_cmd);
      return 0;
    }
    if (*eval_cmd) return evaluate(eval_args, *comm);
    if (*bench_cmd) return bench(bench_args, *comm);
    // Single-process tools: rank 0 does the work, other ranks have none.
    if (*predict_cmd) return comm->rank() == 0 ? lockstep::app::run_predict(predict_args) : 0;
    if (*summary_cmd)
      return comm->rank() == 0 ? lockstep::app::run_timeline_summary(timeline_args) : 0;
    if (*export_cmd) return comm->rank() == 0 ? lockstep::app::run_data_export(export_args) : 0;
    if (*show_cmd) {
      if (!show_args.config.config_file.empty())
        lockstep::app::apply_config_file(*show_cmd, show_args.config.config_file);
      return comm->rank() == 0 ? lockstep::app::run_data_show(show_args) : 0;
    }
    if (!config.config_file.empty())
      lockstep::app::apply_config_file(*train_cmd, config.config_file);
    return train(config, *comm);
  });
}
