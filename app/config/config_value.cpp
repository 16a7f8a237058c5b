// Values of config keys: their types and display, command-line text to
// values, and the range and allowed-value checks (app/config/config_schema.h).
#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include "app/config/config_schema.h"
#include "common/error.h"

namespace lockstep::app {
namespace {

using C = TrainConfig;

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
// Spelled out for clang before 17, which does not deduce aggregates' arguments.
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

// Short text for v: 16777216, 0.01, 1e-08, 1e+12.
std::string format_number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e9) return std::to_string(static_cast<int64_t>(v));
  std::ostringstream out;
  out << v;
  return out.str();
}

// open + text + close (appends: GCC 12 warns wrongly on the + chain).
std::string enclose(const char* open, const std::string& text, const char* close) {
  std::string out = open;
  out.append(text);
  out.append(close);
  return out;
}

std::string flag_of(const Key& key) {
  std::string dashed = key.name;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return "--" + dashed;
}

std::string list_text(const std::vector<std::string>& items, const std::string& quote) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + quote + s + quote;
  return out;
}

[[noreturn]] void bad_text(const Key& key, const std::string& text, const std::string& expected) {
  std::string shown = text;
  std::replace_if(
      shown.begin(), shown.end(), [](char c) { return c < 32 || c == 127; }, '?');
  std::string allowed = describe_allowed(key);
  if (allowed == "finite") allowed.clear();
  fail_input("flag ", flag_of(key), " ", shown, ": expected ", expected,
             allowed.empty() ? "" : " (" + allowed + ")");
}

template <typename T>
T parse_integer(const Key& key, const std::string& text) {
  T v{};
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || at != end || text.empty()) bad_text(key, text, "an integer");
  return v;
}

double parse_double(const Key& key, const std::string& text) {
  double v = 0.0;
  const char* end = text.data() + text.size();
  const auto [at, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || at != end || text.empty()) bad_text(key, text, "a number");
  return v;
}

bool parse_bool(const Key& key, const std::string& text) {
  if (text.empty() || text == "true" || text == "on" || text == "yes" || text == "1") return true;
  if (text == "false" || text == "off" || text == "no" || text == "0") return false;
  bad_text(key, text, "true or false");
}

// The text of a flag as a T: one value (the last given; none for a bare
// true/false flag), or each value for a list.
int64_t parse(const Key& key, const std::string& t, int64_t*) {
  return parse_integer<int64_t>(key, t);
}
uint64_t parse(const Key& key, const std::string& t, uint64_t*) {
  return parse_integer<uint64_t>(key, t);
}
bool parse(const Key& key, const std::string& t, bool*) {
  return parse_bool(key, t);
}
double parse(const Key& key, const std::string& t, double*) {
  return parse_double(key, t);
}
float parse(const Key& key, const std::string& t, float*) {
  return static_cast<float>(parse_double(key, t));
}
std::string parse(const Key&, const std::string& t, std::string*) {
  return t;
}

// An enumeration: one of its names (app/config/config_schema.h enum_names).
template <typename E>
E parse(const Key& key, const std::string& t, E*) {
  static_assert(std::is_enum_v<E>, "a field type without its own parse()");
  return parse_enum<E>(key, t);
}

template <typename T>
T from_text(const Key& key, const std::vector<std::string>& values, T*) {
  return parse(key, values.empty() ? "" : values.back(), static_cast<T*>(nullptr));
}
template <typename T>
std::vector<T> from_text(const Key& key, const std::vector<std::string>& values, std::vector<T>*) {
  std::vector<T> out;
  for (const std::string& v : values) out.push_back(parse(key, v, static_cast<T*>(nullptr)));
  return out;
}

void check_number(const Key& key, double v) {
  const Range& r = key.range;
  const bool low = r.min_exclusive ? !(v > r.min) : !(v >= r.min);
  const bool high = r.max_exclusive ? !(v < r.max) : !(v <= r.max);
  if (!std::isfinite(v)) fail_input("config key ", key.name, " must be a finite number, got ", v);
  if (low || high) {
    fail_input("config key ", key.name, " must be ", describe_allowed(key), ", got ",
               format_number(v));
  }
}

void check_allowed(const Key& key, const std::string& value, bool quoted) {
  if (key.allowed.empty()) return;
  if (std::find(key.allowed.begin(), key.allowed.end(), value) != key.allowed.end()) return;
  const std::string q = quoted ? "\"" : "";
  fail_input("config key ", key.name, " is ", q, value, q, "; expected one of ",
             list_text(key.allowed, ""));
}

}  // namespace

