// Layer lists of custom models: one spec per line, built on a 1x8x8 input
// with 10 classes. Specs with a number of more than three digits are
// skipped: the builder takes sizes at their word, and a 10^9-wide layer is
// a request for memory, not a parser bug.
#include <string>
#include <vector>

#include "common/error.h"
#include "nn/model_zoo.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  int digits = 0;
  for (char c : text) {
    digits = (c >= '0' && c <= '9') ? digits + 1 : 0;
    if (digits > 3) return 0;
  }
  std::vector<std::string> specs;
  std::string line;
  for (char c : text) {
    if (c == '\n') {
      specs.push_back(line);
      line.clear();
    } else {
      line += c;
    }
  }
  if (!line.empty()) specs.push_back(line);
  if (specs.size() > 32) return 0;
  try {
    lockstep::nn::build_model("custom", specs, {1, 8, 8}, 10);
  } catch (const lockstep::InputError&) {
  }
  return 0;
}
