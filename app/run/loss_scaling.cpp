#include "app/run/loss_scaling.h"

#include <sstream>

#include "common/error.h"
#include "distributed/timeline.h"

namespace lockstep::app {

bool loss_scaling_on(const TrainConfig& config) {
  return config.loss_scaling == "on" ||
         (config.loss_scaling == "auto" && config.precision == "fp16");
}

std::unique_ptr<nn::GradScaler> make_grad_scaler(const TrainConfig& config) {
  if (!loss_scaling_on(config)) return nullptr;
  nn::GradScalerConfig sc;
  sc.init_scale = static_cast<float>(config.loss_scale_init);
  sc.growth_interval = config.loss_scale_growth_interval;
  return std::make_unique<nn::GradScaler>(sc);
}

bool scaled_step(nn::GradScaler& scaler, distributed::DistributedOptimizer& dopt,
                 nn::Optimizer& inner, nn::Backend& backend, distributed::Communicator& comm,
                 const std::vector<nn::Parameter*>& params, float lr,
                 distributed::Timeline* timeline) {
  const float average = dopt.reduce_gradients();
  const float unscale = scaler.unscale_factor();
  int64_t found = 0;
  {
    distributed::TimelineSpan span(timeline, "non-finite gradient check", "optimizer");
    found = nn::has_non_finite(backend, params) ? 1 : 0;
    if (comm.size() > 1) {
      comm.set_stall_label("loss scaling: non-finite gradient flag");
      comm.allreduce(std::span<int64_t>(&found, 1), distributed::ReduceOp::kMax);
    }
  }
  if (!scaler.update(found != 0)) {
    distributed::TimelineSpan span(timeline, "step skipped (inf/NaN gradients)", "optimizer");
    return false;
  }
  distributed::TimelineSpan span(timeline, "inner optimizer step", "optimizer");
  inner.step(backend, lr, average * unscale);
  return true;
}

std::string describe(const nn::GradScaler& scaler) {
  const nn::GradScalerConfig& c = scaler.config();
  std::ostringstream out;
  out << "loss scaling: scale " << scaler.scale() << " (initial " << c.init_scale << "), x"
      << c.growth_factor << " after " << c.growth_interval << " clean steps, x" << c.backoff_factor
      << " and skip on inf/NaN gradients";
  return out.str();
}

nlohmann::json scaler_state_json(const nn::GradScaler& scaler) {
  return {{"scale", scaler.state().scale}, {"growth_tracker", scaler.state().growth_tracker}};
}

void restore_scaler_state(nn::GradScaler& scaler, const nlohmann::json& state,
                          const std::string& source) {
  nn::GradScalerState s;
  try {
    s.scale = state.at("scale").get<float>();
    s.growth_tracker = state.at("growth_tracker").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail_input(source, ": malformed loss_scale state: ", e.what());
  }
  scaler.set_state(s);
}

}  // namespace lockstep::app
