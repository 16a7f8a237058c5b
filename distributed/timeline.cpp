#include "distributed/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"

namespace lockstep::distributed {
namespace {

// Appends s as the body of a JSON string (without quotes).
void append_escaped(std::string& out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char code[8];
          std::snprintf(code, sizeof(code), "\\u%04x", static_cast<unsigned>(c));
          out += code;
        } else {
          out += c;
        }
    }
  }
}

std::string read_file(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) fail_input("timeline ", file, ": cannot open for reading (", std::strerror(errno), ")");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses a streamed trace one line at a time: "[" on the first line, one
// event per line, each maybe followed by ",", maybe a final "]". Only the
// last line may be broken (cut off mid-write); it is dropped.
nlohmann::json parse_streamed(const std::string& file, const std::string& text) {
  nlohmann::json events = nlohmann::json::array();
  std::istringstream lines(text);
  std::string line;
  bool opened = false;
  std::string broken;
  while (std::getline(lines, line)) {
    size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    size_t last = line.find_last_not_of(" \t\r,");
    std::string_view body(line.data() + first, last == std::string::npos ? 0 : last + 1 - first);
    if (!opened) {
      if (body.empty() || body.front() != '[') {
        fail_input("timeline ", file, ": not a Chrome trace (does not start with '[')");
      }
      opened = true;
      body.remove_prefix(1);
      if (body.empty()) continue;
    }
    if (body == "]") break;
    if (!broken.empty()) {
      fail_input("timeline ", file, ": unreadable event in the middle of the file: ", broken);
    }
    auto event = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
    if (event.is_discarded() || !event.is_object()) {
      broken = std::string(body.substr(0, 80));
      continue;
    }
    events.push_back(std::move(event));
  }
  if (!opened) fail_input("timeline ", file, ": empty file");
  return events;
}

}  // namespace

Timeline::Timeline(std::string file, int rank, Clock::time_point start)
    : file_(std::move(file)), rank_(rank), start_(start) {
  out_ = std::fopen(file_.c_str(), "w");
  if (out_ == nullptr) {
    fail_input("timeline ", file_, ": cannot open for writing (", std::strerror(errno), ")");
  }
  buffer_ = "[\n";
  metadata("process_name", kMainThread, "rank " + std::to_string(rank_));
  metadata("process_sort_index", kMainThread, "");
  metadata("thread_name", kMainThread, "main");
  metadata("thread_name", kCommThread, "communication");
  std::lock_guard<std::mutex> lock(mutex_);
  write_locked();
}

Timeline::~Timeline() {
  try {
    close();
  } catch (...) {
    // A destructor does not throw; close() explicitly to see write errors.
  }
}

double Timeline::now_us() const {
  return std::chrono::duration<double, std::micro>(Clock::now() - start_).count();
}

void Timeline::metadata(std::string_view kind, int tid, std::string_view value) {
  std::string line = "{\"name\":\"";
  line += kind;
  line += "\",\"ph\":\"M\",\"pid\":" + std::to_string(rank_) + ",\"tid\":" + std::to_string(tid);
  if (kind == "process_sort_index") {
    line += ",\"args\":{\"sort_index\":" + std::to_string(rank_) + "}},\n";
  } else {
    line += kind == "process_labels" ? ",\"args\":{\"labels\":\"" : ",\"args\":{\"name\":\"";
    append_escaped(line, value);
    line += "\"}},\n";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  buffer_ += line;
}

void Timeline::label_process(std::string_view labels) {
  metadata("process_labels", kMainThread, labels);
}

void Timeline::record(std::string_view name, std::string_view category, char phase, int tid,
                      double ts_us, double duration_us) {
  // Format outside the lock; the comm thread records concurrently.
  std::string line = "{\"name\":\"";
  line.reserve(128);
  append_escaped(line, name);
  line += "\",\"cat\":\"";
  append_escaped(line, category);
  char tail[160];
  if (phase == 'X') {
    std::snprintf(tail, sizeof(tail),
                  "\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d},\n", ts_us,
                  duration_us, rank_, tid);
  } else if (phase == 'i') {
    std::snprintf(tail, sizeof(tail),
                  "\",\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d},\n", ts_us, rank_,
                  tid);
  } else {
    std::snprintf(tail, sizeof(tail), "\",\"ph\":\"%c\",\"ts\":%.3f,\"pid\":%d,\"tid\":%d},\n",
                  phase, ts_us, rank_, tid);
  }
  line += tail;
  std::lock_guard<std::mutex> lock(mutex_);
  if (out_ == nullptr) return;  // closed
  buffer_ += line;
  if (++buffered_events_ >= kFlushEvents) write_locked();
}

void Timeline::complete(std::string_view name, std::string_view category, int tid, double start_us,
                        double duration_us) {
  record(name, category, 'X', tid, start_us, duration_us);
}

void Timeline::begin(std::string_view name, std::string_view category, int tid) {
  record(name, category, 'B', tid, now_us(), 0.0);
}

void Timeline::end(std::string_view name, std::string_view category, int tid) {
  record(name, category, 'E', tid, now_us(), 0.0);
}

void Timeline::instant(std::string_view name, std::string_view category, int tid) {
  record(name, category, 'i', tid, now_us(), 0.0);
}

void Timeline::write_locked() {
  if (out_ != nullptr && !buffer_.empty()) {
    if (std::fwrite(buffer_.data(), 1, buffer_.size(), out_) != buffer_.size() ||
        std::fflush(out_) != 0) {
      write_failed_ = true;
    }
  }
  buffer_.clear();
  buffered_events_ = 0;
}

void Timeline::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  write_locked();
}

