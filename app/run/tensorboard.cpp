#include "app/run/tensorboard.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "app/formats/tfrecord.h"
#include "app/run/report.h"
#include "common/error.h"
#include "common/little_endian.h"
#include "data/image_io.h"

namespace lockstep::app {
namespace {

void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void bytes_field(std::string& out, uint32_t field, const std::string& bytes) {
  varint(out, (field << 3) | 2);
  varint(out, bytes.size());
  out += bytes;
}

template <typename T>
void fixed_field(std::string& out, uint32_t field, T v) {
  varint(out, (field << 3) | (sizeof(T) == 8 ? 1 : 5));
  append_le(out, v);
}

std::string file_version_event(double wall_time) {
  std::string e;
  fixed_field(e, 1, wall_time);
  bytes_field(e, 3, "brain.Event:2");
  return e;
}

double now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A minimal protobuf reader: the fields of one message.
struct Field {
  uint32_t number = 0, wire = 0;
  uint64_t value = 0;     // varint, fixed32, fixed64
  std::string_view data;  // length-delimited
};

bool next_field(std::string_view& in, Field& f) {
  auto read_varint = [&in](uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
      const auto b = static_cast<uint8_t>(in.front());
      in.remove_prefix(1);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  };
  uint64_t key = 0;
  if (in.empty() || !read_varint(key)) return false;
  f.number = static_cast<uint32_t>(key >> 3);
  f.wire = static_cast<uint32_t>(key & 7);
  if (f.wire == 0) return read_varint(f.value);
  const size_t n = f.wire == 1 ? 8 : f.wire == 5 ? 4 : 0;
  if (n) {
    if (in.size() < n) return false;
    f.value = 0;
    std::memcpy(&f.value, in.data(), n);
    in.remove_prefix(n);
    return true;
  }
  if (f.wire != 2 || !read_varint(f.value) || f.value > in.size()) return false;
  f.data = in.substr(0, f.value);
  in.remove_prefix(f.value);
  return true;
}

// Appends the scalars of one Event message.
void event_scalars(std::string_view event, std::vector<ScalarEvent>& out) {
  Field f;
  int64_t step = 0;
  std::vector<ScalarEvent> found;
  while (next_field(event, f)) {
    if (f.number == 2 && f.wire == 0) step = static_cast<int64_t>(f.value);
    if (f.number != 5 || f.wire != 2) continue;
    std::string_view summary = f.data;
    Field v;
    while (next_field(summary, v)) {
      if (v.number != 1 || v.wire != 2) continue;
      ScalarEvent s;
      std::string_view value = v.data;
      Field g;
      while (next_field(value, g)) {
        if (g.number == 1 && g.wire == 2) s.tag = std::string(g.data);
        if (g.number == 2 && g.wire == 5) std::memcpy(&s.value, &g.value, 4);
        if (g.number == 5) s.is_scalar = false;
      }
      found.push_back(s);
    }
  }
  for (ScalarEvent& s : found) {
    s.step = step;
    out.push_back(std::move(s));
  }
}

// An Event (wall_time = 1, step = 2, summary = 5) holding a Summary with the
// one Summary.Value `value`.
std::string summary_event(const std::string& value, int64_t step, double wall_time) {
  std::string summary;
  bytes_field(summary, 1, value);
  std::string e;
  fixed_field(e, 1, wall_time);
  varint(e, 2 << 3);
  varint(e, static_cast<uint64_t>(step));
  bytes_field(e, 5, summary);
  return e;
}

}  // namespace

std::string scalar_event(const std::string& tag, int64_t step, float value, double wall_time) {
  std::string v;
  bytes_field(v, 1, tag);
  fixed_field(v, 2, value);
  return summary_event(v, step, wall_time);
}

std::string histogram_event(const std::string& tag, int64_t step, const std::vector<float>& values,
                            int buckets, double wall_time) {
  double lo = values.empty() ? 0.0 : values[0], hi = lo, sum = 0.0, squares = 0.0;
  for (float v : values) {
    lo = std::min<double>(lo, v);
    hi = std::max<double>(hi, v);
    sum += v;
    squares += double(v) * v;
  }
  const double width = hi > lo ? (hi - lo) / buckets : 1.0;
  std::vector<double> counts(static_cast<size_t>(buckets), 0.0);
  for (float v : values) {
    const auto b = static_cast<size_t>(std::min<double>(buckets - 1, (v - lo) / width));
    counts[b] += 1.0;
  }
  std::string limits, bucket_counts;
  for (int b = 0; b < buckets; ++b) {
    const double limit = b + 1 == buckets ? hi : lo + width * (b + 1);
    append_le(limits, limit);
    append_le(bucket_counts, counts[static_cast<size_t>(b)]);
  }
  std::string h;
  fixed_field(h, 1, lo);
  fixed_field(h, 2, hi);
  fixed_field(h, 3, static_cast<double>(values.size()));
  fixed_field(h, 4, sum);
  fixed_field(h, 5, squares);
  bytes_field(h, 6, limits);  // packed doubles
  bytes_field(h, 7, bucket_counts);
  std::string v;
  bytes_field(v, 1, tag);
  bytes_field(v, 5, h);
  return summary_event(v, step, wall_time);
}

std::vector<ScalarEvent> read_scalar_events(const std::string& bytes) {
  std::vector<ScalarEvent> out;
  for (const std::string& record : read_tfrecords(bytes)) event_scalars(record, out);
  std::erase_if(out, [](const ScalarEvent& s) { return !s.is_scalar; });
  return out;
}

TensorBoardLog::TensorBoardLog(const std::string& dir, bool resume, int64_t epochs_done,
                               int64_t global_step, int64_t log_every)
    : path_(dir + "/events.out.tfevents.lockstep"), log_every_(log_every) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail_input(dir, ": cannot create the TensorBoard folder: ", ec.message());
  // The records to keep, rewritten atomically before appending.
  std::string kept = tfrecord(file_version_event(now()));
  if (resume) {
    std::ifstream in(path_, std::ios::binary);
    std::ostringstream old;
    old << in.rdbuf();
    const std::vector<std::string> records = read_tfrecords(old.str());
    for (size_t i = 1; i < records.size(); ++i) {  // [0]: the old file_version
      std::vector<ScalarEvent> s;
      event_scalars(records[i], s);
      const bool late = !s.empty() && (s[0].tag.starts_with("epoch/") ? s[0].step > epochs_done
                                                                      : s[0].step > global_step);
      if (!late) kept += tfrecord(records[i]);
    }
  }
  data::write_text_atomically(path_, kept);
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) fail_input(path_, ": cannot open the TensorBoard event file for appending");
}

