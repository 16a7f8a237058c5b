// Config files: parsing, typing and validation of every key.
#include <CLI/CLI.hpp>

#include "app/config.h"
#include "fuzz/fuzz_input.h"
#include "nn/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  lockstep::fuzz::MemoryFile file(data, size);
  CLI::App cmd;
  lockstep::app::TrainConfig config;
  lockstep::app::add_train_options(cmd, config);
  try {
    lockstep::app::apply_config_file(cmd, file.path());
    lockstep::app::validate(config);
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
