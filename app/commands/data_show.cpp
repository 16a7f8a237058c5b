#include "app/commands/data_show.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/config/data_setup.h"
#include "common/error.h"
#include "data/batch_loader.h"
#include "data/catalog.h"
#include "data/image_folder.h"

namespace lockstep::app {
namespace {

const std::vector<uint8_t> kBackground = {32, 32, 32};
const std::vector<uint8_t> kText = {240, 240, 240};

// A row's colour mark beside its label (cycles through 8 hues).
std::vector<uint8_t> row_color(int64_t row) {
  static const uint8_t kPalette[8][3] = {{230, 25, 75},  {60, 180, 75},  {255, 225, 25},
                                         {0, 130, 200},  {245, 130, 48}, {145, 30, 180},
                                         {70, 240, 240}, {240, 50, 230}};
  const uint8_t* c = kPalette[row % 8];
  return {c[0], c[1], c[2]};
}

int64_t text_scale(int64_t cell_height) {
  return cell_height >= 30 ? 2 : 1;
}

constexpr int64_t kMark = 4;     // width of the colour mark at the row's left
constexpr int64_t kPadding = 6;  // around the label text

// Back from normalised floats (C, H, W) to display pixels, into the sheet at
// (x0, y0), each pixel a zoom x zoom block.
void paint_cell(const float* values, int64_t c, int64_t h, int64_t w, const SheetOptions& o,
                data::Image& sheet, int64_t x0, int64_t y0) {
  float lo = 0.0f, hi = 1.0f;
  if (o.minmax) {
    const auto [mn, mx] = std::minmax_element(values, values + c * h * w);
    lo = *mn;
    hi = *mx > *mn ? *mx : *mn + 1.0f;
  }
  auto stat = [](const std::vector<float>& v, int64_t k) {
    return v.size() == 1 ? v[0] : v[static_cast<size_t>(k)];
  };
  for (int64_t y = 0; y < h; ++y) {
    for (int64_t x = 0; x < w; ++x) {
      std::vector<uint8_t> rgb(3);
      for (int64_t k = 0; k < 3; ++k) {
        const int64_t ch = c == 1 ? 0 : k;
        const float v = values[(ch * h + y) * w + x];
        const float unit =
            o.minmax ? (v - lo) / (hi - lo)
                     : v * stat(o.normalization.stddev, ch) + stat(o.normalization.mean, ch);
        rgb[static_cast<size_t>(k)] =
            static_cast<uint8_t>(std::clamp(std::lround(unit * 255.0f), 0L, 255L));
      }
      data::fill_rect(sheet, x0 + x * o.zoom, y0 + y * o.zoom, o.zoom, o.zoom, rgb);
    }
  }
}

}  // namespace

int64_t auto_zoom(int64_t height, int64_t width) {
  const int64_t side = std::max<int64_t>(1, std::max(height, width));
  return std::max<int64_t>(1, (48 + side - 1) / side);
}

int64_t label_column_width(const std::vector<std::string>& class_names, int64_t cell_height) {
  int64_t widest = 0;
  for (const std::string& name : class_names) {
    widest = std::max(widest, data::text_width(name, text_scale(cell_height)));
  }
  return kMark + 2 * kPadding + widest;
}

data::Image contact_sheet(const data::Dataset& d, const SheetOptions& o) {
  d.validate();
  if (d.channels != 1 && d.channels != 3) {
    fail_input(d.source, ": cannot show images of ", d.channels, " channels (1 or 3)");
  }
  // Bounded before any product: the sheet's size is checked below.
  constexpr int64_t kMost = 4096;
  if (o.per_class < 1 || o.zoom < 1 || o.per_class > kMost || o.zoom > kMost) {
    fail_input("data show: per_class and zoom must be 1 to ", kMost, " (got ", o.per_class, ", ",
               o.zoom, ")");
  }
  const int64_t cell_h = d.height * o.zoom, cell_w = d.width * o.zoom;
  const int64_t label_w = label_column_width(d.class_names, cell_h);
  data::Image sheet{d.num_classes * (cell_h + kSheetGap) + kSheetGap,
                    label_w + o.per_class * (cell_w + kSheetGap) + kSheetGap,
                    3,
                    {}};
  int64_t pixels = 0;
  if (__builtin_mul_overflow(sheet.height, sheet.width, &pixels) ||
      pixels > data::kMaxImagePixels) {
    fail_input("data show: a ", sheet.width, "x", sheet.height,
               " sheet is too large; lower --per-class or --zoom");
  }
  sheet.pixels.resize(static_cast<size_t>(sheet.bytes()));
  data::fill_rect(sheet, 0, 0, sheet.width, sheet.height, kBackground);

  const data::PixelTransform transform(d.channels, o.normalization, o.augmentation);
  std::vector<std::vector<int64_t>> shown(static_cast<size_t>(d.num_classes));
  for (int64_t i = 0; i < d.size(); ++i) {
    auto& row = shown[static_cast<size_t>(d.labels[static_cast<size_t>(i)])];
    if (static_cast<int64_t>(row.size()) < o.per_class) row.push_back(i);
  }
  const int64_t scale = text_scale(cell_h);
  data::Batch batch;
  for (int64_t r = 0; r < d.num_classes; ++r) {
    const int64_t y0 = kSheetGap + r * (cell_h + kSheetGap);
    const std::string& name = d.class_names[static_cast<size_t>(r)];
    data::fill_rect(sheet, 0, y0, kMark, cell_h, row_color(r));
    data::draw_text(sheet, kMark + kPadding, y0 + (cell_h - data::text_height(name, scale)) / 2,
                    name, scale, kText);
    const auto& ids = shown[static_cast<size_t>(r)];
    data::fill_batch(d, ids, transform, o.seed, o.epoch, batch);
    for (size_t j = 0; j < ids.size(); ++j) {
      paint_cell(batch.images.data() + static_cast<int64_t>(j) * d.image_bytes(), d.channels,
                 d.height, d.width, o, sheet,
                 label_w + kSheetGap + static_cast<int64_t>(j) * (cell_w + kSheetGap), y0);
    }
  }
  return sheet;
}

void add_show_options(CLI::App& cmd, ShowArgs& args) {
  add_config_options(cmd, kDataShow);
  cmd.add_option("--out", args.out, "PNG file to write")->capture_default_str();
  cmd.add_option("--per-class,--per_class", args.per_class, "samples per class (columns)")
      ->capture_default_str();
  cmd.add_option("--split", args.split, "train (augmented as in training) | test")
      ->capture_default_str();
  cmd.add_option("--epoch", args.epoch, "epoch whose augmentation is drawn (0-based)")
      ->capture_default_str();
  cmd.add_option("--zoom", args.zoom, "screen pixels per image pixel (0: images >= 48 px)")
      ->capture_default_str();
  cmd.add_option("--scale", args.scale, "inverse (undo the normalisation) | minmax (per image)")
      ->capture_default_str();
}

void add_export_options(CLI::App& cmd, ExportArgs& args) {
  cmd.add_option("--dataset", args.dataset, "fashion-mnist | mnist | cifar10 | folder")
      ->capture_default_str();
  cmd.add_option("--data-dir,--data_dir", args.data_dir, "dataset folder (empty: the default)");
  cmd.add_option("--out", args.out, "folder that gets train/<class>/*.png and test/...")
      ->required();
  cmd.add_option("--limit", args.limit, "at most N images per class and split (0: all)")
      ->capture_default_str();
  cmd.add_option("--threads", args.threads, "encoding threads (0: every core)")
      ->check(CLI::Range(0, kMaxThreads));
}

int run_data_show(const ShowArgs& args) {
  validate(args.config);
  if (args.split != "train" && args.split != "test") {
    fail_input("data show: --split is \"", args.split, "\"; expected train or test");
  }
  if (args.scale != "inverse" && args.scale != "minmax") {
    fail_input("data show: --scale is \"", args.scale, "\"; expected inverse or minmax");
  }
  const bool train = args.split == "train";
  const TrainConfig& c = args.config;
  std::vector<std::string> notes;
  check_input_path(c, "data_dir");
  const data::Dataset d =
      data::load_dataset(c.dataset, c.data_dir, train, folder_options(c, c.threads), &notes);
  for (const std::string& note : notes) std::printf("%s\n", note.c_str());
  SheetOptions o;
  o.per_class = args.per_class;
  o.zoom = args.zoom > 0 ? args.zoom : auto_zoom(d.height, d.width);
  o.minmax = args.scale == "minmax";
  o.normalization = train_normalization(c);
  if (train) o.augmentation = train_augmentation(c);
  o.seed = c.seed;
  o.epoch = args.epoch;
  const data::Image sheet = contact_sheet(d, o);
  data::write_file_atomically(args.out, data::encode_png(sheet));
  std::printf("wrote %s: %lldx%lld, %lld classes x %lld samples of %s%s\n", args.out.c_str(),
              static_cast<long long>(sheet.width), static_cast<long long>(sheet.height),
              static_cast<long long>(d.num_classes), static_cast<long long>(o.per_class),
              d.name.c_str(), o.augmentation.enabled() ? " (augmented as in training)" : "");
  return 0;
}

int run_data_export(const ExportArgs& args) {
  if (args.limit < 0) fail_input("data export: --limit must be >= 0, got ", args.limit);
  const data::Dataset train = data::load_dataset(args.dataset, args.data_dir, true);
  const data::Dataset test = data::load_dataset(args.dataset, args.data_dir, false);
  const data::ExportStats s =
      data::export_image_folder(train, test, args.out, args.limit, args.threads);
  std::printf("exported %lld train and %lld test images of %s to %s/{train,test}/<class>/\n",
              static_cast<long long>(s.train_images), static_cast<long long>(s.test_images),
              args.dataset.c_str(), args.out.c_str());
  return 0;
}

}  // namespace lockstep::app
