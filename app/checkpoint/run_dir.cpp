#include "app/checkpoint/run_dir.h"

#include <filesystem>
#include <system_error>

#include "app/checkpoint/checkpoint.h"
#include "common/error.h"
#include "data/image_io.h"

namespace lockstep::app {

namespace fs = std::filesystem;

void prepare_run_dir(const TrainConfig& config) {
  const fs::path dir(config.run_dir);
  std::error_code ec;
  fs::remove(dir / kCompleteMarker, ec);
  if (!config.resume.empty()) return;
  CheckpointStore store((dir / "checkpoints").string(), 0);
  const auto existing = store.numbered();
  if (existing.empty()) return;
  if (!config.overwrite) {
    fail_input("run_dir ", config.run_dir, " holds ", existing.size(), " checkpoint",
               existing.size() == 1 ? "" : "s", " of another run (newest ", existing.back(),
               "); continue it with --resume auto, choose another --run-dir, or pass --overwrite "
               "to delete its checkpoints and results");
  }
  for (const std::string& path : existing) {
    fs::remove(path, ec);
    if (ec) fail_input("--overwrite: cannot remove ", path, ": ", ec.message());
  }
  // And the other run's results, which this run would otherwise leave
  // beside its own (a best.lsck of the other run, its weights, its curves).
  for (const char* name :
       {"metrics.csv", "best.lsck", "model.safetensors", "per_class_accuracy.csv",
        "confusion_matrix.csv", "confusion_matrix.png", "tensorboard"}) {
    fs::remove_all(dir / name, ec);
    if (ec) fail_input("--overwrite: cannot remove ", (dir / name).string(), ": ", ec.message());
  }
}

void mark_run_complete(const std::string& run_dir, int64_t epochs_done, int64_t epochs,
                       bool early_stop) {
  const std::string text = detail::concat("complete: ", early_stop ? "early stop after " : "",
                                          "epoch ", epochs_done, " of ", epochs, "\n");
  data::write_text_atomically((fs::path(run_dir) / kCompleteMarker).string(), text);
}

}  // namespace lockstep::app
