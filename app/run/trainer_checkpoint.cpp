// The Trainer's checkpoints: what they hold (weights, buffers, optimizer
// state, the training position) and resuming from one.
#include <nlohmann/json.hpp>

#include <filesystem>

#include "app/checkpoint/checkpoint.h"
#include "app/checkpoint/resume_policy.h"
#include "app/run/loss_scaling.h"
#include "app/run/reproducible.h"
#include "app/run/trainer.h"
#include "app/run/training_guard.h"
#include "common/error.h"
#include "data/catalog.h"

namespace lockstep::app {

std::vector<std::pair<std::string, nn::Tensor*>> Trainer::state_tensors() {
  std::vector<std::pair<std::string, nn::Tensor*>> out;
  for (nn::Parameter* p : model_->parameters()) out.emplace_back(p->name, &p->value);
  for (nn::Buffer* b : model_->buffers()) out.emplace_back(b->name, &b->value);
  for (const nn::StateTensor& s : optimizer_->state()) out.emplace_back(s.name, s.tensor);
  return out;
}

void Trainer::save_checkpoint(bool numbered, bool best) {
  if (comm_.rank() != 0 || config_.run_dir.empty()) return;
  nlohmann::json meta;
  meta["lockstep_version"] = LOCKSTEP_VERSION;
  meta["epoch"] = epochs_done_;
  meta["step"] = global_step_;
  meta["world_size"] = comm_.size();
  meta["model"] = config_.model;
  meta["dataset"] = config_.dataset;
  meta["class_names"] = train_.class_names;
  meta["input_shape"] = {train_.channels, train_.height, train_.width};
  meta["optimizer"] = {{"steps", optimizer_->steps()}, {"last_lr", optimizer_->last_lr()}};
  // All randomness is counter-based: (seed, epoch, sample id) is the state.
  meta["rng"] = {{"seed", config_.seed}, {"next_epoch", epochs_done_}};
  meta["sampler"] = {{"epoch", epochs_done_}, {"batch", 0}};
  meta["config"] = to_json(config_);
  meta["data"] = data_identity_;
  meta["kernels"] = kernels_;
  meta["best"] = best_.to_json();
  if (scaler_) meta["loss_scale"] = scaler_state_json(*scaler_);
  if (!checkpoint_row_.empty()) meta["metrics_row"] = checkpoint_row_;
  const Checkpoint checkpoint = make_checkpoint(meta, state_tensors());
  check_finite_state(checkpoint, epochs_done_);
  // The best one lives apart, so pruning the newest never removes it.
  if (best) app::save_checkpoint(config_.run_dir + "/best.lsck", checkpoint);
  if (!numbered) return;
  CheckpointStore store(config_.run_dir + "/checkpoints",
                        static_cast<int>(config_.keep_checkpoints));
  store.save(epochs_done_, global_step_, checkpoint);
}

// A checkpoint written by another number of ranks: the reproducible mode
// keeps its global batch (and so its bits); otherwise the per-rank batch is
// kept and the global batch changes. Both are said.
void Trainer::resume_world_size(int64_t stored_ranks, int64_t stored_batch,
                                const std::string& path) {
  if (stored_ranks == comm_.size()) return;
  if (config_.reproducible) {
    auto [batch, line] = derive_batch_size(stored_batch, stored_ranks, comm_.size(), path);
    report_->line(line);
    if (batch != config_.batch_size) {
      config_.batch_size = batch;
      make_batches();  // the loader's batches follow
    }
    return;
  }
  report_->line(detail::concat("resume: world size changed from ", stored_ranks, " to ",
                               comm_.size(), " ranks: per-rank batch ", config_.batch_size,
                               " kept, global batch ", stored_batch * stored_ranks, " -> ",
                               config_.batch_size * comm_.size()));
}

// Checkpoints of this run_dir after the one an explicit resume names belong
// to the timeline it abandons: left there, a later --resume auto would pick
// them up. They are deleted only with --overwrite. (Under --resume auto the
// later ones are those it could not read and said so: kept, in case the
// fault was passing; the run writes those epochs again under their names.)
void Trainer::discard_later_checkpoints(int64_t epoch, int64_t step, const std::string& path) {
  if (config_.resume == "auto") return;
  const CheckpointStore store(config_.run_dir + "/checkpoints", 0);
  const std::vector<std::string> later = store.numbered_after(epoch, step);
  if (later.empty()) return;
  if (!config_.overwrite) {
    fail_input("resume from ", path, ": ", store.dir(), " holds ", later.size(),
               " later checkpoint", later.size() == 1 ? "" : "s", " (newest ", later.back(),
               ") of the run that went on from it; pass --overwrite to delete them, or resume "
               "into another --run-dir");
  }
  for (const std::string& old : later) {
    std::error_code ec;
    std::filesystem::remove(old, ec);
    if (ec) fail_input("resume: cannot remove the later checkpoint ", old, ": ", ec.message());
    report_->line("resume: removed the later checkpoint " + old);
  }
}

void Trainer::resume() {
  if (config_.resume.empty()) return;
  std::string meta_text;
  if (comm_.rank() == 0) {
    const ResumeSource source = find_resume_checkpoint(config_.resume, config_.run_dir);
    for (const std::string& skipped : source.skipped) {
      report_->line("resume auto: skipping a bad checkpoint: " + skipped);
    }
    if (!source.found) {
      report_->line("resume auto: no readable checkpoint in " + config_.run_dir +
                    "/checkpoints, starting from scratch");
    } else {
      const std::string& path = source.path;
      const auto& m = source.checkpoint.meta;
      const auto stored = train_config_from_json(m.value("config", nlohmann::json::object()), path);
      // Training continues the run; evaluation (no run_dir) may pick its data.
      if (!config_.run_dir.empty()) {
        refuse_model_or_data_changes(stored, config_, path);
        refuse_other_data(m.value("data", nlohmann::json()), data_identity_, path,
                          data::data_folder(config_.dataset, config_.data_dir));
      }
      for (const std::string& change : changed_settings(stored, config_)) {
        report_->line("resume: setting changed since the checkpoint: " + change);
      }
      const std::string before = m.value("kernels", kernels_);
      if (before != kernels_) {
        report_->line(
            "resume: the checkpoint was trained on " + before + ", this run uses " + kernels_ +
            (config_.reproducible ? ": the bits differ from a run on one kind (reproducible = true)"
                                  : ""));
      }
      restore_tensors(source.checkpoint, path, state_tensors());
      if (!config_.run_dir.empty()) {
        discard_later_checkpoints(m.value("epoch", int64_t{0}), m.value("step", int64_t{0}), path);
      }
      nlohmann::json position;
      try {
        optimizer_->set_steps(m.at("optimizer").at("steps").get<int64_t>());
        optimizer_->set_last_lr(m.at("optimizer").at("last_lr").get<double>());
        position = {{"epoch", m.at("epoch").get<int64_t>()},
                    {"step", m.at("step").get<int64_t>()},
                    {"best", m.value("best", nlohmann::json())},
                    {"path", path},
                    {"world_size", m.value("world_size", int64_t{1})},
                    {"batch_size", stored.batch_size},
                    {"loss_scale", m.value("loss_scale", nlohmann::json())},
                    {"metrics_row", m.value("metrics_row", std::string())}};
      } catch (const nlohmann::json::exception& e) {
        fail_input(path, ": checkpoint metadata lacks training position: ", e.what());
      }
      meta_text = position.dump();
    }
  }
  comm_.set_stall_label("resume: broadcast of the checkpoint position");
  comm_.broadcast_string(meta_text, 0);
  if (meta_text.empty()) return;
  const auto position = nlohmann::json::parse(meta_text);
  epochs_done_ = position.at("epoch").get<int64_t>();
  global_step_ = position.at("step").get<int64_t>();
  report_->resume_at(epochs_done_, position.value("metrics_row", std::string()));
  best_.restore(position.at("best"));
  resume_world_size(position.at("world_size").get<int64_t>(),
                    position.at("batch_size").get<int64_t>(),
                    position.at("path").get<std::string>());
  if (scaler_ && !position.at("loss_scale").is_null()) {
    restore_scaler_state(*scaler_, position.at("loss_scale"),
                         position.at("path").get<std::string>());
  }
  report_->line("resuming from " + position.at("path").get<std::string>());
}

}  // namespace lockstep::app
