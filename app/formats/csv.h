// CSV fields as the files lockstep writes hold them (predictions.csv,
// confusion_matrix.csv, per_class_accuracy.csv; RFC 4180).
#pragma once

#include <string>
#include <string_view>

namespace lockstep::app {

// s as one field: as it is, or in double quotes (a quote doubled) when it
// holds a comma, a quote or a line break.
inline std::string csv_field(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string quoted = "\"";
  for (char c : s) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

}  // namespace lockstep::app
