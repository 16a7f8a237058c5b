#include "support/run_files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace lockstep::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

namespace {

std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream s(line);
  for (std::string f; std::getline(s, f, ',');) fields.push_back(f);
  return fields;
}

}  // namespace

std::vector<CsvRow> read_csv(const std::string& path) {
  const std::vector<std::string> lines = lines_of(read_file(path));
  if (lines.empty()) return {};
  const std::vector<std::string> header = fields_of(lines[0]);
  std::vector<CsvRow> rows;
  for (size_t l = 1; l < lines.size(); ++l) {
    const std::vector<std::string> fields = fields_of(lines[l]);
    CsvRow row;
    for (size_t i = 0; i < fields.size() && i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(row);
  }
  return rows;
}

std::vector<std::string> last_metrics(const std::string& run_dir) {
  const std::vector<std::string> lines = lines_of(read_file(run_dir + "/metrics.csv"));
  return lines.empty() ? std::vector<std::string>{} : fields_of(lines.back());
}

std::string newest_checkpoint(const std::string& run_dir) {
  return app::CheckpointStore(run_dir + "/checkpoints", 0).latest();
}

app::Checkpoint final_checkpoint(const std::string& run_dir) {
  return app::load_checkpoint(newest_checkpoint(run_dir));
}

void expect_same_tensors(const app::Checkpoint& a, const app::Checkpoint& b) {
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(a.entries[i].name, b.entries[i].name);
    EXPECT_TRUE(a.entries[i].values == b.entries[i].values) << a.entries[i].name << " differs";
  }
}

std::string mnist_train_args(const std::string& data_dir, const std::string& run_dir,
                             const std::string& flags) {
  return "train --dataset mnist --data-dir " + data_dir + " --threads 1 " + flags + " --run-dir " +
         run_dir;
}

std::string fashion_mnist_train_args(const std::string& run_dir, int epochs, int64_t train_subset,
                                     int64_t test_subset, int threads) {
  return "train --dataset fashion-mnist --train-subset " + std::to_string(train_subset) +
         " --test-subset " + std::to_string(test_subset) + " --epochs " + std::to_string(epochs) +
         " --progress plain --threads " + std::to_string(threads) + " --run-dir " + run_dir;
}

}  // namespace lockstep::testing
