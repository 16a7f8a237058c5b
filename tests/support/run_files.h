// Reading back what commands and runs leave in files: a whole file, its
// lines, a CSV table such as metrics.csv, a run's newest checkpoint; the
// arguments of a small training run on a synthetic MNIST folder.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "app/checkpoint/checkpoint.h"

namespace lockstep::testing {

// The bytes of path ("" when it cannot be read).
std::string read_file(const std::string& path);

// The lines of text, without their line ends.
std::vector<std::string> lines_of(const std::string& text);

// The rows of a CSV file with a header line, each as column -> field
// (fields past the header's columns are dropped; no quoting).
using CsvRow = std::map<std::string, std::string>;
std::vector<CsvRow> read_csv(const std::string& path);

// The fields of the last line of run_dir/metrics.csv.
std::vector<std::string> last_metrics(const std::string& run_dir);

// The path of the newest numbered checkpoint of run_dir, and the checkpoint.
std::string newest_checkpoint(const std::string& run_dir);
app::Checkpoint final_checkpoint(const std::string& run_dir);

// Expects a and b to hold the same entries, bit for bit, in the same order.
void expect_same_tensors(const app::Checkpoint& a, const app::Checkpoint& b);

// "train" on the MNIST-format folder data_dir (write_mnist_dir) into run_dir
// with one thread and flags (epochs, batch size, progress, ...).
std::string mnist_train_args(const std::string& data_dir, const std::string& run_dir,
                             const std::string& flags);

// "train" on train_subset and test_subset samples of the real Fashion-MNIST
// (REQUIRE_FASHION_MNIST) into run_dir, with plain progress lines.
std::string fashion_mnist_train_args(const std::string& run_dir, int epochs, int64_t train_subset,
                                     int64_t test_subset, int threads);

}  // namespace lockstep::testing
