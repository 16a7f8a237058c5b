// What a Trainer checks and says before the first epoch: the fingerprint
// every rank compares, the banner, and the reproducible mode's set-up.
#include <sstream>

#include "app/checkpoint/resume_policy.h"
#include "app/platform/cpu_isa_env.h"
#include "app/platform/placement.h"
#include "app/run/loss_scaling.h"
#include "app/run/reproducible.h"
#include "app/run/train_settings.h"
#include "app/run/trainer.h"
#include "distributed/fingerprint.h"

namespace lockstep::app {

// The reproducible mode: exact_ sums the gradients over samples and ranks;
// the DistributedOptimizer, on a size-1 gradient communicator, only steps.
void Trainer::use_exact_sums(distributed::DistributedOptimizerConfig& dconfig) {
  check_reproducible(config_, *model_, backend_->device());
  exact_ = std::make_unique<distributed::ExactGradients>(model_->parameters());
  local_comm_ = distributed::make_single_communicator();
  dconfig.gradient_comm = local_comm_.get();
  dconfig.backward_passes_per_step = 1;
  dconfig.gradient_predivide_factor = 1.0;
}

// Ranks agree on the config (device, gpu_share, gradient_engine, ...)
// before the device plan's collectives, whose pattern differs with it.
void Trainer::check_config_fingerprint() {
  arm_stall_abort(false);  // start-up: ranks may still be decoding data
  comm_.set_stall_label("start-up config check");
  distributed::check_same_fingerprint(comm_, fingerprint_items(config_));
}

// The config was checked before the device plan (check_config_fingerprint).
void Trainer::check_fingerprint() {
  distributed::FingerprintItems items;
  for (const nn::Parameter* p : model_->parameters()) {
    items.emplace_back("model." + p->name, nn::shape_string(p->value.shape()));
  }
  items.emplace_back("dataset.train.size", std::to_string(train_.size()));
  items.emplace_back("dataset.test.size", std::to_string(test_.size()));
  items.emplace_back("dataset.validation.size", std::to_string(val_.size()));
  data_identity_ = data_identity(train_, val_, test_);
  for (const char* set : {"train", "validation", "test"}) {
    items.emplace_back(std::string("dataset.") + set + ".hash",
                       data_identity_.at(set).at("hash").get<std::string>());
  }
  items.emplace_back("dataset.image",
                     nn::shape_string({train_.channels, train_.height, train_.width}));
  if (config_.reproducible) {
    // The same bits on any N hold for one kind of kernels: AVX2 and AVX-512,
    // Winograd and direct convolutions differ in rounding (docs/reproducible.md).
    items.emplace_back(
        "CPU kernels, which reproducible = true needs alike on every rank (LOCKSTEP_CPU_ISA, "
        "LOCKSTEP_CPU_WINOGRAD)",
        kernels_);
  }
  comm_.set_stall_label("start-up fingerprint check");
  distributed::check_same_fingerprint(comm_, items);
}

void Trainer::banner() {
  std::ostringstream out;
  out << "lockstep: " << comm_.describe() << ", " << threads_ << " thread"
      << (threads_ == 1 ? "" : "s") << " per rank ("
      << (config_.threads > 0 ? "threads key"
                              : threads_reason(affinity_count(), online_cpus(), comm_.local_size()))
      << ") on " << backend_->name() << ", precision " << nn::to_string(config_.precision) << "\n";
  if (const std::string note = bf16_emulation_note(backend_->kernels()); !note.empty()) {
    out << note << "\n";
  }
  if (gradient_comm_) out << "gradients: " << gradient_comm_->describe() << "\n";
  out << "data: " << train_.name << " " << train_.size() << " samples, " << test_.name << " "
      << test_.size() << " samples";
  if (val_.size() > 0) out << ", validation " << val_.size() << " samples held out of training";
  out << " from " << train_.source << "\n"
      << batches_->describe() << "\n"
      << "test " << test_batches_->describe() << "\n"
      << model_->summary() << "\n"
      << "optimizer: " << optimizer_->describe() << ", lr " << config_.lr << " x "
      << schedule_->scale_factor() << " (" << nn::to_string(config_.lr_scaling) << " scaling for "
      << comm_.size() << " rank" << (comm_.size() == 1 ? "" : "s") << ")";
  if (config_.warmup_epochs > 0) out << ", warmup " << config_.warmup_epochs << " epochs";
  out << ", batch " << config_.batch_size << " per rank (" << config_.batch_size * comm_.size()
      << " global)";
  if (config_.backward_passes_per_step > 1) {
    out << " x " << config_.backward_passes_per_step << " backward passes per step ("
        << config_.batch_size * comm_.size() * config_.backward_passes_per_step
        << " samples per step)";
  }
  if (scaler_) out << "\n" << describe(*scaler_);
  if (epochs_done_ > 0) out << "\nresumed after epoch " << epochs_done_;
  report_->line(out.str());
}

}  // namespace lockstep::app
