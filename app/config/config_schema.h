// The config schema: one entry per key of TrainConfig, the single source of
// the flags, the TOML reader, validation, checkpoint JSON, the fingerprint
// and the documentation (app/config/config.h).
//
// To add a key: add the field, with its default, to TrainConfig, and one
// entry to the table in app/config/config_schema.cpp, e.g.
//
//   key("label_smoothing", &C::label_smoothing,
//       "mix this much of a uniform target into the labels")
//       .range(between(0, 1)),
//
// .range (numbers, with their unit: "MiB", "s", ...), .allowed
// (enumerations), .commands (default: train only), .ranks_may_differ()
// (default: every rank must agree), .fixed_on_resume() (a key that alters
// the model or the data) and .launch_only() (not compared on resume) are
// optional. Supported field types are
// those of Field below. Then run scripts/gen_config_docs.sh (a test fails
// while configs/README.md is out of date).
#pragma once

#include <limits>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "app/config/config.h"

namespace lockstep::app {

using Field = std::variant<bool TrainConfig::*, int64_t TrainConfig::*, uint64_t TrainConfig::*,
                           double TrainConfig::*, std::string TrainConfig::*,
                           std::vector<float> TrainConfig::*, std::vector<int64_t> TrainConfig::*,
                           std::vector<std::string> TrainConfig::*, nn::Precision TrainConfig::*,
                           nn::OptimizerKind TrainConfig::*, nn::LrScheduleKind TrainConfig::*,
                           nn::LrScaling TrainConfig::*>;

// The names of an enumeration field (nn/'s tables): its allowed values, its
// text in files, flags and checkpoints.
inline const auto& enum_names(nn::Precision*) {
  return nn::kPrecisionNames;
}
inline const auto& enum_names(nn::OptimizerKind*) {
  return nn::kOptimizerNames;
}
inline const auto& enum_names(nn::LrScheduleKind*) {
  return nn::kLrScheduleNames;
}
inline const auto& enum_names(nn::LrScaling*) {
  return nn::kLrScalingNames;
}

template <typename E>
std::string enum_name(E value) {
  return nn::value_of(enum_names(static_cast<E*>(nullptr)), value).value_or("?");
}

// Inclusive bounds of a number (of each element, for lists of numbers);
// min_exclusive turns the lower bound into "> min", max_exclusive the upper
// one into "< max". Numbers are always finite.
struct Range {
  double min = -std::numeric_limits<double>::max();
  double max = std::numeric_limits<double>::max();
  bool min_exclusive = false;
  bool max_exclusive = false;
};

inline Range between(double min, double max) {
  return {min, max, false};
}
inline Range at_least(double min) {
  return {min, std::numeric_limits<double>::max(), false};
}
// > 0 (up to max).
inline Range positive(double max = std::numeric_limits<double>::max()) {
  return {0, max, true};
}
// >= min and < max.
inline Range below(double min, double max) {
  return {min, max, false, true};
}

// What resuming from a checkpoint may do with a key (app/checkpoint/resume_policy.h).
enum class OnResume {
  kMayChange,   // a changed value is listed when the run resumes
  kFixed,       // alters the model or the data it trains on: a change is refused
  kLaunchOnly,  // says how this launch runs: not compared
};

struct Key {
  const char* name;  // TOML key and --name; --name-with-dashes too
  Field field;
  const char* help;
  const char* unit = "";             // of numbers: "MiB", "s", "epochs", ...
  Range range = {};                  // numbers
  std::vector<std::string> allowed;  // enumerations: the accepted values
  unsigned commands = kTrain;        // Command bits of the subcommands that use it
  bool fingerprint = true;           // every rank must agree (start-up check)
  OnResume on_resume = OnResume::kMayChange;
};

// Throws InputError "config key K is "text"; expected one of ...".
[[noreturn]] void fail_not_allowed(const Key& key, std::string_view text);

// The value of an enumeration key named by text; fail_not_allowed otherwise.
template <typename E>
E parse_enum(const Key& key, std::string_view text) {
  if (const auto v = nn::key_of(enum_names(static_cast<E*>(nullptr)), text)) return *v;
  fail_not_allowed(key, text);
}

// Every key, in documentation order.
const std::vector<Key>& config_schema();
// The key named name, or null.
const Key* find_key(const std::string& name);

// Type of a key for people: "integer", "number", "true/false", "string",
// "list of numbers", ...
std::string type_name(const Key& key);
// The value of key in config as written in the docs: 10, 0.01, true,
// "runs/default", [] ...
std::string display_value(const Key& key, const TrainConfig& config);
// Allowed values or range of key for people: "auto, on, off", "> 0",
// "0 to 1024", "" when any value of the type goes.
std::string describe_allowed(const Key& key);

// Sets key in config from command-line text (all values of a repeated or
// multi-valued flag; a flag given alone for a true/false key). Throws
// InputError naming the flag.
void set_from_text(const Key& key, const std::vector<std::string>& values, TrainConfig& config);

// Throws InputError naming the key when its value in config is outside its
// range or allowed values.
void check_value(const Key& key, const TrainConfig& config);

}  // namespace lockstep::app
