// apply_config_file: TOML files through toml++ (a real TOML parser: syntax
// errors with their line, duplicate keys refused), each value checked
// against its key's type in the schema.
#include <toml++/toml.h>
#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>

#include "app/config_schema.h"
#include "nn/error.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};

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
  size_t best_distance = 3;  // suggest only close matches
  for (const Key& key : config_schema()) {
    const size_t d = edit_distance(name, key.name);
    if (d < best_distance) {
      best_distance = d;
      best = key.name;
    }
  }
  return best.empty() ? "" : " (did you mean " + best + "?)";
}

bool all_of(const toml::node& node, bool (toml::node::*is)() const noexcept) {
  const toml::array* a = node.as_array();
  return a != nullptr &&
         std::all_of(a->begin(), a->end(), [&](const toml::node& e) { return (e.*is)(); });
}

// Sets the field of key from node; false when node has the wrong type.
bool set_from_node(const Key& key, const toml::node& node, TrainConfig& c) {
  return std::visit(
      Overloaded{
          [&](bool C::*f) {
            return node.is_boolean() && ((c.*f = node.value<bool>().value()), true);
          },
          [&](int64_t C::*f) {
            return node.is_integer() && ((c.*f = node.value<int64_t>().value()), true);
          },
          [&](uint64_t C::*f) {
            if (!node.is_integer() || node.value<int64_t>().value() < 0) return false;
            c.*f = static_cast<uint64_t>(node.value<int64_t>().value());
            return true;
          },
          [&](double C::*f) { return node.is_number() && ((c.*f = *node.value<double>()), true); },
          [&](std::string C::*f) {
            return node.is_string() && ((c.*f = *node.value<std::string>()), true);
          },
          [&](std::vector<float> C::*f) {
            if (!all_of(node, &toml::node::is_number)) return false;
            (c.*f).clear();
            for (const auto& e : *node.as_array()) {
              (c.*f).push_back(static_cast<float>(*e.value<double>()));
            }
            return true;
          },
          [&](std::vector<int64_t> C::*f) {
            if (!all_of(node, &toml::node::is_integer)) return false;
            (c.*f).clear();
            for (const auto& e : *node.as_array()) (c.*f).push_back(*e.value<int64_t>());
            return true;
          },
          [&](std::vector<std::string> C::*f) {
            if (!all_of(node, &toml::node::is_string)) return false;
            (c.*f).clear();
            for (const auto& e : *node.as_array()) (c.*f).push_back(*e.value<std::string>());
            return true;
          }},
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

toml::table parse(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (in) text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (!in || in.bad()) fail_input("config file ", path, ": cannot be read (missing?)");
  try {
    return toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    fail_input("config file ", path, ":", e.source().begin.line, ": ", printable(e.description()));
  }
}

}  // namespace

void apply_config_file(const std::string& path, Command command, TrainConfig& config) {
  const toml::table table = parse(path);
  for (const auto& [name, node] : table) {
    const std::string where =
        detail::concat("config file ", path, ":", node.source().begin.line, ": ");
    const std::string key_name(name.str());
    if (node.is_table()) {
      fail_input(where, "unknown key ", one_line(key_name),
                 " (sections are not used: write every key at the top level)");
    }
    const Key* key = find_key(key_name);
    if (key == nullptr) {
      fail_input(where, "unknown key ", one_line(key_name), suggestion(key_name));
    }
    if ((key->commands & command) == 0) continue;  // another subcommand's key
    if (!set_from_node(*key, node, config)) {
      fail_input(where, "key ", key->name, " has value ", one_line(format_node(node)),
                 " of the wrong type (", type_name(*key), " expected)");
    }
    try {
      check_value(*key, config);
    } catch (const InputError& e) {
      fail_input(where, e.what());  // the range error, with the file and line
    }
  }
}

}  // namespace lockstep::app
