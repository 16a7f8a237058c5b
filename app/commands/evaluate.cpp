#include "app/commands/evaluate.h"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "app/config/config.h"
#include "app/config/data_setup.h"
#include "app/run/evaluation.h"
#include "app/run/train_settings.h"
#include "data/catalog.h"
#include "distributed/fingerprint.h"
#include "distributed/liveness.h"
#include "nn/model_zoo.h"

namespace lockstep::app {

void add_evaluate_options(CLI::App& cmd, EvaluateArgs& args) {
  cmd.add_option("--checkpoint", args.checkpoint, "checkpoint file")->required();
  cmd.add_option("--report-dir,--report_dir", args.report_dir,
                 "write confusion_matrix.csv/.png and per_class_accuracy.csv here");
  add_config_options(cmd, kEvaluate);
}

int run_evaluate(const CLI::App& cmd, const EvaluateArgs& args, distributed::Communicator& comm) {
  const Checkpoint ckpt = load_checkpoint(args.checkpoint);
  TrainConfig config =
      train_config_from_json(ckpt.meta.value("config", nlohmann::json::object()), args.checkpoint);
  config.threads = 0;  // this machine's, unless --threads says otherwise
  // The data folder is the training's: a message about it says where it
  // came from and what replaces it (--data-dir, which then is its origin).
  config.origins["data_dir"] = {
      "checkpoint " + args.checkpoint + " (its training's data_dir; --data-dir gives another)",
      false};
  apply_command_line(cmd, kEvaluate, config);
  validate(config);
  // As in training: a frozen, cut-off or powered-off node ends the job
  // (its heartbeat falls silent) instead of leaving the other ranks waiting
  // in the evaluation's collectives for ever.
  const auto monitor = distributed::start_liveness(comm, liveness_policy(config));

  const int threads = compute_threads(config, comm);
  std::vector<std::string> notes;  // image folders: skipped files, cache trouble
  check_input_path(config, "data_dir");
  const data::Dataset test =
      take_subset(data::load_dataset(config.dataset, config.data_dir, false,
                                     folder_options(config, threads), &notes),
                  config, false);
  const int64_t top_k = top_k_for(config, test.num_classes);
  if (comm.rank() == 0) {
    for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  }
  // Ranks agree on the config before the device plan's collectives, which
  // differ with it.
  comm.set_stall_label("evaluate: fingerprint check");
  auto items = fingerprint_items(config);
  items.emplace_back("dataset.test.size", std::to_string(test.size()));
  distributed::check_same_fingerprint(comm, items);
  const auto backend = make_backend(config, plan_device(config, comm), threads);
  const auto model =
      nn::build_model(config.model, config.layers, {test.channels, test.height, test.width},
                      test.num_classes, config.loss);
  model->reset_parameters(config.seed, backend->device());
  model->set_label_smoothing(static_cast<float>(config.label_smoothing));
  load_weights(ckpt, args.checkpoint, *model);

  EvalBatches batches(test, *backend, train_normalization(config), config.test_batch_size,
                      model->output_size(), comm.rank(), comm.size(), config.resident_data_mb);
  const EvalResult r = evaluate_model(*model, *backend, batches, comm, top_k);
  if (comm.rank() == 0) {
    std::printf("%s: test loss %.4f acc %.2f%% (%lld samples of %s), top-%lld acc %.2f%%\n",
                args.checkpoint.c_str(), r.loss, 100.0 * r.accuracy,
                static_cast<long long>(r.samples), config.dataset.c_str(),
                static_cast<long long>(r.classes->top_k()), 100.0 * r.top_k_accuracy);
    if (!args.report_dir.empty())
      write_class_reports(args.report_dir, *r.classes, test.class_names);
  }
  return 0;
}

}  // namespace lockstep::app
