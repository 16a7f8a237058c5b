// Running the lockstep binary (or mpiexec) from tests, capturing its output.
#pragma once

#include <string>

namespace lockstep::testing {

struct CommandResult {
  int exit_code = -1;  // the process's exit status, or 128 + signal
  std::string output;  // stdout and stderr together
};

// The source tree (LOCKSTEP_SOURCE_DIR): its scripts, configs and job files.
inline const std::string kSourceDir = LOCKSTEP_SOURCE_DIR;

// Runs `command` through /bin/sh with stderr merged into stdout.
CommandResult run_command(const std::string& command);

// LOCKSTEP_BINARY followed by `args`.
CommandResult run_lockstep(const std::string& args);

// True when part occurs in text (a command's output, a file).
inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace lockstep::testing
