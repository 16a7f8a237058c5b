// `lockstep export`: a checkpoint's model as a file other tools read.
//
//   lockstep export --checkpoint C --format safetensors --out model.safetensors
//   lockstep export --checkpoint C --format onnx --out model.onnx
#pragma once

#include <string>

namespace CLI {
class App;
}

namespace lockstep::app {

struct ModelExportArgs {
  std::string checkpoint;
  std::string format;  // safetensors | onnx; "": from out's extension (.onnx: onnx)
  std::string out;
};

void add_model_export_options(CLI::App& cmd, ModelExportArgs& args);
// Writes args.out; throws InputError naming the file at fault, or when
// --format and out's extension (.onnx, .safetensors) disagree.
int run_model_export(const ModelExportArgs& args);

}  // namespace lockstep::app
