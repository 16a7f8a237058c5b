// `lockstep predict`: classify image files with a trained checkpoint.
//
//   lockstep predict --checkpoint C image.png photos/ [--top-k 3] [--csv out.csv]
//
// The model is rebuilt from the checkpoint's stored config and input shape
// (weights only; no optimizer, no data set is read). Each image is decoded
// to the model's channel count, resized to its height x width when it
// differs (the same stb calls an image-folder dataset uses), and normalised
// as in training. A folder argument stands for every image under it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/transform.h"
#include "nn/backend.h"
#include "nn/model.h"

namespace CLI {
class App;
}

namespace lockstep::app {

struct PredictArgs {
  std::string checkpoint;
  std::vector<std::string> inputs;  // image files and folders
  std::optional<int64_t> top_k;     // classes printed per image (unset: 3, or all if fewer)
  std::string csv;                  // write path,top1,prob1,... here ("": no file)
  std::string outputs_csv;          // write path,out0,out1,... (raw model outputs) here
  int64_t threads = 0;              // compute and decoding threads (0: every core)
};

struct Prediction {
  std::string path;
  std::vector<int64_t> classes;       // top-k class indices, most probable first
  std::vector<double> probabilities;  // their softmax probabilities
  std::vector<float> outputs;         // the model's raw output row (logits or log-probabilities)
};

// A trained model that classifies image files the way it saw its training data.
class Predictor {
 public:
  // Throws InputError naming the checkpoint when it lacks the metadata
  // (config, class_names, input_shape) or its weights do not fit the model.
  Predictor(const std::string& checkpoint, int64_t threads = 0);
  ~Predictor();

  const std::vector<std::string>& class_names() const { return class_names_; }
  // Model input (C, H, W).
  const nn::Shape& input_shape() const { return model_->input_shape(); }

  // The top_k classes of each file (top_k is capped at the class count).
  // Classes are ranked by the model's output, ties to the lower index, so
  // the first is the model's argmax. Throws InputError naming a file that
  // cannot be read.
  std::vector<Prediction> predict(const std::vector<std::string>& paths, int64_t top_k);

 private:
  std::vector<std::string> class_names_;
  data::Normalization normalization_;
  int64_t threads_;
  std::unique_ptr<nn::Backend> backend_;
  std::unique_ptr<nn::Model> model_;
};

// The image files of inputs: files as given, folders searched recursively
// (sorted; .png, .jpg, .jpeg, .bmp; hidden entries skipped). Throws
// InputError for a missing input or a folder without images.
std::vector<std::string> expand_image_inputs(const std::vector<std::string>& inputs);

void add_predict_options(CLI::App& cmd, PredictArgs& args);
// Prints one line per image and writes the CSV when asked.
int run_predict(const PredictArgs& args);

}  // namespace lockstep::app
