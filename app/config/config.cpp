#include "app/config/config.h"

#include <filesystem>
#include <sstream>

#include "app/config/config_schema.h"
#include "common/error.h"
#include "nn/precision.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

// Checks that involve more than one key; errors start with where the first
// of the keys involved was set (origin_prefix).
void validate_combinations(const TrainConfig& c) {
  if (c.gradient_engine == "nccl" && c.device == "cpu") {
    fail_input(origin_prefix(c, {"gradient_engine", "device"}),
               "config key gradient_engine = \"nccl\" needs device = \"cuda\" or \"auto\"");
  }
  if (c.device == "cpu") {
    try {
      nn::check_cpu_precision(c.precision, "config key precision");  // the CPU: fp32 | bf16
    } catch (const InputError& e) {
      fail_input(origin_prefix(c, {"precision", "device"}), e.what());
    }
  }
  if (c.model != "custom" && !c.layers.empty()) {
    fail_input(origin_prefix(c, {"layers", "model"}), "config key layers is set but model is \"",
               c.model, "\": set model = \"custom\" to use a layer list");
  }
  if (c.gradient_predivide_factor != 1.0 && c.reduce_op != "average") {
    fail_input(origin_prefix(c, {"gradient_predivide_factor", "reduce_op"}),
               "config key gradient_predivide_factor needs reduce_op = \"average\"");
  }
  if (c.normalize_mean.size() != c.normalize_std.size()) {
    fail_input(origin_prefix(c, {"normalize_mean", "normalize_std"}),
               "config keys normalize_mean and normalize_std need the same number of values (",
               c.normalize_mean.size(), " and ", c.normalize_std.size(), ")");
  }
  // distributed/liveness.h checks the same; here it is named where it was set.
  if (c.liveness_timeout_s > 0 &&
      !(c.heartbeat_interval_s > 0 && c.heartbeat_interval_s < c.liveness_timeout_s)) {
    fail_input(origin_prefix(c, {"heartbeat_interval_s", "liveness_timeout_s"}),
               "config key heartbeat_interval_s (", c.heartbeat_interval_s,
               ") must be above 0 and below liveness_timeout_s (", c.liveness_timeout_s, ")");
  }
  if ((c.keep_best || c.patience > 0) && (c.val_fraction <= 0.0 || c.eval_every <= 0)) {
    fail_input(origin_prefix(c, {c.keep_best ? "keep_best" : "patience",
                                 c.val_fraction <= 0.0 ? "val_fraction" : "eval_every"}),
               "config keys keep_best and patience need a validation split: set val_fraction > 0 "
               "(and eval_every > 0)");
  }
}

std::string commands_of(const Key& key) {
  std::string out;
  for (auto [bit, name] :
       {std::pair{kTrain, "train"}, {kDataShow, "data show"}, {kEvaluate, "evaluate"}}) {
    if (key.commands & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  }
  return out;
}

// A literal | inside a markdown table cell.
std::string cell(std::string text) {
  for (size_t at = text.find('|'); at != std::string::npos; at = text.find('|', at + 2)) {
    text.replace(at, 1, "\\|");
  }
  return text;
}

// Where the file or a flag set key's value (origins); null for a default or
// a checkpoint's value.
const ValueOrigin* origin_of(const TrainConfig& config, std::string_view key) {
  const auto it = config.origins.find(std::string(key));
  return it != config.origins.end() ? &it->second : nullptr;
}

}  // namespace

void validate(const TrainConfig& config) {
  for (const Key& key : config_schema()) {
    try {
      check_value(key, config);
    } catch (const InputError& e) {
      // A value from a flag: the message names its key and value.
      const ValueOrigin* origin = origin_of(config, key.name);
      if (origin == nullptr || !origin->from_file) throw;
      fail_input(origin->where, ": ", e.what());
    }
  }
  validate_combinations(config);
}

std::string origin_prefix(const TrainConfig& config, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (const ValueOrigin* origin = origin_of(config, key)) return origin->where + ": ";
  }
  return "";
}

