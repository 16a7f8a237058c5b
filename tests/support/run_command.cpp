#include "support/run_command.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>

namespace lockstep::testing {

CommandResult run_command(const std::string& command) {
  CommandResult result;
  const std::string full = command + " 2>&1";
  std::FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_code = 128 + WTERMSIG(status);
  }
  return result;
}

CommandResult run_lockstep(const std::string& args) {
  return run_command(std::string(LOCKSTEP_BINARY) + " " + args);
}

}  // namespace lockstep::testing
