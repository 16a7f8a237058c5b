// The config keys as command-line flags: declared from the schema, read back
// as text after parsing and converted by set_from_text (app/config/config_schema.h).
#include <CLI/CLI.hpp>
#include <algorithm>

#include "app/config/config_schema.h"
#include "common/error.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

std::string dashed(const std::string& name) {
  std::string d = name;
  std::replace(d.begin(), d.end(), '_', '-');
  return d;
}

// "--batch_size,--batch-size" for a key with underscores, else "--key".
std::string option_names(const std::string& name) {
  const std::string d = dashed(name);
  return d == name ? "--" + name : "--" + name + ",--" + d;
}

std::string help_of(const Key& key) {
  std::string help = key.help;
  const std::string allowed = describe_allowed(key);
  if (!allowed.empty() && allowed != "finite") help += " [" + allowed + "]";
  if (*key.unit != '\0') help += " (" + std::string(key.unit) + ")";
  return help;
}

// CLI11's placeholder after a flag: BOOL, INT, FLOAT, TEXT, ... (lists: one or more).
std::string placeholder(const Key& key) {
  const std::string t = type_name(key);
  if (t == "integer") return "INT";
  if (t == "number") return "FLOAT";
  if (t == "string") return "TEXT";
  if (t == "list of integers") return "INT";  // CLI11 adds " ..."
  if (t == "list of numbers") return "FLOAT";
  return "TEXT";
}

bool is_list(const Key& key) {
  return std::holds_alternative<std::vector<float> C::*>(key.field) ||
         std::holds_alternative<std::vector<int64_t> C::*>(key.field) ||
         std::holds_alternative<std::vector<std::string> C::*>(key.field);
}

const CLI::Option* given(const CLI::App& cmd, const Key& key) {
  const CLI::Option* opt = cmd.get_option_no_throw("--" + std::string(key.name));
  return opt != nullptr && opt->count() > 0 ? opt : nullptr;
}

}  // namespace

void add_config_options(CLI::App& cmd, Command command) {
  // Values stay as text in the options; read_config() converts them.
  const auto keep = [](const CLI::results_t&) { return true; };
  if (command != kEvaluate) {
    cmd.add_option("--config", keep, "TOML experiment file (keys as below)")->type_name("FILE");
  }
  const TrainConfig defaults;
  for (const Key& key : config_schema()) {
    if ((key.commands & command) == 0) continue;
    CLI::Option* opt = cmd.add_option(option_names(key.name), keep, help_of(key));
    if (std::holds_alternative<bool C::*>(key.field)) {
      // --overlap, --overlap false, --overlap=false. The default goes into
      // the placeholder: CLI11 would give default_str to a bare --overlap.
      opt->type_name("BOOL=" + display_value(key, defaults));
      opt->expected(0, 1);
      continue;
    }
    opt->type_name(placeholder(key));
    opt->default_str(display_value(key, defaults));
    if (is_list(key)) {
      opt->expected(1, CLI::detail::expected_max_vector_size)->allow_extra_args(true);
      opt->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    }
  }
}

void apply_command_line(const CLI::App& cmd, Command command, TrainConfig& config) {
  for (const Key& key : config_schema()) {
    if ((key.commands & command) == 0) continue;
    if (const CLI::Option* opt = given(cmd, key)) {
      set_from_text(key, opt->results(), config);
      // A value that replaced the file's is not the file's concern.
      config.origins[key.name] = {"flag --" + dashed(key.name), false};
    }
  }
}

TrainConfig read_config(const CLI::App& cmd, Command command) {
  TrainConfig config;
  const CLI::Option* file = cmd.get_option_no_throw("--config");
  FileLines from_file;
  if (file != nullptr && file->count() > 0) {
    config.config_file = file->results().back();
    apply_config_file(config.config_file, command, config, &from_file);
  }
  for (const auto& [name, where] : from_file) config.origins[name] = {where, true};
  apply_command_line(cmd, command, config);
  validate(config);
  return config;
}

}  // namespace lockstep::app