void Timeline::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (out_ == nullptr) return;
  write_locked();
  // The file ends in "},\n" (the metadata events guarantee one event):
  // replace the last ",\n" with "\n]\n".
  bool ok = !write_failed_ && std::fseek(out_, -2, SEEK_END) == 0 && std::fputs("\n]\n", out_) >= 0;
  ok = std::fclose(out_) == 0 && ok;
  out_ = nullptr;
  if (!ok) fail_input("timeline ", file_, ": write failed (disk full?)");
}

std::string timeline_rank_path(const std::string& path, int rank) {
  if (rank == 0) return path;
  const std::string suffix = ".json";
  const std::string tag = ".rank" + std::to_string(rank);
  if (path.size() >= suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return path.substr(0, path.size() - suffix.size()) + tag + suffix;
  }
  return path + tag;
}

std::unique_ptr<Timeline> make_timeline(const std::string& path, Communicator& comm) {
  comm.barrier();
  return std::make_unique<Timeline>(timeline_rank_path(path, comm.rank()), comm.rank());
}

std::vector<std::string> finish_timeline(Timeline& timeline, Communicator& comm) {
  // Close before the barrier so rank 0 reads complete files; an error is
  // rethrown only after the barrier, so no rank is left waiting in it.
  std::exception_ptr error;
  try {
    timeline.close();
  } catch (...) {
    error = std::current_exception();
  }
  comm.barrier();
  if (error) std::rethrow_exception(error);
  if (comm.rank() != 0) return {};
  std::vector<std::string> inputs{timeline.file()};
  for (int r = 1; r < comm.size(); ++r) inputs.push_back(timeline_rank_path(timeline.file(), r));
  std::vector<std::string> skipped = merge_timelines(inputs, timeline.file());
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (std::find(skipped.begin(), skipped.end(), inputs[i]) == skipped.end()) {
      std::error_code ignored;
      std::filesystem::remove(inputs[i], ignored);
    }
  }
  return skipped;
}

nlohmann::json read_trace_events(const std::string& file) {
  const std::string text = read_file(file);
  auto strict = nlohmann::json::parse(text, nullptr, false);
  if (!strict.is_discarded()) {
    if (strict.is_array()) return strict;
    if (strict.is_object() && strict.contains("traceEvents") && strict["traceEvents"].is_array()) {
      return strict["traceEvents"];
    }
    fail_input("timeline ", file, ": JSON but not a Chrome trace");
  }
  return parse_streamed(file, text);
}

std::vector<std::string> merge_timelines(const std::vector<std::string>& inputs,
                                         const std::string& output) {
  std::vector<std::string> skipped;
  std::vector<nlohmann::json> all;
  for (const std::string& input : inputs) {
    try {
      all.push_back(read_trace_events(input));
    } catch (const InputError&) {
      skipped.push_back(input);
    }
  }
  const std::string temp = output + ".tmp";
  {
    std::ofstream out(temp, std::ios::trunc);
    if (!out)
      fail_input("timeline ", temp, ": cannot open for writing (", std::strerror(errno), ")");
    out << "[\n";
    bool first = true;
    for (const nlohmann::json& events : all) {
      for (const nlohmann::json& event : events) {
        out << (first ? "" : ",\n") << event.dump();
        first = false;
      }
    }
    out << "\n]\n";
    out.flush();
    if (!out) fail_input("timeline ", temp, ": write failed (disk full?)");
  }
  std::error_code error;
  std::filesystem::rename(temp, output, error);
  if (error) fail_input("timeline ", output, ": cannot replace (", error.message(), ")");
  return skipped;
}

}  // namespace lockstep::distributed
