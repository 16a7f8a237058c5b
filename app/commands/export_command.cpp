#include "app/commands/export_command.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "app/checkpoint/trained_model.h"
#include "app/formats/onnx_export.h"
#include "app/formats/weights_io.h"
#include "common/error.h"

namespace lockstep::app {

void add_model_export_options(CLI::App& cmd, ModelExportArgs& args) {
  cmd.add_option("--checkpoint", args.checkpoint, "checkpoint file (.lsck)")->required();
  cmd.add_option("--format", args.format,
                 "safetensors (weights with PyTorch's state_dict names) | onnx (inference graph); "
                 "default: from --out's extension (.onnx: onnx, else safetensors)")
      ->check(CLI::IsMember({"safetensors", "onnx"}));
  cmd.add_option("--out", args.out, "file to write")->required();
}

int run_model_export(const ModelExportArgs& given) {
  ModelExportArgs args = given;
  const std::string extension = std::filesystem::path(args.out).extension().string();
  const std::string implied = extension == ".onnx"          ? "onnx"
                              : extension == ".safetensors" ? "safetensors"
                                                            : "";
  if (args.format.empty()) args.format = implied.empty() ? "safetensors" : implied;
  if (!implied.empty() && implied != args.format) {
    fail_input("export: --out ", args.out, " ends in ", extension, " but --format is ", args.format,
               " (drop --format, or name the file .", args.format, ")");
  }
  std::error_code ec;
  if (std::filesystem::equivalent(args.out, args.checkpoint, ec)) {
    fail_input("export: --out ", args.out, " is the checkpoint itself; write elsewhere");
  }
  TrainedModel trained = load_trained_model(args.checkpoint);
  if (args.format == "onnx") {
    save_onnx(args.out, *trained.model, trained.card);
  } else {
    save_model_weights(args.out, *trained.model, trained.card);
  }
  std::printf("%s: %s %s (%lld parameters) written as %s\n", args.out.c_str(),
              trained.card.model.c_str(), args.checkpoint.c_str(),
              static_cast<long long>(trained.model->parameter_count()), args.format.c_str());
  return 0;
}

}  // namespace lockstep::app
