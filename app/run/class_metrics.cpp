#include "app/run/class_metrics.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "app/formats/csv.h"
#include "common/error.h"
#include "data/image_io.h"

namespace lockstep::app {
namespace {

std::string name_of(const std::vector<std::string>& names, int64_t c) {
  return c < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(c)] : std::to_string(c);
}

}  // namespace

ClassMetrics::ClassMetrics(int64_t classes, int64_t top_k)
    : classes_(classes),
      top_k_(std::clamp<int64_t>(top_k, 1, classes)),
      confusion_(static_cast<size_t>(classes * classes), 0) {}

void ClassMetrics::add(const float* outputs, const int32_t* labels, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float* row = outputs + i * classes_;
    const int64_t truth = labels[i];
    LOCKSTEP_CHECK(truth >= 0 && truth < classes_, "label ", truth, " outside [0, ", classes_, ")");
    const int64_t predicted = std::max_element(row, row + classes_) - row;
    // Rank of the true class: outputs strictly above it, or equal and earlier.
    int64_t above = 0;
    for (int64_t c = 0; c < classes_; ++c)
      above += row[c] > row[truth] || (row[c] == row[truth] && c < truth);
    top_k_correct_ += above < top_k_;
    ++confusion_[static_cast<size_t>(truth * classes_ + predicted)];
    ++samples_;
  }
}

void ClassMetrics::reduce(distributed::Communicator& comm) {
  std::vector<int64_t> v = confusion_;
  v.push_back(samples_);
  v.push_back(top_k_correct_);
  comm.allreduce(std::span<int64_t>(v), distributed::ReduceOp::kSum);
  top_k_correct_ = v.back();
  v.pop_back();
  samples_ = v.back();
  v.pop_back();
  confusion_ = std::move(v);
}

double ClassMetrics::top1_accuracy() const {
  int64_t correct = 0;
  for (int64_t c = 0; c < classes_; ++c) correct += confusion(c, c);
  return samples_ ? static_cast<double>(correct) / static_cast<double>(samples_) : 0.0;
}

double ClassMetrics::top_k_accuracy() const {
  return samples_ ? static_cast<double>(top_k_correct_) / static_cast<double>(samples_) : 0.0;
}

double ClassMetrics::class_accuracy(int64_t c) const {
  int64_t total = 0;
  for (int64_t p = 0; p < classes_; ++p) total += confusion(c, p);
  return total ? static_cast<double>(confusion(c, c)) / static_cast<double>(total) : std::nan("");
}

void write_per_class_csv(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names) {
  std::ostringstream out;
  out << "class,name,samples,correct,accuracy\n";
  for (int64_t c = 0; c < m.classes(); ++c) {
    int64_t total = 0;
    for (int64_t p = 0; p < m.classes(); ++p) total += m.confusion(c, p);
    char acc[32];
    std::snprintf(acc, sizeof(acc), "%.6f", m.class_accuracy(c));
    out << c << "," << csv_field(name_of(names, c)) << "," << total << "," << m.confusion(c, c)
        << "," << acc << "\n";
  }
  data::write_text_atomically(path, out.str());
}

void write_confusion_csv(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names) {
  std::ostringstream out;
  out << "true\\predicted";
  for (int64_t p = 0; p < m.classes(); ++p) out << "," << csv_field(name_of(names, p));
  out << "\n";
  for (int64_t t = 0; t < m.classes(); ++t) {
    out << csv_field(name_of(names, t));
    for (int64_t p = 0; p < m.classes(); ++p) out << "," << m.confusion(t, p);
    out << "\n";
  }
  data::write_text_atomically(path, out.str());
}

void write_confusion_png(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names) {
  const int64_t k = m.classes(), scale = 2, cell = 44;
  int64_t label_w = 0;
  for (int64_t c = 0; c < k; ++c)
    label_w = std::max(label_w, data::text_width(name_of(names, c), scale));
  const int64_t left = label_w + 16, top = 40 + 16;
  data::Image img{top + k * cell + 40, left + k * cell + 16, 3, {}};
  img.pixels.assign(static_cast<size_t>(img.bytes()), 255);
  const std::vector<uint8_t> black{0, 0, 0}, white{255, 255, 255};
  data::draw_text(img, left, 8, "rows: true class, columns: predicted", scale, black);
  for (int64_t t = 0; t < k; ++t) {
    int64_t total = 0;
    for (int64_t p = 0; p < k; ++p) total += m.confusion(t, p);
    data::draw_text(img, 8, top + t * cell + cell / 2 - 6, name_of(names, t), scale, black);
    for (int64_t p = 0; p < k; ++p) {
      const double f = total ? double(m.confusion(t, p)) / double(total) : 0.0;
      const auto shade = static_cast<uint8_t>(255 - std::lround(200 * f));
      data::fill_rect(img, left + p * cell, top + t * cell, cell - 1, cell - 1,
                      {shade, shade, 255});
      const std::string n = std::to_string(m.confusion(t, p));
      data::draw_text(img, left + p * cell + 4, top + t * cell + cell / 2 - 6, n, 1,
                      f > 0.5 ? white : black);
    }
  }
  // Predicted-class names under the columns, as their first letters when long.
  for (int64_t p = 0; p < k; ++p) {
    std::string n = name_of(names, p);
    while (n.size() > 1 && data::text_width(n, 1) > cell - 4) n.pop_back();
    data::draw_text(img, left + p * cell + 2, top + k * cell + 8, n, 1, black);
  }
  const std::vector<uint8_t> png = data::encode_png(img);
  data::write_file_atomically(path, png);
}

void write_class_reports(const std::string& dir, const ClassMetrics& m,
                         const std::vector<std::string>& names) {
  std::filesystem::create_directories(dir);
  write_confusion_csv(dir + "/confusion_matrix.csv", m, names);
  write_per_class_csv(dir + "/per_class_accuracy.csv", m, names);
  write_confusion_png(dir + "/confusion_matrix.png", m, names);
}

}  // namespace lockstep::app
