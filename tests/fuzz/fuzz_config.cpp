// Config files: TOML parsing, typing and validation of every key.
#include <string_view>

#include "app/config/config.h"
#include "common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  lockstep::app::TrainConfig config;
  try {
    lockstep::app::apply_config_text(text, "fuzz.toml", lockstep::app::kTrain, config);
    lockstep::app::validate(config);
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
