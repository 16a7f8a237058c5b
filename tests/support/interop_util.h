// The Python of the interoperability tests (build/pyenv, made by
// scripts/setup_test_deps.sh) and a gate that skips, saying why, when it or
// its packages are missing, and fails instead under CI (CI set), where the
// test script installs them.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "support/run_command.h"

namespace lockstep::testing {

inline std::string interop_python() {
  return LOCKSTEP_PYENV_PYTHON;
}

inline std::string interop_script() {
  return std::string(LOCKSTEP_SOURCE_DIR) + "/tests/interop/lockstep_interop.py";
}

// "" when the Python and its packages are there, else why not.
inline std::string interop_missing() {
  static const std::string why = [] {
    const auto r = run_command(interop_python() +
                               " -c 'import torch, safetensors, onnx, onnxruntime, tensorboard'");
    if (r.exit_code == 0) return std::string();
    return "the interoperability tests need " + interop_python() +
           " with torch, safetensors, onnx, onnxruntime and tensorboard (" +
           r.output.substr(r.output.rfind('\n', r.output.size() - 2) + 1) +
           "); run scripts/setup_test_deps.sh";
  }();
  return why;
}

// Runs the interop script with args; its output ends in PASS when all held.
inline CommandResult run_interop(const std::string& args) {
  return run_command(interop_python() + " " + interop_script() + " " + args);
}

}  // namespace lockstep::testing

#define LOCKSTEP_REQUIRE_INTEROP_PYTHON()                                                 \
  do {                                                                                    \
    const std::string lockstep_why = ::lockstep::testing::interop_missing();              \
    if (!lockstep_why.empty()) {                                                          \
      if (std::getenv("CI") != nullptr) FAIL() << lockstep_why << " (CI must run these)"; \
      GTEST_SKIP() << lockstep_why;                                                       \
    }                                                                                     \
  } while (0)
