// A run directory between launches: whether a fresh run may start in it, and
// whether its run reached the last epoch (a marker file the job scripts in
// jobs/ read, since a launcher's exit code is not to be trusted).
#pragma once

#include <cstdint>
#include <string>

#include "app/config/config.h"

namespace lockstep::app {

// Name of the marker in run_dir; its one line: "complete: epoch E of E".
inline constexpr const char* kCompleteMarker = "COMPLETE";

// Rank 0, before anything is written to config.run_dir. A fresh run (resume
// empty) into a run_dir that holds checkpoints throws InputError naming the
// directory and the remedies (--resume auto, another run_dir, --overwrite);
// with overwrite, the checkpoints and metrics.csv are removed instead. The
// completion marker is removed in every case (this launch has not finished).
void prepare_run_dir(const TrainConfig& config);

// Writes the completion marker (atomically: temporary file, rename):
// "complete: epoch 30 of 30", or with `early_stop` "complete: early stop
// after epoch 12 of 30" (patience ended the run: it is finished too).
void mark_run_complete(const std::string& run_dir, int64_t epochs_done, int64_t epochs,
                       bool early_stop = false);

}  // namespace lockstep::app
