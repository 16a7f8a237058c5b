// apply_config_file: TOML files through toml++ (a real TOML parser: syntax
// errors with their line, duplicate keys refused), each value checked
// against its key's type in the schema.
#include <toml++/toml.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>

#include "app/config/config_schema.h"
#include "common/error.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

// text on one line: control characters as \xNN.
std::string printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 32 || u == 127) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", u);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

// printable(text), cut to 60 characters.
std::string one_line(std::string_view text) {
  const std::string out = printable(text);
  return out.size() > 60 ? out.substr(0, 57) + "..." : out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string suggestion(const std::string& name) {
  std::string best;
  // Suggest only close matches: up to a third of the name's letters wrong.
  size_t best_distance = std::max<size_t>(1, name.size() / 3) + 1;
  for (const Key& key : config_schema()) {
    const size_t d = edit_distance(name, key.name);
    if (d < best_distance) {
      best_distance = d;
      best = key.name;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

// node as a T, or nothing when it holds another type (an integer is also a
// number; a list must hold only Ts).
std::optional<bool> read(const toml::node& n, bool*) {
  return n.is_boolean() ? n.value<bool>() : std::nullopt;
}
std::optional<int64_t> read(const toml::node& n, int64_t*) {
  return n.is_integer() ? n.value<int64_t>() : std::nullopt;
}
std::optional<uint64_t> read(const toml::node& n, uint64_t*) {
  const auto v = read(n, static_cast<int64_t*>(nullptr));
  if (!v || *v < 0) return std::nullopt;
  return static_cast<uint64_t>(*v);
}
std::optional<double> read(const toml::node& n, double*) {
  return n.is_number() ? n.value<double>() : std::nullopt;
}
std::optional<float> read(const toml::node& n, float*) {
  const auto v = read(n, static_cast<double*>(nullptr));
  if (!v) return std::nullopt;
  return static_cast<float>(*v);
}
std::optional<std::string> read(const toml::node& n, std::string*) {
  return n.is_string() ? n.value<std::string>() : std::nullopt;
}
// An enumeration: a string that names one of its values (else an
// InputError naming the key and the allowed values).
template <typename E>
std::optional<E> read_enum(const Key& key, const toml::node& n) {
  if (!n.is_string()) return std::nullopt;
  return parse_enum<E>(key, n.value<std::string>().value_or(""));
}

template <typename T>
std::optional<std::vector<T>> read(const toml::node& n, std::vector<T>*) {
  const toml::array* array = n.as_array();
  if (array == nullptr) return std::nullopt;
  std::vector<T> out;
  for (const toml::node& e : *array) {
    const auto v = read(e, static_cast<T*>(nullptr));
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

// Sets the field of key from node; false when node has the wrong type.
bool set_from_node(const Key& key, const toml::node& node, TrainConfig& c) {
  return std::visit(
      [&](auto C::*field) {
        using T = std::decay_t<decltype(c.*field)>;
        std::optional<T> value;
        if constexpr (std::is_enum_v<T>) {
          value = read_enum<T>(key, node);
        } else {
          value = read(node, &(c.*field));
        }
        if (value) c.*field = std::move(*value);
        return value.has_value();
      },
      key.field);
}

// A value as written in messages: "text", 7, [1, "a"].
std::string format_node(const toml::node& node) {
  if (const auto* text = node.as_string()) return "\"" + text->get() + "\"";
  if (const auto* array = node.as_array()) {
    std::string out;
    for (const toml::node& e : *array) out += (out.empty() ? "" : ", ") + format_node(e);
    return "[" + out + "]";
  }
  std::ostringstream out;
  node.visit([&](const auto& concrete) { out << concrete; });
  return out.str();
}

}  // namespace

void apply_config_file(const std::string& path, Command command, TrainConfig& config,
                       FileLines* lines) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    fail_input("config file ", path, ": is a folder, not a TOML file");
  }
  std::ifstream in(path, std::ios::binary);
  std::string text;
  try {
    if (in) text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {  // libstdc++ throws for some unreadable files
    fail_input("config file ", path, ": cannot be read: ", e.what());
  }
  if (!in || in.bad()) fail_input("config file ", path, ": cannot be read (missing?)");
  apply_config_text(text, path, command, config, lines);
}

void apply_config_text(std::string_view text, const std::string& path, Command command,
                       TrainConfig& config, FileLines* lines) {
  toml::table table;
  try {
    table = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail_input("config file ", path, ":", e.source().begin.line, ": ", printable(e.description()));
  }
  // In file order (toml::table iterates by name), so the first error is the first line's.
  std::vector<std::pair<std::string_view, const toml::node*>> entries;
  for (const auto& [name, node] : table) entries.emplace_back(name.str(), &node);
  std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  std::map<std::string, toml::source_index> seen;  // key ('_' spelling) -> line
  for (const auto& [name, node_pointer] : entries) {
    const toml::node& node = *node_pointer;
    const std::string place = detail::concat("config file ", path, ":", node.source().begin.line);
    const std::string where = place + ": ";
    std::string key_name(name);
    std::replace(key_name.begin(), key_name.end(), '-', '_');  // as the flags: batch-size
    const auto line = node.source().begin.line;
    if (const auto [at, fresh] = seen.emplace(key_name, line); !fresh) {
      fail_input("config file ", path, ":", std::max(at->second, line), ": key ",
                 one_line(key_name), " is given twice (lines ", std::min(at->second, line), " and ",
                 std::max(at->second, line), ", once with '-')");
    }
    if (node.is_table()) {
      fail_input(where, "unknown key ", one_line(key_name),
                 " (sections are not used: write every key at the top level)");
    }
    const Key* key = find_key(key_name);
    if (key == nullptr) {
      fail_input(where, "unknown key ", one_line(key_name), suggestion(key_name));
    }
    // Another subcommand's key is checked as well (the file is wrong for
    // that subcommand) but not applied.
    const bool used = (key->commands & command) != 0;
    std::optional<TrainConfig> unused;
    TrainConfig& target = used ? config : unused.emplace();
    bool typed = false;
    try {
      typed = set_from_node(*key, node, target);
    } catch (const InputError& e) {
      fail_input(where, e.what());  // an enumeration's unknown name, with the file and line
    }
    if (!typed) {
      fail_input(where, "key ", key->name, " has value ", one_line(format_node(node)),
                 " of the wrong type (", type_name(*key), " expected)");
    }
    if (used && lines != nullptr) {
      lines->emplace_back(key->name, place);
      continue;
    }
    try {
      check_value(*key, target);
    } catch (const InputError& e) {
      fail_input(where, e.what());  // the range error, with the file and line
    }
  }
}

}  // namespace lockstep::app
