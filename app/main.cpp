// The lockstep command: parse, build the communicator, run one subcommand.
// Any error on any rank prints one line tagged with the rank and ends the
// whole job non-zero (distributed/failure.h).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <vector>

#include "app/commands/bench_command.h"
#include "app/commands/data_show.h"
#include "app/commands/doctor.h"
#include "app/commands/evaluate.h"
#include "app/commands/export_command.h"
#include "app/commands/plot_command.h"
#include "app/commands/predict.h"
#include "app/commands/root_tool.h"
#include "app/commands/timeline_report.h"
#include "app/config/config.h"
#include "app/platform/build_info.h"
#include "app/run/trainer.h"
#include "common/error.h"
#include "distributed/failure.h"
#include "distributed/launcher_pmi.h"
#include "distributed/mpi_communicator.h"
#include "nn/layer_registry.h"

namespace app = lockstep::app;

int main(int argc, char** argv) {
  lockstep::distributed::MpiEnvironment mpi(&argc, &argv);
  auto comm = lockstep::distributed::make_mpi_communicator();
  lockstep::distributed::install_failure_handlers(comm->rank());

  CLI::App cli{"lockstep: data-parallel training of convolutional networks"};
  cli.require_subcommand(1);
  auto* train_cmd =
      cli.add_subcommand("train", "train a model (settings from --config, then flags)");
  app::add_config_options(*train_cmd, app::kTrain);
  app::EvaluateArgs eval_args;
  auto* eval_cmd = cli.add_subcommand(
      "evaluate", "evaluate a checkpoint on its test set (flags override its stored config)");
  app::add_evaluate_options(*eval_cmd, eval_args);
  auto* info_cmd = cli.add_subcommand("info", "print how lockstep was built and what it sees");
  auto* options_cmd = cli.add_subcommand("options", "print every config key as markdown");
  bool layer_docs = false;
  options_cmd->add_flag("--layers", layer_docs, "the layer types of a `layers` list instead");
  auto* doctor_cmd = cli.add_subcommand(
      "doctor", "under the job's launcher: each rank's CPUs, threads, GPU, plugin, data; problems");
  app::add_config_options(*doctor_cmd, app::kTrain);
  app::BenchArgs bench_args;
  auto* bench_cmd = cli.add_subcommand("bench", "training images/second on synthetic data");
  app::add_bench_options(*bench_cmd, bench_args);
  std::vector<app::RootTool> tools;
  tools.push_back(app::root_tool(cli, "predict", "classify image files with a checkpoint",
                                 app::add_predict_options, app::run_predict));
  auto* data_cmd = cli.add_subcommand("data", "look at and convert datasets");
  data_cmd->require_subcommand(1);
  app::ShowArgs show_args;
  auto* show_cmd = data_cmd->add_subcommand(
      "show", "PNG contact sheet of samples per class as training sees them");
  app::add_show_options(*show_cmd, show_args);
  tools.push_back(app::root_tool(*data_cmd, "export", "write a dataset as an image folder of PNGs",
                                 app::add_export_options, app::run_data_export));
  tools.push_back(app::root_tool(cli, "export",
                                 "write a checkpoint's model as safetensors (for PyTorch) or ONNX",
                                 app::add_model_export_options, app::run_model_export));
  tools.push_back(app::root_tool(cli, "plot", "loss and accuracy curves of runs as a PNG (gnuplot)",
                                 app::add_plot_options, app::run_plot));
  auto* timeline_cmd = cli.add_subcommand("timeline", "read Chrome traces written by --timeline");
  timeline_cmd->require_subcommand(1);
  tools.push_back(
      app::root_tool(*timeline_cmd, "summary",
                     "per rank and step: backward, allreduce, hidden and exposed communication",
                     app::add_timeline_summary_options, app::run_timeline_summary));
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = comm->rank() == 0 ? cli.exit(e) : e.get_exit_code();
    return mpi.end_job(std::move(comm), code, lockstep::distributed::hydra_pmi_fd_variable());
  }

  const bool root = comm->rank() == 0;
  const auto run = [&]() -> int {
    if (*info_cmd) {
      if (root) std::cout << app::build_info() << "  ranks    : " << comm->describe() << "\n";
      return 0;
    }
    if (*options_cmd) {
      if (root)
        std::cout << (layer_docs ? lockstep::nn::layer_types_markdown() : app::options_markdown());
      return 0;
    }
    if (*doctor_cmd) return app::run_doctor(app::read_config(*doctor_cmd, app::kTrain), *comm);
    if (*eval_cmd) return app::run_evaluate(*eval_cmd, eval_args, *comm);
    if (*bench_cmd) return app::run_bench_command(bench_args, *comm);
    for (const app::RootTool& tool : tools) {
      if (*tool.cmd) return root ? tool.run() : 0;
    }
    if (*show_cmd) {
      show_args.config = app::read_config(*show_cmd, app::kDataShow);
      return root ? app::run_data_show(show_args) : 0;
    }
    app::Trainer trainer(app::read_config(*train_cmd, app::kTrain), *comm);
    trainer.run();
    return 0;
  };
  const int code = lockstep::distributed::run_guarded(*comm, [&]() -> int {
    const int status = run();
    // What a command printed is its result (predict's classes, info): a
    // write that failed (a full disk behind `> file`) is an error, not 0.
    std::cout.flush();
    if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      lockstep::fail_input("cannot write the standard output: ", std::strerror(errno));
    }
    return status;
  });
  return mpi.end_job(std::move(comm), code, lockstep::distributed::hydra_pmi_fd_variable());
}
