// Timeline: a per-rank trace of what training spends its time on, written as
// Chrome trace JSON (open it in https://ui.perfetto.dev or chrome://tracing).
//
// One Timeline object per rank, no globals. Callers hold a `Timeline*`; a
// null pointer is a disabled timeline and every recording site costs one
// branch (TimelineSpan checks it; build span names only when enabled).
//
// Tracks: pid = rank (labelled "rank R"), tid = kMainThread (0) for the
// training loop, kCommThread (1) for the distributed optimizer's
// communication thread. Timestamps are microseconds from the timeline's start;
// make_timeline() starts every rank's clock just after a barrier so the
// ranks' tracks line up.
//
// File format: the Chrome trace "JSON Array Format", streamed: "[" then one
// event per line, each followed by ",". Events are buffered and written every
// kFlushEvents events and by flush(). A clean close() replaces the last ","
// with "]", so the file is strict JSON. A file cut off by a crash (missing
// "]", a trailing "," or a half-written last line) still opens in Perfetto
// and chrome://tracing, which tolerate exactly that; read_trace_events() reads
// such a file too.
//
// Multi-rank: rank 0 writes the given path, rank r writes
// rank_path(path, r) ("trace.json" -> "trace.rank2.json"). At a clean end,
// finish_timeline() closes every rank's file, waits on a barrier, and rank 0
// merges the other ranks' files into the main file (one track per rank) and
// removes them. This needs the ranks' files on a file system rank 0 can read
// (the usual shared one); a file rank 0 cannot read is left out of the merge
// and named in the returned list. After a crash, the per-rank files are all
// there: merge_timelines() can combine them offline.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "distributed/communicator.h"

namespace lockstep::distributed {

class Timeline {
 public:
  static constexpr int kMainThread = 0;
  static constexpr int kCommThread = 1;
  static constexpr size_t kFlushEvents = 100;

  using Clock = std::chrono::steady_clock;

  // Creates (truncates) `file` for rank `rank` and writes the track metadata.
  // Throws InputError naming the file when it cannot be written.
  Timeline(std::string file, int rank, Clock::time_point start = Clock::now());
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;
  // Closes the file (as close(), errors ignored).
  ~Timeline();

  int rank() const { return rank_; }
  const std::string& file() const { return file_; }
  // Microseconds since the timeline's start.
  double now_us() const;

  // A complete span ("ph":"X") from start_us lasting duration_us.
  void complete(std::string_view name, std::string_view category, int tid, double start_us,
                double duration_us);
  // Separate begin/end events ("ph":"B"/"E"); they must nest per tid.
  void begin(std::string_view name, std::string_view category, int tid = kMainThread);
  void end(std::string_view name, std::string_view category, int tid = kMainThread);
  // A point in time ("ph":"i", thread scope).
  void instant(std::string_view name, std::string_view category, int tid = kMainThread);
  // Labels of this rank's track ("process_labels" metadata, shown beside
  // its name), e.g. what the run computes in: "precision bf16, kernels avx512".
  void label_process(std::string_view labels);

  // Writes buffered events to the file and flushes it (the file then ends in
  // ",\n" and is valid after read_trace_events' repair).
  void flush();
  // Flushes and terminates the array; later events are dropped. Throws
  // InputError naming the file on a write error. Idempotent.
  void close();

 private:
  void record(std::string_view name, std::string_view category, char phase, int tid, double ts_us,
              double duration_us);
  void metadata(std::string_view kind, int tid, std::string_view value);
  void write_locked();

  std::string file_;
  int rank_;
  Clock::time_point start_;
  std::mutex mutex_;
  std::FILE* out_ = nullptr;
  std::string buffer_;
  size_t buffered_events_ = 0;
  bool write_failed_ = false;
};

// Records a complete span on construction..destruction; does nothing (one
// branch) when timeline is null.
class TimelineSpan {
 public:
  TimelineSpan(Timeline* timeline, std::string_view name, std::string_view category,
               int tid = Timeline::kMainThread)
      : timeline_(timeline), name_(name), category_(category), tid_(tid) {
    if (timeline_ != nullptr) start_us_ = timeline_->now_us();
  }
  TimelineSpan(const TimelineSpan&) = delete;
  TimelineSpan& operator=(const TimelineSpan&) = delete;
  ~TimelineSpan() {
    if (timeline_ != nullptr) {
      timeline_->complete(name_, category_, tid_, start_us_, timeline_->now_us() - start_us_);
    }
  }

 private:
  Timeline* timeline_;
  std::string_view name_, category_;  // must outlive the span (literals, stored names)
  int tid_;
  double start_us_ = 0.0;
};

// "trace.json" -> "trace.rank3.json"; a path without ".json" gets ".rank3"
// appended. Rank 0 keeps the path as given.
std::string timeline_rank_path(const std::string& path, int rank);

// Every rank: a barrier (so the ranks' clocks start together), then a
// Timeline writing timeline_rank_path(path, comm.rank()).
std::unique_ptr<Timeline> make_timeline(const std::string& path, Communicator& comm);

// Every rank, at a clean end: closes this rank's file, barrier, then rank 0
// merges the other ranks' files into `timeline`'s file and deletes them.
// Returns (on rank 0) the per-rank files that could not be read and were left
// out; empty elsewhere. Collective: every rank must call it.
std::vector<std::string> finish_timeline(Timeline& timeline, Communicator& comm);

// The events of a trace file, strict or cut off (missing "]", trailing ",",
// a partial last line). Throws InputError naming the file if it cannot be
// read or is not a trace.
nlohmann::json read_trace_events(const std::string& file);

// Writes the events of every input (in order) into `output` as one strict
// JSON array (written to a temporary file, then renamed). Inputs that cannot
// be read are skipped and returned. `output` may also be one of the inputs.
std::vector<std::string> merge_timelines(const std::vector<std::string>& inputs,
                                         const std::string& output);

}  // namespace lockstep::distributed
