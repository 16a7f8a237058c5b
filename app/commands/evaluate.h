// `lockstep evaluate --checkpoint C`: a checkpoint's model on its test set.
// Builds only what that needs: the test split, the model and the
// checkpoint's weights (no training set, no optimizer). The data keys
// data_dir, test_subset and threads may be overridden by flags; every other
// key comes from the config stored in the checkpoint.
#pragma once

#include <string>

#include "distributed/communicator.h"

namespace CLI {
class App;
}

namespace lockstep::app {

struct EvaluateArgs {
  std::string checkpoint;
  std::string report_dir;  // confusion matrix and per-class accuracy files ("": none)
};

void add_evaluate_options(CLI::App& cmd, EvaluateArgs& args);
// Collective. Rank 0 prints one line: loss, accuracy, samples, dataset,
// top-k accuracy; and writes the class reports to report_dir when given.
int run_evaluate(const CLI::App& cmd, const EvaluateArgs& args, distributed::Communicator& comm);

}  // namespace lockstep::app