void check_input_path(const TrainConfig& config, std::string_view name) {
  const Key* key = find_key(std::string(name));
  const auto* field = key != nullptr ? std::get_if<std::string C::*>(&key->field) : nullptr;
  LOCKSTEP_CHECK(field != nullptr, "check_input_path: ", name, " is not a path key");
  const std::string& path = config.*(*field);
  if (path.empty() || (name == "resume" && path == "auto")) return;
  const bool folder = name == "data_dir";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (folder ? std::filesystem::is_directory(status) : std::filesystem::is_regular_file(status))
    return;
  std::string problem = std::filesystem::exists(status)
                            ? (folder ? "not a folder" : "not a regular file")
                            : (folder ? "no such folder" : "no such file");
  if (std::filesystem::path(path).is_relative()) {
    std::error_code cwd_error;
    const std::string cwd = std::filesystem::current_path(cwd_error).string();
    problem += " (a relative path is looked up from the working directory";
    problem += cwd_error ? std::string() : ", " + cwd;
    const ValueOrigin* origin = origin_of(config, name);
    problem +=
        origin != nullptr && origin->from_file ? ", not from the config file's folder)" : ")";
  }
  if (folder && (config.dataset == "mnist" || config.dataset == "cifar10")) {
    problem += "; scripts/fetch_data.sh " + config.dataset + " downloads " + config.dataset +
               " into data/" + config.dataset + " of the repository";
  }
  fail_input(origin_prefix(config, {name}), "config key ", name, " = \"", path, "\": ", problem);
}

nlohmann::json to_json(const TrainConfig& config) {
  nlohmann::json j = nlohmann::json::object();
  for (const Key& key : config_schema()) {
    std::visit(
        [&](auto C::*field) {
          if constexpr (std::is_enum_v<std::decay_t<decltype(config.*field)>>) {
            j[key.name] = enum_name(config.*field);  // as files and flags spell it
          } else {
            j[key.name] = config.*field;
          }
        },
        key.field);
  }
  return j;
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source) {
  TrainConfig config;
  try {
    for (const Key& key : config_schema()) {
      if (!j.contains(key.name)) continue;
      std::visit(
          [&](auto C::*field) {
            using T = std::decay_t<decltype(config.*field)>;
            if constexpr (std::is_enum_v<T>) {
              config.*field = parse_enum<T>(key, j.at(key.name).get<std::string>());
            } else {
              j.at(key.name).get_to(config.*field);
            }
          },
          key.field);
    }
  } catch (const nlohmann::json::exception& e) {
    fail_input(source, ": stored config is malformed: ", e.what());
  }
  return config;
}

std::vector<std::pair<std::string, std::string>> fingerprint_items(const TrainConfig& config) {
  std::vector<std::pair<std::string, std::string>> items;
  const nlohmann::json j = to_json(config);  // ordered by key name
  for (auto it = j.cbegin(); it != j.cend(); ++it) {
    const Key* key = find_key(it.key());
    if (key != nullptr && key->fingerprint) {
      items.emplace_back("config." + it.key(), it.value().dump());
    }
  }
  return items;
}

std::string options_markdown() {
  std::ostringstream out;
  out << "| key | type | default | allowed | unit | used by | meaning |\n"
      << "|---|---|---|---|---|---|---|\n";
  const TrainConfig defaults;
  std::string per_rank, fixed;
  const auto add = [](std::string& list, const Key& key) {
    list += (list.empty() ? "`" : ", `") + std::string(key.name) + "`";
  };
  for (const Key& key : config_schema()) {
    out << "| `" << key.name << "` | " << type_name(key) << " | `"
        << cell(display_value(key, defaults)) << "` | " << cell(describe_allowed(key)) << " | "
        << key.unit << " | " << commands_of(key) << " | " << cell(key.help) << " |\n";
    if (!key.fingerprint) add(per_rank, key);
    if (key.on_resume == OnResume::kFixed) add(fixed, key);
  }
  out << "\nEvery key must have the same value on every rank (checked at start-up), except "
      << per_rank << ".\n"
      << "\nA resumed run may change any key except those that alter the model or the data "
      << "(refused): " << fixed << "; and `seed` where `val_fraction` drew a validation split.\n";
  return out.str();
}

}  // namespace lockstep::app
