// `lockstep data show` and `lockstep data export`.
//
// show: a PNG contact sheet of the first N samples of each class (one row
// per class, its name at the left), exactly as the training sees them: the
// same dataset options, normalisation and (train split) augmentation drawn
// for (seed, epoch, sample id), then mapped back to pixels for display by
// inverting the normalisation (or by per-image min-max).
//
//   | label | g | cell | g | cell | ... | g |      g = kSheetGap pixels,
//                                               cell = image * zoom
//   width  = label column + per_class * (cell width + g) + g
//   height = classes * (cell height + g) + g
//
// export: a dataset (built-in or folder) written as an image folder of PNGs
// (data/image_folder.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "app/config/config.h"
#include "data/dataset.h"
#include "data/image_io.h"
#include "data/transform.h"

namespace CLI {
class App;
}

namespace lockstep::app {

inline constexpr int64_t kSheetGap = 2;  // pixels between cells and rows

struct ShowArgs {
  TrainConfig config;  // the keys of `data show` (read_config(cmd, kDataShow) after parsing)
  std::string out = "data_show.png";  // PNG file written
  int64_t per_class = 8;              // samples shown per class (columns)
  std::string split = "train";        // train (augmented as in training) | test
  int64_t epoch = 0;                  // epoch whose augmentation is drawn (0-based)
  int64_t zoom = 0;                   // pixels per image pixel (0: images at least 48 px)
  std::string scale = "inverse";      // inverse (undo normalisation) | minmax (per image)
};

struct SheetOptions {
  int64_t per_class = 8;
  int64_t zoom = 1;
  bool minmax = false;
  data::Normalization normalization;
  data::Augmentation augmentation;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// The zoom ShowArgs::zoom = 0 picks for images of this size.
int64_t auto_zoom(int64_t height, int64_t width);
// Width of the class-name column for these names and cell height.
int64_t label_column_width(const std::vector<std::string>& class_names, int64_t cell_height);

// The contact sheet (RGB) of dataset, laid out as above.
data::Image contact_sheet(const data::Dataset& dataset, const SheetOptions& options);

struct ExportArgs {
  std::string dataset = "fashion-mnist";
  std::string data_dir;  // empty: the dataset's default folder
  std::string out;       // folder that gets train/ and test/
  int64_t limit = 0;     // at most N images per class and split (0: all)
  int64_t threads = 0;   // encoding threads (0: every core)
};

// The config keys of data show (and --config) plus the flags of ShowArgs.
void add_show_options(CLI::App& cmd, ShowArgs& args);
void add_export_options(CLI::App& cmd, ExportArgs& args);
// Each prints one line saying what it wrote.
int run_data_show(const ShowArgs& args);
int run_data_export(const ExportArgs& args);

}  // namespace lockstep::app