void fail_not_allowed(const Key& key, std::string_view text) {
  check_allowed(key, std::string(text), true);
  fail_input("config key ", key.name, " is \"", text, "\"");  // allowed lists it: not reached
}

std::string type_name(const Key& key) {
  return std::visit(
      Overloaded{[](bool C::*) { return "true/false"; }, [](int64_t C::*) { return "integer"; },
                 [](uint64_t C::*) { return "integer >= 0"; }, [](double C::*) { return "number"; },
                 [](std::string C::*) { return "string"; },
                 [](std::vector<float> C::*) { return "list of numbers"; },
                 [](std::vector<int64_t> C::*) { return "list of integers"; },
                 [](std::vector<std::string> C::*) { return "list of strings"; },
                 [](auto C::*) { return "string"; }},  // enumerations
      key.field);
}

std::string display_value(const Key& key, const TrainConfig& c) {
  auto list = [](const auto& v, const std::string& quote) {
    std::vector<std::string> items;
    for (const auto& x : v) {
      if constexpr (std::is_arithmetic_v<std::decay_t<decltype(x)>>) {
        items.push_back(format_number(static_cast<double>(x)));
      } else {
        items.push_back(x);
      }
    }
    return enclose("[", list_text(items, quote), "]");
  };
  return std::visit(Overloaded{[&](bool C::*f) -> std::string { return c.*f ? "true" : "false"; },
                               [&](int64_t C::*f) { return std::to_string(c.*f); },
                               [&](uint64_t C::*f) { return std::to_string(c.*f); },
                               [&](double C::*f) { return format_number(c.*f); },
                               [&](std::string C::*f) { return enclose("\"", c.*f, "\""); },
                               [&](std::vector<float> C::*f) { return list(c.*f, ""); },
                               [&](std::vector<int64_t> C::*f) { return list(c.*f, ""); },
                               [&](std::vector<std::string> C::*f) { return list(c.*f, "\""); },
                               [&](auto C::*f) { return enclose("\"", enum_name(c.*f), "\""); }},
                    key.field);
}

std::string describe_allowed(const Key& key) {
  if (!key.allowed.empty()) return "one of " + list_text(key.allowed, "");
  const bool numeric = !std::holds_alternative<bool C::*>(key.field) &&
                       !std::holds_alternative<std::string C::*>(key.field) &&
                       !std::holds_alternative<std::vector<std::string> C::*>(key.field);
  if (!numeric) return "";
  const Range& r = key.range;
  const Range any;
  const bool has_min = r.min != any.min, has_max = r.max != any.max;
  const std::string low = (r.min_exclusive ? "> " : ">= ") + format_number(r.min);
  const std::string high = (r.max_exclusive ? "< " : "<= ") + format_number(r.max);
  if (has_min && has_max) {
    if (r.min_exclusive || r.max_exclusive) return low + " and " + high;
    return "from " + format_number(r.min) + " to " + format_number(r.max);
  }
  if (has_min) return low;
  if (has_max) return high;
  return std::holds_alternative<uint64_t C::*>(key.field) ? "" : "finite";
}

void set_from_text(const Key& key, const std::vector<std::string>& values, TrainConfig& c) {
  std::visit([&](auto C::*field) { c.*field = from_text(key, values, &(c.*field)); }, key.field);
}

void check_value(const Key& key, const TrainConfig& c) {
  std::visit(Overloaded{[](bool C::*) {},
                        [&](int64_t C::*f) {
                          if (key.allowed.empty()) check_number(key, static_cast<double>(c.*f));
                          check_allowed(key, std::to_string(c.*f), false);
                        },
                        [](uint64_t C::*) {}, [&](double C::*f) { check_number(key, c.*f); },
                        [&](std::string C::*f) { check_allowed(key, c.*f, true); },
                        [&](std::vector<float> C::*f) {
                          for (float v : c.*f) check_number(key, v);
                        },
                        [&](std::vector<int64_t> C::*f) {
                          for (int64_t v : c.*f) check_number(key, static_cast<double>(v));
                        },
                        [](std::vector<std::string> C::*) {},
                        [](auto C::*) {}},  // enumerations: parsed, so allowed
             key.field);
}

}  // namespace lockstep::app
