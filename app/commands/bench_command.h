// `lockstep bench`: its flags and the driver that runs the cases of
// app/commands/bench.h and prints one line per case (and "bench {...}" JSON lines).
#pragma once

#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace CLI {
class App;
}

namespace lockstep::app {

struct BenchArgs {
  std::vector<std::string> models{"mnist_net", "alexnet_cifar"};
  std::vector<int> threads{1, 2};
  int64_t batch = 0;  // 0: 64 for mnist_net, 128 for alexnet_cifar
  double seconds = 3.0;
  std::string timeline;  // Chrome trace of the timed steps ("": none)
  bool allreduce = false;
  std::vector<double> bucket_caps{25.0};
  std::vector<double> chunks{1.0};
  double first_bucket_mb = 1.0;
  int repeats = 10;
  bool no_overlap = false;
  double stall_warning_s = 60.0;      // as train's default; 0: blocking MPI calls
  double liveness_timeout_s = 15.0;   // as train's key; 0: no heartbeat
  double heartbeat_interval_s = 1.0;  // as train's key
  std::string precision = "fp32";     // fp32 | bf16, as train's key
  // off | on | both: the reproducible mode; both alternates the two modes
  // over kModeRounds rounds per case and prints their medians and the cost.
  std::string reproducible = "off";
};

void add_bench_options(CLI::App& cmd, BenchArgs& args);
// Collective; rank 0 prints.
int run_bench_command(const BenchArgs& args, distributed::Communicator& comm);

}  // namespace lockstep::app
