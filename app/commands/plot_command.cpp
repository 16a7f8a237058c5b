#include "app/commands/plot_command.h"

#include <unistd.h>
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "data/image_io.h"

namespace lockstep::app {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream s(line);
  for (std::string f; std::getline(s, f, ',');) out.push_back(f);
  return out;
}

double number(const std::string& s) {
  try {
    return std::stod(s);
  } catch (const std::exception&) {
    return std::nan("");
  }
}

std::string metrics_path(const std::string& run) {
  return fs::is_directory(run) ? run + "/metrics.csv" : run;
}

std::string run_title(const std::string& run) {
  fs::path p = fs::path(run).lexically_normal();
  if (!fs::is_directory(run)) p = p.parent_path();
  if (p.filename().empty()) p = p.parent_path();
  std::string t = p.filename().string();
  for (char& c : t)
    if (c == '\n' || c == '\r') c = ' ';
  return t.empty() ? run : t;
}

// A gnuplot string in single quotes (in which only '' is special).
std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// One curve: column col of a run's data file.
void curve(std::ostringstream& g, const std::string& data, int col, size_t run, int dash,
           const std::string& title) {
  g << quoted(data) << " using 1:" << col << " with linespoints lc " << run + 1 << " dt " << dash
    << " title " << quoted(title);
}

// A folder of its own under the system's temporary folder, removed with
// everything in it when this goes out of scope.
class TempFolder {
 public:
  TempFolder() {
    std::string pattern = (fs::temp_directory_path() / "lockstep-plot-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      fail_input("plot: cannot create a temporary folder under ",
                 fs::temp_directory_path().string(), ": ", std::strerror(errno));
    }
    path_ = pattern;
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempFolder(const TempFolder&) = delete;
  TempFolder& operator=(const TempFolder&) = delete;
  fs::path file(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out.flush()) fail_input("plot: cannot write ", path.string(), " (is the disk full?)");
}

// data[i]: run i's points (epoch, train, test, val loss; the accuracies);
// validated[i]: whether it has validation points.
std::string gnuplot_script(const PlotArgs& args, const std::string& png,
                           const std::vector<std::string>& data,
                           const std::vector<bool>& validated) {
  std::ostringstream g;
  g << "set terminal pngcairo size " << args.width << "," << args.height
    << " noenhanced font 'sans,10'\n"
    << "set output " << quoted(png) << "\n"
    << "set datafile missing 'nan'\nset key outside bottom center horizontal\n"
    << "set grid\nset xlabel 'epoch'\nset multiplot layout 1,2\n";
  for (int panel = 0; panel < 2; ++panel) {
    g << "set title '" << (panel == 0 ? "loss" : "accuracy") << "'\nplot ";
    for (size_t i = 0; i < data.size(); ++i) {
      const int col = panel == 0 ? 2 : 5;
      const std::string title = run_title(args.runs[i]);
      if (i) g << ", ";
      curve(g, data[i], col, i, 1, title + " train");
      g << ", ";
      curve(g, data[i], col + 1, i, 2, title + " test");
      if (validated[i]) {
        g << ", ";
        curve(g, data[i], col + 2, i, 3, title + " validation");
      }
    }
    g << "\n";
  }
  g << "unset multiplot\n";
  return g.str();
}

}  // namespace

std::vector<CurvePoint> read_curve(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail_input(path, ": cannot read metrics (is this a run folder?)");
  std::string line;
  std::getline(in, line);
  std::map<std::string, size_t> col;
  const auto header = split(line);
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"epoch", "train_loss", "test_loss", "train_accuracy", "test_accuracy"})
    if (!col.contains(need)) fail_input(path, ": metrics.csv has no column ", need);
  std::map<int64_t, CurvePoint> by_epoch;  // the last row of an epoch wins
  while (std::getline(in, line)) {
    const auto f = split(line);
    if (f.size() < header.size() || !std::isfinite(number(f[col["epoch"]]))) continue;
    const auto optional = [&](const char* name) {
      return col.contains(name) ? number(f[col[name]]) : std::nan("");
    };
    CurvePoint p{static_cast<int64_t>(number(f[col["epoch"]])),
                 number(f[col["train_loss"]]),
                 number(f[col["test_loss"]]),
                 number(f[col["train_accuracy"]]),
                 number(f[col["test_accuracy"]]),
                 optional("val_loss"),
                 optional("val_accuracy")};
    by_epoch[p.epoch] = p;
  }
  std::vector<CurvePoint> out;
  for (const auto& [e, p] : by_epoch) out.push_back(p);
  if (out.empty()) fail_input(path, ": metrics.csv has no epochs yet");
  return out;
}

void add_plot_options(CLI::App& cmd, PlotArgs& args) {
  cmd.add_option("runs", args.runs, "run folders (with metrics.csv) or metrics.csv files")
      ->required();
  cmd.add_option("--out", args.out, "PNG file to write")->capture_default_str();
  cmd.add_option("--width", args.width, "pixels")
      ->capture_default_str()
      ->check(CLI::Range(200, 10000));
  cmd.add_option("--height", args.height, "pixels")
      ->capture_default_str()
      ->check(CLI::Range(150, 10000));
  cmd.add_option("--gnuplot", args.gnuplot, "gnuplot program")->capture_default_str();
}

int run_plot(const PlotArgs& args) {
  std::vector<std::vector<CurvePoint>> curves;
  for (const std::string& run : args.runs) curves.push_back(read_curve(metrics_path(run)));
  const TempFolder tmp;
  std::vector<std::string> data;
  std::vector<bool> validated;
  for (size_t i = 0; i < curves.size(); ++i) {
    data.push_back(tmp.file("run" + std::to_string(i) + ".dat").string());
    validated.push_back(false);
    std::ostringstream out;
    for (const CurvePoint& p : curves[i]) {
      out << p.epoch << " " << p.train_loss << " " << p.test_loss << " " << p.val_loss << " "
          << p.train_accuracy << " " << p.test_accuracy << " " << p.val_accuracy << "\n";
      if (!std::isnan(p.val_loss)) validated.back() = true;
    }
    write_text(data.back(), out.str());
  }
  // gnuplot draws into the temporary folder; the PNG then replaces --out
  // whole (a failed plot leaves the previous one as it was).
  const std::string png = tmp.file("plot.png").string();
  const std::string script = tmp.file("plot.gp").string();
  write_text(script, gnuplot_script(args, png, data, validated));
  const std::string command = args.gnuplot + " " + quoted(script) + " 2>&1";
  std::string complaint;
  int status = -1;
  if (std::FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    while (std::fgets(buf, sizeof(buf), p)) complaint += buf;
    status = pclose(p);
  }
  std::error_code ec;
  if (status != 0 || fs::file_size(png, ec) == 0 || ec) {
    complaint = complaint.substr(0, complaint.find('\n'));  // one line
    fail_input("plot: ", args.gnuplot, " failed writing ", args.out,
               complaint.empty() ? " (is gnuplot installed? scripts/setup.sh)" : ": " + complaint);
  }
  std::ifstream in(png, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  data::write_file_atomically(args.out, bytes);
  std::printf("%s: %zu run%s, %lld x %lld pixels\n", args.out.c_str(), args.runs.size(),
              args.runs.size() == 1 ? "" : "s", static_cast<long long>(args.width),
              static_cast<long long>(args.height));
  return 0;
}

}  // namespace lockstep::app
