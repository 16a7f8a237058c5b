// `lockstep plot`: training curves of one or more runs as a PNG, drawn by
// gnuplot from each run's metrics.csv.
//
//   lockstep plot runs/a runs/b --out curves.png [--width 1200 --height 500]
//
// Left: train (solid), validation (dotted; runs with val_fraction) and test
// (dashed) loss against epoch; right: the same accuracies. One colour per run, titled with the run
// folder's name. For a resumed run the last row of an epoch counts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace lockstep::app {

struct PlotArgs {
  std::vector<std::string> runs;  // run folders (or metrics.csv files)
  std::string out = "curves.png";
  int64_t width = 1200, height = 500;  // pixels
  std::string gnuplot = "gnuplot";     // the program that draws
};

// One epoch of metrics.csv (NaN where a run did not evaluate).
struct CurvePoint {
  int64_t epoch = 0;
  double train_loss = 0, test_loss = 0, train_accuracy = 0, test_accuracy = 0;
  // NaN without a validation split (or columns: metrics.csv before them).
  double val_loss = 0, val_accuracy = 0;
};

// The points of a metrics.csv, by epoch. Throws InputError naming the file
// when it is missing or lacks the columns.
std::vector<CurvePoint> read_curve(const std::string& metrics_csv);

void add_plot_options(CLI::App& cmd, PlotArgs& args);
// Writes args.out; throws InputError naming the run or gnuplot's complaint.
int run_plot(const PlotArgs& args);

}  // namespace lockstep::app