TensorBoardLog::~TensorBoardLog() {
  if (file_) std::fclose(file_);
}

void TensorBoardLog::write(const std::string& record) {
  const std::string framed = tfrecord(record);
  if (std::fwrite(framed.data(), 1, framed.size(), file_) != framed.size() ||
      std::fflush(file_) != 0) {
    fail_input(path_, ": cannot write the TensorBoard event file (disk full?)");
  }
}

void TensorBoardLog::scalar(const std::string& tag, int64_t step, double value) {
  write(scalar_event(tag, step, static_cast<float>(value), now()));
}

void TensorBoardLog::histogram(const std::string& tag, int64_t step,
                               const std::vector<float>& values) {
  write(histogram_event(tag, step, values, 30, now()));
}

void TensorBoardLog::weight_histograms(const nn::Model& model, int64_t epoch) {
  for (const nn::Parameter* p : model.parameters()) {
    nn::Tensor host(p->value.shape(), nn::Device::kCpu);
    host.copy_from(p->value);
    histogram("epoch/weights/" + p->name, epoch, {host.data(), host.data() + host.numel()});
  }
}

void TensorBoardLog::step_loss(int64_t global_step, double loss_sum, double count) {
  loss_sum_ += loss_sum;
  count_ += count;
  if (!step_due(global_step) || count_ <= 0) return;
  scalar("step/train_loss", global_step, loss_sum_ / count_);
  loss_sum_ = count_ = 0.0;
}

void TensorBoardLog::epoch(const EpochResult& r) {
  scalar("epoch/train_loss", r.epoch, r.train_loss);
  scalar("epoch/train_accuracy", r.epoch, r.train_accuracy);
  if (r.evaluated) {
    scalar("epoch/test_loss", r.epoch, r.test_loss);
    scalar("epoch/test_accuracy", r.epoch, r.test_accuracy);
    scalar("epoch/test_top_k_accuracy", r.epoch, r.test_top_k_accuracy);
  }
  if (r.validated) {
    scalar("epoch/val_loss", r.epoch, r.val_loss);
    scalar("epoch/val_accuracy", r.epoch, r.val_accuracy);
  }
  scalar("epoch/lr", r.epoch, r.lr);
  scalar("epoch/images_per_second", r.epoch, r.images_per_second);
  scalar("epoch/allreduce_wait_s", r.epoch, r.comm_wait_seconds);
}

}  // namespace lockstep::app
