// Per-class evaluation: the confusion matrix (rows: true class, columns:
// predicted class = the model's argmax, ties to the lower index), top-k
// accuracy (the true class among the k largest outputs), per-class accuracy
// (recall), reduced over ranks as integer counts so every sample counts
// once; and the files a run leaves: CSVs and a PNG heat map with class
// names.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace lockstep::app {

class ClassMetrics {
 public:
  ClassMetrics(int64_t classes, int64_t top_k);

  // outputs: (n, classes) host values, labels: n.
  void add(const float* outputs, const int32_t* labels, int64_t n);
  // Sums the counts over all ranks (a collective).
  void reduce(distributed::Communicator& comm);

  int64_t classes() const { return classes_; }
  int64_t top_k() const { return top_k_; }
  int64_t samples() const { return samples_; }
  // confusion(t, p): samples of true class t predicted as p.
  int64_t confusion(int64_t truth, int64_t predicted) const {
    return confusion_[static_cast<size_t>(truth * classes_ + predicted)];
  }
  double top1_accuracy() const;
  double top_k_accuracy() const;
  // Correct / samples of class c (NaN when the class has no sample).
  double class_accuracy(int64_t c) const;

 private:
  int64_t classes_, top_k_;
  int64_t samples_ = 0, top_k_correct_ = 0;
  std::vector<int64_t> confusion_;  // (classes, classes)
};

// class,name,samples,correct,accuracy
void write_per_class_csv(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names);
// true\predicted header of names, then one row per true class.
void write_confusion_csv(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names);
// Heat map of row-normalised counts, class names on both axes, counts in the
// cells.
void write_confusion_png(const std::string& path, const ClassMetrics& m,
                         const std::vector<std::string>& names);
// The three files as dir/confusion_matrix.csv, dir/per_class_accuracy.csv,
// dir/confusion_matrix.png.
void write_class_reports(const std::string& dir, const ClassMetrics& m,
                         const std::vector<std::string>& names);

}  // namespace lockstep::app
