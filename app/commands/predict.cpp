#include "app/commands/predict.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <sstream>
#include <thread>

#include "app/checkpoint/trained_model.h"
#include "app/config/config.h"
#include "app/formats/csv.h"
#include "app/platform/cpu_isa_env.h"
#include "common/error.h"
#include "data/image_io.h"
#include "data/parallel_for.h"

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kChunk = 256;  // images decoded and classified at a time

std::string format_probability(double p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6f", p);
  return buf;
}

// path,out0,out1,... with every float's shortest round-trip digits.
std::string outputs_csv(const std::vector<Prediction>& predictions) {
  std::ostringstream out;
  out << "path";
  for (size_t j = 0; j < predictions.front().outputs.size(); ++j) out << ",out" << j;
  out << "\n";
  char buf[32];
  for (const Prediction& p : predictions) {
    out << csv_field(p.path);
    for (float v : p.outputs) {
      std::snprintf(buf, sizeof(buf), ",%.9g", static_cast<double>(v));
      out << buf;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace

Predictor::Predictor(const std::string& checkpoint, int64_t threads)
    : threads_(threads > 0 ? threads : std::max(1u, std::thread::hardware_concurrency())) {
  TrainedModel trained = load_trained_model(checkpoint);
  class_names_ = std::move(trained.card.class_names);
  normalization_ = std::move(trained.card.normalization);
  backend_ = nn::make_cpu_backend(cpu_backend_options(static_cast<int>(threads_)));
  model_ = std::move(trained.model);
}

Predictor::~Predictor() = default;

std::vector<Prediction> Predictor::predict(const std::vector<std::string>& paths, int64_t top_k) {
  const nn::Shape& shape = model_->input_shape();
  const int64_t c = shape[0], h = shape[1], w = shape[2], pixels = c * h * w;
  const auto classes = static_cast<int64_t>(class_names_.size());
  top_k = std::clamp<int64_t>(top_k, 1, classes);
  const data::PixelTransform transform(c, normalization_);
  std::vector<Prediction> out;
  nn::Tensor batch;
  for (size_t first = 0; first < paths.size(); first += kChunk) {
    const auto n = static_cast<int64_t>(std::min<size_t>(kChunk, paths.size() - first));
    batch.resize({n, c, h, w});
    data::parallel_for(n, threads_, [&](int64_t i) {
      const std::string& path = paths[first + static_cast<size_t>(i)];
      const data::Image image = data::resize_image(data::load_image(path, c), h, w);
      std::vector<uint8_t> chw(static_cast<size_t>(pixels));
      data::to_planar(image, chw.data());
      transform.apply(chw.data(), h, w, data::CropFlip{}, batch.data() + i * pixels);
    });
    const nn::Tensor& output = model_->forward(*backend_, batch, {});
    for (int64_t i = 0; i < n; ++i) {
      const float* row = output.data() + i * classes;
      std::vector<int64_t> order(static_cast<size_t>(classes));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [row](int64_t a, int64_t b) { return row[a] > row[b]; });
      // Softmax of logits, or of log-probabilities (which it leaves as they are).
      double sum = 0.0;
      for (int64_t k = 0; k < classes; ++k) sum += std::exp(double(row[k]) - row[order[0]]);
      Prediction p;
      p.path = paths[first + static_cast<size_t>(i)];
      p.outputs.assign(row, row + classes);
      for (int64_t k = 0; k < top_k; ++k) {
        p.classes.push_back(order[static_cast<size_t>(k)]);
        p.probabilities.push_back(std::exp(double(row[order[k]]) - row[order[0]]) / sum);
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

std::vector<std::string> expand_image_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (!fs::is_directory(input, ec)) {
      if (!fs::exists(input, ec)) fail_input(input, ": no such image file or folder");
      files.push_back(input);
      continue;
    }
    std::vector<std::string> found;
    try {
      for (auto it = fs::recursive_directory_iterator(input);
           it != fs::recursive_directory_iterator(); ++it) {
        const std::string name = it->path().filename().string();
        if (!name.empty() && name[0] == '.') {
          if (it->is_directory()) it.disable_recursion_pending();
          continue;
        }
        if (it->is_regular_file() && data::has_image_extension(name)) {
          found.push_back(it->path().string());
        }
      }
    } catch (const fs::filesystem_error& e) {
      fail_input(e.path1().string(), ": ", e.code().message());
    }
    if (found.empty()) fail_input(input, ": folder has no images (.png, .jpg, .jpeg, .bmp)");
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  if (files.empty()) fail_input("predict: no images given");
  return files;
}

void add_predict_options(CLI::App& cmd, PredictArgs& args) {
  cmd.add_option("--checkpoint", args.checkpoint, "checkpoint file (.lsck)")->required();
  cmd.add_option("images", args.inputs, "image files (.png, .jpg, .jpeg, .bmp) or folders of them")
      ->required();
  cmd.add_option("--top-k,--top_k", args.top_k,
                 "classes shown per image, at most the model's classes (default: 3, or every "
                 "class of a model with fewer)");
  cmd.add_option("--csv", args.csv, "also write path,top1,prob1,... to this CSV file");
  cmd.add_option("--outputs-csv,--outputs_csv", args.outputs_csv,
                 "also write path,out0,out1,... (the model's raw outputs) to this CSV file");
  cmd.add_option("--threads", args.threads, "compute and decoding threads (0: every core)")
      ->check(CLI::Range(0, kMaxThreads));
}

// An output's folder exists: checked before inference, not found at its end.
void check_output_folder(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const fs::path folder = fs::absolute(path).parent_path();
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) {
    fail_input("predict: ", flag, " ", path, ": folder ", folder.string(), " does not exist");
  }
}

int run_predict(const PredictArgs& args) {
  if (args.top_k && *args.top_k < 1) fail_input("predict: --top-k must be >= 1, got ", *args.top_k);
  check_output_folder(args.csv, "--csv");
  check_output_folder(args.outputs_csv, "--outputs-csv");
  const std::vector<std::string> files = expand_image_inputs(args.inputs);
  Predictor predictor(args.checkpoint, args.threads);
  const auto& names = predictor.class_names();
  const auto classes = static_cast<int64_t>(names.size());
  if (args.top_k && *args.top_k > classes) {
    fail_input("predict: --top-k ", *args.top_k, " is more than the ", classes,
               " classes of the model in ", args.checkpoint);
  }
  const int64_t top_k = args.top_k.value_or(std::min<int64_t>(3, classes));
  const std::vector<Prediction> predictions = predictor.predict(files, top_k);
  std::ostringstream csv;
  const size_t k = predictions.front().classes.size();
  csv << "path";
  for (size_t j = 1; j <= k; ++j) csv << ",top" << j << ",prob" << j;
  csv << "\n";
  for (const Prediction& p : predictions) {
    std::printf("%s:", p.path.c_str());
    csv << csv_field(p.path);
    for (size_t j = 0; j < p.classes.size(); ++j) {
      const std::string& name = names[static_cast<size_t>(p.classes[j])];
      std::printf("%s %s %.3f", j == 0 ? "" : " |", name.c_str(), p.probabilities[j]);
      csv << "," << csv_field(name) << "," << format_probability(p.probabilities[j]);
    }
    std::printf("\n");
    csv << "\n";
  }
  std::fflush(stdout);
  if (!args.csv.empty()) data::write_text_atomically(args.csv, csv.str());
  if (!args.outputs_csv.empty())
    data::write_text_atomically(args.outputs_csv, outputs_csv(predictions));
  return 0;
}

}  // namespace lockstep::app
