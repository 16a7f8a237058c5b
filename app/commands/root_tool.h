// A subcommand that only rank 0 works in (predict, plot, export, ...): the
// other ranks of a job started under a launcher have nothing to do.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

namespace lockstep::app {

struct RootTool {
  CLI::App* cmd;             // the subcommand; true when given
  std::function<int()> run;  // the work, with the options parsed; its exit code
};

// Subcommand name of parent whose options add_options declares into an
// Args of its own, run(args) doing the work.
template <typename Args>
RootTool root_tool(CLI::App& parent, const char* name, const char* help,
                   void (*add_options)(CLI::App&, Args&), int (*run)(const Args&)) {
  auto args = std::make_shared<Args>();
  CLI::App* cmd = parent.add_subcommand(name, help);
  add_options(*cmd, *args);
  return {cmd, [args, run] { return run(*args); }};
}

}  // namespace lockstep::app
