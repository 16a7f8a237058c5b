#include "app/run/loss_scaling.h"

#include <sstream>

#include "common/error.h"

namespace lockstep::app {

bool loss_scaling_on(const TrainConfig& config) {
  return config.loss_scaling == "on" ||
         (config.loss_scaling == "auto" && config.precision == nn::Precision::kFp16);
}

std::unique_ptr<nn::GradScaler> make_grad_scaler(const TrainConfig& config) {
  if (!loss_scaling_on(config)) return nullptr;
  nn::GradScalerConfig sc;
  sc.init_scale = static_cast<float>(config.loss_scale_init);
  sc.growth_interval = config.loss_scale_growth_interval;
  return std::make_unique<nn::GradScaler>(sc);
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
